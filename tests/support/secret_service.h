// A real Secret Service for the keyring tests (gateway/base/keyring_posix.cc):
// gnome-keyring-daemon on a private D-Bus session bus (dbus-daemon --session,
// its socket in the fixture's own XDG_RUNTIME_DIR), its login keyring created
// and unlocked with a password the fixture gives on standard input. Nothing
// of the machine's session is used: no bus, no display for prompts. Proven
// with secret-tool (libsecret-tools), an independent client, in
// tests/integration/keyring_test.cc; also used by
// tests/integration/corporate_day_test.cc. Header-only: h2gate() uses
// H2GATE_BINARY, which only the integration test binary defines.
#pragma once

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/h2gate.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/util.h"

namespace h2gate::test {

// The programs SecretService needs that are not installed ("" when all are).
inline std::string secretServiceToolsMissing() {
  std::string missing;
  for (const char* tool : {"dbus-daemon", "dbus-send", "gnome-keyring-daemon", "secret-tool"})
    if (findProgram(tool).empty()) missing += std::string(" ") + tool;
  return missing;
}

// gnome-keyring-daemon's Secret Service on a bus of its own.
class SecretService {
 public:
  using Env = std::map<std::string, std::optional<std::string>>;
  using Clock = std::chrono::steady_clock;

  // What a program run in the session did.
  struct Run {
    std::optional<ExitStatus> status;  // nullopt: still running at the timeout (killed)
    std::string out, err;
    double seconds = 0;
    int code() const { return status && status->exited ? status->code : -1; }
  };

  // The login keyring's password (the fixture's, not a proxy's).
  static constexpr const char* kLoginPassword = "fixture-login-keyring-pw";

  // With `unlock` false the login keyring is not unlocked (nor created).
  explicit SecretService(bool unlock = true) {
    const std::string missing = secretServiceToolsMissing();
    if (!missing.empty())
      FAIL("not installed:" << missing << " (deploy/install-deps.sh --test-core)");
    const std::string run = dir_.file("run"), home = dir_.file("home");
    ::mkdir(run.c_str(), 0700);
    ::mkdir(home.c_str(), 0700);
    bus_ = "unix:path=" + run + "/bus";
    // Nothing of the machine's session: no bus, no display for prompts.
    env_ = {{"DBUS_SESSION_BUS_ADDRESS", bus_},
            {"HOME", home},
            {"XDG_RUNTIME_DIR", run},
            {"XDG_DATA_HOME", home + "/.local/share"},
            {"XDG_CONFIG_HOME", home + "/.config"},
            {"DISPLAY", std::nullopt},
            {"WAYLAND_DISPLAY", std::nullopt}};
    Process::Options d;
    d.argv = {"dbus-daemon", "--session", "--nofork", "--address=" + bus_, "--print-address=1"};
    d.env = env_;
    d.log_dir = dir_.path().string();
    bus_daemon_ = std::make_unique<Process>(d);
    REQUIRE(bus_daemon_->waitForLog("unix:path=", milliseconds(10000), Stream::Stdout));

    Process::Options k;
    k.argv = {"gnome-keyring-daemon", "--foreground", "--components=secrets"};
    if (unlock) {
      // --unlock: the login keyring's password on standard input (created
      // with it the first time).
      k.argv.push_back("--unlock");
      k.stdin_file = dir_.write("login-password", kLoginPassword);
    }
    k.env = env_;
    k.log_dir = dir_.path().string();
    keyring_daemon_ = std::make_unique<Process>(k);
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    for (;;) {
      const CommandResult owner =
          runCommand({"dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus",
                      "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner",
                      "string:org.freedesktop.secrets"},
                     env_, milliseconds(5000));
      if (owner.out.find("boolean true") != std::string::npos) break;
      if (Clock::now() > deadline || !keyring_daemon_->running())
        FAIL("gnome-keyring-daemon did not take org.freedesktop.secrets: "
             << keyring_daemon_->logTail());
      std::this_thread::sleep_for(milliseconds(100));
    }
  }

  // The session's environment (its bus, HOME, XDG_* directories).
  const Env& env() const { return env_; }
  const TempDir& dir() const { return dir_; }
  Process& keyringDaemon() { return *keyring_daemon_; }

  // Runs argv with this session's environment (plus `extra`), `input` on
  // its standard input.
  Run run(std::vector<std::string> argv, const std::string& input = "", const Env& extra = {},
          milliseconds timeout = milliseconds(30000)) const {
    Process::Options o;
    o.argv = std::move(argv);
    o.env = env_;
    for (const auto& [k, v] : extra) o.env[k] = v;
    o.log_dir = dir_.path().string();
    o.name = "run" + std::to_string(++runs_);
    o.stdin_file = dir_.write(o.name + ".stdin", input);
    const auto start = Clock::now();
    Process p(o);
    Run r;
    r.status = p.wait(timeout);
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (!r.status) p.stop();
    r.out = p.stdoutText();
    r.err = p.stderrText();
    UNSCOPED_INFO("$ " << o.argv[0] << " ... (" << r.seconds << " s, "
                       << (r.status ? r.status->str() : "still running") << ")\n"
                       << r.out << r.err);
    return r;
  }

  // `h2gate args...` in the session, as run() runs it.
  Run h2gate(std::vector<std::string> args, const std::string& input = "",
             const Env& extra = {}) const {
    args.insert(args.begin(), H2gate::binaryPath(H2GATE_BINARY));
    return run(std::move(args), input, extra);
  }

  // Locks the login keyring as a screen lock does (Secret Service Lock).
  void lock() const {
    const CommandResult r =
        runCommand({"dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.secrets",
                    "/org/freedesktop/secrets", "org.freedesktop.Secret.Service.Lock",
                    "array:objpath:/org/freedesktop/secrets/collection/login"},
                   env_, milliseconds(10000));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }

 private:
  TempDir dir_{"keyring"};
  std::string bus_;
  Env env_;
  std::unique_ptr<Process> bus_daemon_;
  std::unique_ptr<Process> keyring_daemon_;
  mutable int runs_ = 0;
};

}  // namespace h2gate::test
