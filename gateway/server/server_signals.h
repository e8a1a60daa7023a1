// What asks the process to stop or to re-read its configuration, the
// platform's way. POSIX (server_signals_posix.cc): SIGTERM and SIGINT stop,
// SIGHUP reloads; SIGPIPE is ignored (a closed socket is an error code).
// Windows (server_signals_win.cc): Ctrl+C, Ctrl+Break, closing the console,
// logoff and shutdown stop (SetConsoleCtrlHandler); nothing reloads (POST
// /reload does). A Windows service's stop request arrives through
// requestStop() (service_win.cc).
//
// The Server drains on a stop (a second one cuts the connections) and
// reloads on a reload; POST /quitquitquit on the admin endpoint is a stop
// on every platform (server_admin.cc).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <asio.hpp>

namespace h2gate {

class ServerSignals {
 public:
  enum class Kind { Stop, Reload };
  // `name` says what it was for the log ("SIGTERM", "Ctrl+C", ...).
  using Handler = std::function<void(Kind kind, const std::string& name)>;

  // Process-wide settings before any socket exists (POSIX: SIGPIPE ignored).
  static void prepareProcess();
  // From any thread, e.g. a service control handler: a stop as if a signal
  // had come. Ignored when no ServerSignals exists.
  static void requestStop(const std::string& name);

  // Handlers run on `io`.
  explicit ServerSignals(asio::io_context& io);
  ~ServerSignals();
  ServerSignals(const ServerSignals&) = delete;
  ServerSignals& operator=(const ServerSignals&) = delete;

  // One wait at a time; `h` runs once, for the next signal (not with
  // cancel()).
  void asyncWait(Handler h);
  void cancel();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace h2gate
