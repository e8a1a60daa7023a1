// Running h2gate as a system service, the platform's way. Windows
// (service_win.cc): the service "h2gate" of the Service Control Manager,
// `h2gate service install|uninstall|run`. POSIX (service_posix.cc): none of
// this exists (systemd runs h2gate as a plain process: deploy/debian/); every
// call says so and fails.
//
// main.cc calls these for `h2gate service ...`; nothing else of h2gate knows
// whether it runs as a service. A stop request from the service manager
// reaches the Server as ServerSignals::requestStop() (server_signals.h), so
// it drains like POST /quitquitquit.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace h2gate::service {

// The service's name in the service manager (`sc query h2gate`).
inline constexpr const char* kName = "h2gate";

// Registers the service: it starts at boot and runs this executable as
// `service run` followed by `flags` (those that followed `service install`
// on the command line), file paths (-c, --cacert, --log-file) made absolute,
// and --log-file defaultLogFile() added when not given. Messages to
// stdout/stderr. Returns the exit status (0 installed, 1 failed, 2 not on
// this platform).
int install(const std::vector<std::string>& flags);
// Stops the service if it runs (waiting for its drain) and deletes it.
// Returns the exit status as install() does.
int uninstall();

// Runs `serve` as the service, for the service manager that started this
// process: reports "start pending", calls serve(running) on a thread of the
// service manager's; serve calls running() once it listens (the service is
// then "running" and accepts stop); a stop or shutdown request becomes
// ServerSignals::requestStop() while "stop pending" is reported; when serve
// returns, "stopped" is reported with its result as the exit code. Returns
// serve's result, or 2 when this process was not started by the service
// manager (said on stderr).
using Serve = std::function<int(const std::function<void()>& running)>;
int run(const Serve& serve);

// The installed service "h2gate", as the service manager has it
// (QueryServiceConfig, QueryServiceStatus); nullopt when there is none, it
// cannot be read, or on POSIX.
struct Installed {
  std::string account;   // lpServiceStartName: "LocalSystem", "NT AUTHORITY\\LocalService", ...
  bool running = false;  // RUNNING or START_PENDING
  // Its command line split as the C runtime splits it (CommandLineToArgvW):
  // [0] the executable, then "service", "run" and the flags.
  std::vector<std::string> args;
};
std::optional<Installed> installed();

// The log file of a service started without --log-file
// (%ProgramData%\h2gate\h2gate.log, its folder created); "" on POSIX.
std::string defaultLogFile();

}  // namespace h2gate::service
