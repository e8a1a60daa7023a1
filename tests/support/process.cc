#include "tests/support/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/support/temp_dir.h"
#include "tests/support/util.h"

extern char** environ;

namespace h2gate::test {

std::string ExitStatus::str() const {
  if (exited) return "exit code " + std::to_string(code);
  if (signal) return std::string("killed by signal ") + strsignal(signal);
  return "unknown";
}

std::string findProgram(const std::string& program) {
  if (program.find('/') != std::string::npos)
    return access(program.c_str(), X_OK) == 0 ? program : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  dirs += ":/usr/sbin:/sbin";  // nginx and squid live here
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    if (!dir.empty()) {
      std::string candidate = dir + "/" + program;
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    start = end + 1;
  }
  return "";
}

std::string tailLines(const std::string& text, size_t lines) {
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  size_t count = 0;
  while (pos > 0) {
    size_t nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text;
    if (++count == lines) return text.substr(nl + 1);
    pos = nl;
  }
  return text;
}

Process::Process(Options options) {
  if (options.argv.empty()) throw std::invalid_argument("Process: empty argv");
  std::string exe = findProgram(options.argv[0]);
  if (exe.empty()) throw std::runtime_error("Process: program not found: " + options.argv[0]);
  name_ = options.name.empty() ? std::filesystem::path(exe).filename().string() : options.name;
  std::string dir = options.log_dir.empty() ? "." : options.log_dir;
  stdout_path_ = dir + "/" + name_ + ".stdout";
  stderr_path_ = dir + "/" + name_ + ".stderr";

  // Everything the child needs is prepared before fork(): after fork only
  // async-signal-safe calls (the test binary may have threads).
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    if (options.env.count(key)) continue;
    env_strings.push_back(std::move(kv));
  }
  for (const auto& [key, value] : options.env)
    if (value) env_strings.push_back(key + "=" + *value);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = options.argv;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string stdin_path = options.stdin_file.empty() ? "/dev/null" : options.stdin_file;
  const pid_t parent = getpid();

  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    int in = open(stdin_path.c_str(), O_RDONLY | O_CLOEXEC);
    int out = open(stdout_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int err = open(stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (in < 0 || out < 0 || err < 0) _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    if (!options.cwd.empty() && chdir(options.cwd.c_str()) != 0) _exit(126);
    // Children must not inherit the test's blocked signals or ignored SIGPIPE.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    execve(exe.c_str(), argv.data(), envp.data());
    const char msg[] = "execve failed\n";
    [[maybe_unused]] ssize_t n = ::write(2, msg, sizeof msg - 1);
    _exit(127);
  }
  setpgid(pid, pid);  // also in the parent: no race with kill(-pid)
  pid_ = pid;
}

namespace {
Process::Options shortOptions(std::vector<std::string> argv, const std::string& log_dir) {
  Process::Options o;
  o.argv = std::move(argv);
  o.log_dir = log_dir;
  return o;
}
}  // namespace

Process::Process(std::vector<std::string> argv, const std::string& log_dir)
    : Process(shortOptions(std::move(argv), log_dir)) {}

Process::~Process() {
  if (pid_ > 0 && !status_) {
    bool failing = std::uncaught_exceptions() > 0;
    stop(milliseconds(2000));
    if (failing) std::cerr << "---- " << name_ << " (" << status_->str() << ")\n" << logTail();
  }
}

std::string Process::stdoutText() const {
  return readFile(stdout_path_);
}
std::string Process::stderrText() const {
  return readFile(stderr_path_);
}

std::string Process::logTail(size_t lines) const {
  std::string out;
  std::string err = stderrText();
  if (!err.empty()) out += "[" + name_ + " stderr]\n" + tailLines(err, lines) + "\n";
  std::string so = stdoutText();
  if (!so.empty()) out += "[" + name_ + " stdout]\n" + tailLines(so, lines) + "\n";
  return out;
}

std::optional<std::vector<std::string>> Process::waitForLog(const std::string& regex,
                                                            milliseconds timeout, Stream stream) {
  regexSearch("", regex);  // throws now for a bad pattern
  const std::string& path = stream == Stream::Stdout ? stdout_path_ : stderr_path_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    // Read before checking for exit: a line written just before exiting counts.
    bool was_running = running();
    if (auto m = regexSearch(readFile(path), regex)) return m;
    if (!was_running || std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(milliseconds(10));
  }
}

void Process::kill(int sig) {
  if (pid_ > 0 && !status_) ::kill(-pid_, sig);
}

void Process::signalMain(int sig) {
  if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

bool Process::reap(bool block) {
  if (status_) return true;
  // Look without reaping first: while the leader is a zombie its pid (= the
  // group id) cannot be reused, so killing leftovers in the group is safe.
  siginfo_t info{};
  int r;
  do {
    r = waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT | (block ? 0 : WNOHANG));
  } while (r < 0 && errno == EINTR);
  if (r == 0 && info.si_pid == 0) return false;  // still running
  ::kill(-pid_, SIGKILL);                        // stragglers (e.g. nginx workers)
  int st = 0;
  pid_t w;
  do {
    w = waitpid(pid_, &st, 0);
  } while (w < 0 && errno == EINTR);
  ExitStatus s;
  if (w == pid_ && WIFEXITED(st)) {
    s.exited = true;
    s.code = WEXITSTATUS(st);
  } else if (w == pid_ && WIFSIGNALED(st)) {
    s.signal = WTERMSIG(st);
  }
  status_ = s;
  return true;
}

bool Process::running() {
  return pid_ > 0 && !reap(false);
}

std::optional<ExitStatus> Process::wait(milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!reap(false)) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return status_;
}

