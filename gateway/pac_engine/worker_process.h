// The operating-system side of a PAC worker process (gateway/pac_engine/worker.h):
// this program's own executable started again with kWorkerFlag, its
// standard input and output the two directions of a private channel to the
// evaluator, its standard error h2gate's. Platform code:
// worker_process_posix.cc (posix_spawn of /proc/self/exe on a socketpair;
// the worker dies with its parent by PR_SET_PDEATHSIG) and
// worker_process_win.cc (CreateProcessW of the module's own path on two
// anonymous pipes, only those handles inherited; every worker in a job
// object that kills them when h2gate's last handle to it closes).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace h2gate::pac {

// argv[1] of a worker process. Every program that runs a PacEvaluator
// passes its arguments to runPacWorkerIfAsked() (gateway/pac_engine/worker.h)
// first thing in main().
inline constexpr std::string_view kWorkerFlag = "--pac-worker";

class WorkerProcess {
 public:
  // Starts a worker; `label` (the route's name) is its second argument, so
  // that ps and Task Manager tell the workers apart. Null, and `error` set,
  // when it cannot be started.
  static std::unique_ptr<WorkerProcess> start(const std::string& label, std::string* error);
  // Kills it if it still runs, and reaps it.
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Blocking. write(): all of it, false when the worker is gone. read():
  // some bytes, 0 when the worker is gone (or killed).
  bool write(const void* data, std::size_t size);
  std::size_t read(void* data, std::size_t size);
  // From any thread, any number of times: ends the worker now. A read or
  // write blocked on it returns.
  void kill();
  // Closes its standard input (an idle worker exits at once), waits up to
  // `grace` for it to exit, then kills it.
  void stop(std::chrono::milliseconds grace);
  // "exited with status 3", "killed by signal 9": how it ended (after
  // read() returned 0); "" while it runs.
  std::string howItEnded();
  long pid() const;

  struct Impl;

 private:
  explicit WorkerProcess(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Inside the worker: its channel to the evaluator.
namespace worker_channel {
// Binary mode; the worker dies with its parent; the interrupt, hang-up
// and terminate signals a terminal or a service manager send to every
// process of h2gate's are ignored (h2gate decides when its workers end).
void prepare();
// Blocking; 0 when the parent is gone.
std::size_t read(void* data, std::size_t size);
// All of it; false when the parent is gone.
bool write(const void* data, std::size_t size);
// Gives memory the C library keeps after a heap was freed back to the
// system (a worker whose file hit its memory limit shrinks again).
void releaseMemory();
}  // namespace worker_channel

}  // namespace h2gate::pac
