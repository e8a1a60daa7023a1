// readDesktopProxySettings on POSIX: GNOME's org.gnome.system.proxy, read
// with `gsettings list-recursively` (whatever backend the session uses:
// dconf, or the keyfile one of GSETTINGS_BACKEND=keyfile). No gsettings, no
// such schema, or no answer within two seconds: no desktop setting.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "gateway/base/log.h"
#include "gateway/pac_engine/system_proxy.h"

extern char** environ;

namespace h2gate::pac {
namespace {

constexpr auto kGsettingsTimeout = std::chrono::seconds(2);
constexpr std::size_t kMaxOutput = 256 * 1024;

// Runs argv (looked up in PATH) and returns its stdout when it exits 0
// within the timeout.
std::optional<std::string> runForOutput(const std::vector<std::string>& args) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return std::nullopt;
  }
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + kGsettingsTimeout;
  bool timed_out = false;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int n = poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      timed_out = n == 0;
      break;
    }
    char buf[4096];
    const ssize_t got = read(fds[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    if (out.size() < kMaxOutput) out.append(buf, static_cast<std::size_t>(got));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    H2G_LOG(Warn, 0, 0, "pac: `" << args[0] << "` gave no answer within 2 s: ignoring it");
    return std::nullopt;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return out;
}

}  // namespace

std::optional<SystemProxySettings> readDesktopProxySettings() {
  std::optional<std::string> out =
      runForOutput({"gsettings", "list-recursively", "org.gnome.system.proxy"});
  if (!out) return std::nullopt;
  std::optional<SystemProxySettings> s = settingsFromGsettings(*out);
  if (s && s->mode == SystemProxySettings::Mode::Direct) return std::nullopt;
  return s;
}

char** processEnvironment() {
  return environ;
}

}  // namespace h2gate::pac