ExitStatus Process::stop(milliseconds grace) {
  if (status_) return *status_;
  kill(SIGTERM);
  if (auto s = wait(grace)) return *s;
  kill(SIGKILL);
  reap(true);
  return *status_;
}

namespace {

// A file of /proc/<pid>/, "" when it cannot be read: the process may end
// between the open and the read (then read() fails with ESRCH, which an
// ifstream turns into an exception).
std::string readProcFile(pid_t pid, const char* name) {
  const std::string path = "/proc/" + std::to_string(pid) + "/" + name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) out.clear();
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// Fields of /proc/<pid>/stat after the command name: f[0] is field 3.
std::vector<std::string> statFields(pid_t pid) {
  const std::string stat = readProcFile(pid, "stat");
  const size_t close = stat.rfind(')');
  std::vector<std::string> f;
  if (close == std::string::npos || close + 2 > stat.size()) return f;
  std::istringstream fields(stat.substr(close + 2));
  for (std::string x; fields >> x;) f.push_back(x);
  return f;
}

}  // namespace

std::vector<pid_t> descendants(pid_t pid) {
  std::map<pid_t, std::vector<pid_t>> children;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t p = static_cast<pid_t>(std::stol(name));
    const std::vector<std::string> f = statFields(p);
    if (f.size() > 1) children[static_cast<pid_t>(std::stol(f[1]))].push_back(p);
  }
  std::vector<pid_t> out;
  std::vector<pid_t> todo{pid};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    for (pid_t c : children[p]) {
      out.push_back(c);
      todo.push_back(c);
    }
  }
  return out;
}

double treeCpuSeconds(pid_t pid) {
  long ticks = 0;
  std::vector<pid_t> all = descendants(pid);
  all.push_back(pid);
  for (pid_t p : all) {
    const std::vector<std::string> f = statFields(p);
    // Fields 14-17: utime, stime, cutime, cstime.
    if (f.size() > 14)
      ticks += std::stol(f[11]) + std::stol(f[12]) + std::stol(f[13]) + std::stol(f[14]);
  }
  return static_cast<double>(ticks) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::string commandLine(pid_t pid) {
  std::string s = readProcFile(pid, "cmdline");
  for (char& c : s)
    if (c == '\0') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace h2gate::test
