// PAC worker processes on POSIX (gateway/pac_engine/worker_process.h): this
// executable again (/proc/self/exe, so the same build even when the file on
// disk was replaced by an upgrade) by posix_spawn, one end of a socketpair
// as its stdin and stdout, every other descriptor closed in it.
#include "gateway/pac_engine/worker_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef __linux__
#include <sys/prctl.h>
#endif
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

extern char** environ;

namespace h2gate::pac {

struct WorkerProcess::Impl {
  pid_t pid = -1;
  int fd = -1;
  std::mutex mutex;  // kill() against reaping: a reaped pid may be another process's
  bool reaped = false;
  int status = 0;

  // Under mutex.
  bool reapNow(bool block) {
    if (reaped) return true;
    int st = 0;
    pid_t r;
    do {
      r = ::waitpid(pid, &st, block ? 0 : WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == pid || (r < 0 && errno == ECHILD)) {
      reaped = true;
      status = st;
    }
    return reaped;
  }
};

namespace {

std::string errnoText(const char* what, int err) {
  return std::string(what) + ": " + std::strerror(err);
}

// Writes all of `data` with `op` (send or write), again after EINTR.
template <typename Op>
bool writeAll(Op op, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = op(p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// Reads some bytes with `op` (recv or read), again after EINTR; 0 at the
// end or on an error.
template <typename Op>
std::size_t readSome(Op op) {
  while (true) {
    const ssize_t n = op();
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno != EINTR) return 0;
  }
}

// The worker's environment: what the C library and the sanitizers read,
// nothing else. It runs JavaScript from the network: h2gate's own
// variables (H2GATE_UPSTREAM with a password, proxy variables with
// credentials, KRB5CCNAME) are none of its business.
std::vector<std::string> workerEnvironment() {
  static const char* const kKept[] = {
      "TZ=",           "LANG=",         "LC_",           "LD_LIBRARY_PATH=", "GLIBC_TUNABLES=",
      "ASAN_OPTIONS=", "LSAN_OPTIONS=", "UBSAN_OPTIONS="};
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view var(*e);
    for (const char* kept : kKept)
      if (var.substr(0, std::strlen(kept)) == kept) {
        out.emplace_back(var);
        break;
      }
  }
  return out;
}

}  // namespace

std::unique_ptr<WorkerProcess> WorkerProcess::start(const std::string& label, std::string* error) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    *error = errnoText("socketpair", errno);
    return nullptr;
  }
  // The worker's end must not already be 0 or 1 (h2gate started with them
  // closed): dup2 onto itself would keep its close-on-exec flag.
  int theirs = sv[1];
  if (theirs < 3) {
    theirs = ::fcntl(sv[1], F_DUPFD_CLOEXEC, 3);
    ::close(sv[1]);
    if (theirs < 0) {
      *error = errnoText("fcntl", errno);
      ::close(sv[0]);
      return nullptr;
    }
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, theirs, 0);
  posix_spawn_file_actions_adddup2(&actions, theirs, 1);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  // Listening and app sockets opened without close-on-exec stay h2gate's.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
#endif
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGHUP}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::string arg0 = "h2gate", arg1(kWorkerFlag), arg2 = label;
  char* argv[] = {arg0.data(), arg1.data(), arg2.data(), nullptr};
  std::vector<std::string> env = workerEnvironment();
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, "/proc/self/exe", &actions, &attr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(theirs);
  if (rc != 0) {
    ::close(sv[0]);
    *error = errnoText("posix_spawn /proc/self/exe", rc);
    return nullptr;
  }
  auto impl = std::make_unique<Impl>();
  impl->pid = pid;
  impl->fd = sv[0];
  return std::unique_ptr<WorkerProcess>(new WorkerProcess(std::move(impl)));
}

WorkerProcess::WorkerProcess(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

WorkerProcess::~WorkerProcess() {
  if (impl_->fd >= 0) ::close(impl_->fd);
  std::lock_guard lock(impl_->mutex);
  if (!impl_->reaped) {
    ::kill(impl_->pid, SIGKILL);
    impl_->reapNow(true);
  }
}

bool WorkerProcess::write(const void* data, std::size_t size) {
  const int fd = impl_->fd;
  return writeAll([fd](const char* p, std::size_t n) { return ::send(fd, p, n, MSG_NOSIGNAL); },
                  data, size);
}

std::size_t WorkerProcess::read(void* data, std::size_t size) {
  const int fd = impl_->fd;
  return readSome([&] { return ::recv(fd, data, size, 0); });
}

void WorkerProcess::kill() {
  std::lock_guard lock(impl_->mutex);
  if (!impl_->reaped) ::kill(impl_->pid, SIGKILL);
}

void WorkerProcess::stop(std::chrono::milliseconds grace) {
  ::shutdown(impl_->fd, SHUT_WR);  // an idle worker reads the end and exits 0
  const auto until = std::chrono::steady_clock::now() + grace;
  while (true) {
    {
      std::lock_guard lock(impl_->mutex);
      if (impl_->reapNow(false)) return;
    }
    if (std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::lock_guard lock(impl_->mutex);
  ::kill(impl_->pid, SIGKILL);
  impl_->reapNow(true);
}

std::string WorkerProcess::howItEnded() {
  // After its end of the channel closed it may take a moment to be reapable.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (true) {
    {
      std::lock_guard lock(impl_->mutex);
      if (impl_->reapNow(false)) break;
    }
    if (std::chrono::steady_clock::now() >= until) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const int st = impl_->status;
  if (WIFEXITED(st)) return "exited with status " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return "killed by signal " + std::to_string(WTERMSIG(st));
  return "ended";
}

long WorkerProcess::pid() const {
  return impl_->pid;
}

namespace worker_channel {

void prepare() {
  // A terminal's Ctrl+C and hang-up reach the whole process group, and a
  // service manager's stop the whole cgroup (systemd's KillMode): h2gate
  // then drains, and its workers keep answering until it is done with them.
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGHUP, SIG_IGN);
  ::signal(SIGTERM, SIG_IGN);
#ifdef __linux__
  // A worker stuck in a native function reads nothing: without this it
  // would outlive an h2gate that died.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
}

std::size_t read(void* data, std::size_t size) {
  return readSome([&] { return ::read(0, data, size); });
}

bool write(const void* data, std::size_t size) {
  return writeAll([](const char* p, std::size_t n) { return ::write(1, p, n); }, data, size);
}

void releaseMemory() {
#ifdef __GLIBC__
  ::malloc_trim(0);
#endif
}

}  // namespace worker_channel
}  // namespace h2gate::pac
