// A child process for tests: a server (nginx, nghttpx, squid, h2gate) or a
// client. stdout and stderr go to files in a directory the caller owns, so
// tests can wait for log lines and read them after the fact.
//
// Lifetime: the child runs in its own process group and gets SIGKILL when the
// spawning *thread* dies (PR_SET_PDEATHSIG), so spawn from the test's main
// thread. The destructor SIGTERMs the group, waits a little, then SIGKILLs it:
// servers stop even when a test fails half-way (Catch2 unwinds on REQUIRE).
#pragma once

#include <sys/types.h>
#include <unistd.h>  // geteuid(): tests that start servers give root a user line

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace h2gate::test {

using std::chrono::milliseconds;

struct ExitStatus {
  bool exited = false;  // normal exit: code is valid
  int code = -1;
  int signal = 0;  // killed by this signal (exited false)
  std::string str() const;
};

enum class Stream { Stdout, Stderr };

class Process {
 public:
  struct Options {
    std::vector<std::string> argv;  // argv[0] is looked up in PATH unless it has a '/'
    // Set (or, with std::nullopt, unset) these on top of the test's environment.
    std::map<std::string, std::optional<std::string>> env;
    std::string log_dir;     // stdout/stderr files go here: <name>.stdout, <name>.stderr
    std::string name;        // defaults to basename(argv[0])
    std::string cwd;         // empty: inherit
    std::string stdin_file;  // empty: /dev/null
  };

  // Throws std::runtime_error when the program cannot be found or forked.
  explicit Process(Options options);
  // Shorthand: argv, logs in `log_dir`, the test's environment.
  Process(std::vector<std::string> argv, const std::string& log_dir);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }
  const std::string& stdoutPath() const { return stdout_path_; }
  const std::string& stderrPath() const { return stderr_path_; }
  std::string stdoutText() const;
  std::string stderrText() const;

  // Polls the log file until `regex` (POSIX extended, see regexSearch())
  // matches somewhere in it.
  // Returns the match's capture groups ([0] = whole match), or nullopt on
  // timeout or when the process exits without the line having appeared.
  std::optional<std::vector<std::string>> waitForLog(const std::string& regex, milliseconds timeout,
                                                     Stream stream = Stream::Stderr);

  // Sends `sig` to the child's process group.
  void kill(int sig);
  // Sends `sig` to the child only (not its group).
  void signalMain(int sig);

  // Reaps the child; nullopt if it still runs after `timeout`.
  std::optional<ExitStatus> wait(milliseconds timeout);
  bool running();
  // Last known status once reaped.
  const std::optional<ExitStatus>& status() const { return status_; }

  // SIGTERM, wait up to `grace`, then SIGKILL. Returns the status.
  ExitStatus stop(milliseconds grace = milliseconds(3000));

  // The last `lines` lines of stderr and stdout, for failure messages.
  std::string logTail(size_t lines = 40) const;

 private:
  bool reap(bool block);

  std::string name_;
  std::string stdout_path_;
  std::string stderr_path_;
  pid_t pid_ = -1;
  std::optional<ExitStatus> status_;
};

// Looks `program` up in PATH; returns "" when not found. A name with '/' is
// returned as is when executable.
std::string findProgram(const std::string& program);

// Last `lines` lines of a text.
std::string tailLines(const std::string& text, size_t lines);

// The processes `pid` started that still run (children, their children...),
// from /proc.
std::vector<pid_t> descendants(pid_t pid);
// CPU seconds (user + system) used so far by `pid` and its descendants,
// children it has reaped included (/proc/<pid>/stat utime, stime, cutime,
// cstime). Two readings a few seconds apart tell whether a process tree
// still computes.
double treeCpuSeconds(pid_t pid);
// argv of a running process, "" when it is gone (/proc/<pid>/cmdline, NULs
// as spaces).
std::string commandLine(pid_t pid);

}  // namespace h2gate::test
