// PAC files run in worker processes.
//
// Why: Duktape checks the deadline between bytecode instructions
// (gateway/pac_engine/js_heap.h), never inside a native function, and some run for
// minutes on a small input: Array.prototype.indexOf.call({length: 2**31 - 1}, 1)
// looks up two billion properties in one call. A thread stuck there can be
// neither interrupted nor joined; a process can be killed, on Linux and on
// Windows alike. gateway/README.md ("PAC evaluation runs in worker
// processes") weighs this against teaching every slow native to stop.
//
//   PacWorker w(env, "main/routes[0]");    // the evaluator's side of one worker
//   PacError e = w.load(text, "proxy.pac", deadline);   // starts the process if none runs
//   RawAnswer a = w.findProxy(url, host, deadline);
//
// Each call is bounded: a process-wide timer kills the worker at the
// call's deadline + kKillGrace if it has not answered by then (the
// JavaScript itself stops at the deadline; only a native function or a
// compile runs on), and the call answers Timeout. The next load() starts a
// fresh process. The worker's DNS questions, alert() and Date (when `env`
// has its own clock) come back over the channel and are answered on the
// calling thread from `env`: the resolver, its cache and its limits per
// request stay h2gate's, shared by all workers. The worker itself holds one
// PacContext (plus one while a new file compiles) and nothing else of
// h2gate's: no socket, no file, no thread.
//
// Threads: one thread calls load(), findProxy() and stop(); shutdown() may
// come from any other.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "gateway/pac_engine/pac_context.h"
#include "gateway/pac_engine/pac_error.h"
#include "gateway/pac_engine/worker_process.h"

namespace h2gate::pac {

namespace wire {
class FrameReader;
}

// How long past its deadline a busy worker is given before it is killed.
inline constexpr std::chrono::milliseconds kKillGrace{200};

class PacWorker {
 public:
  // `env` must outlive this object. `label` names the worker in ps.
  PacWorker(const PacEnvironment& env, std::string label);
  // stop().
  ~PacWorker();
  PacWorker(const PacWorker&) = delete;
  PacWorker& operator=(const PacWorker&) = delete;

  // Compiles `text` and runs its top-level code in the worker, starting a
  // worker first when none runs (that counts against `deadline` too). On
  // failure the worker keeps the file it had. `lookups_refused`: DNS calls
  // the top-level code made past kMaxLookupsPerRun.
  PacError load(const std::string& text, const std::string& name, Deadline deadline,
                unsigned* lookups_refused = nullptr);
  // FindProxyForURL(url, host) (or FindProxyForURLEx) of the loaded file.
  // NoScript when no worker runs (it was killed: load() again first).
  RawAnswer findProxy(const std::string& url, const std::string& host, Deadline deadline);
  // A worker process runs (it may have no file: load() failed).
  bool running() const { return proc_ != nullptr; }
  // Its process id (0: none), for tests and logs.
  long pid() const;
  // Ends the worker: asked to exit, killed if it has not within a moment.
  void stop();
  // From any thread: kills the worker now; every later call answers
  // Shutdown and starts no process.
  void shutdown();
  // Workers killed for overrunning their deadline so far (any thread).
  uint64_t timedOutKills() const { return timed_out_kills_.load(std::memory_order_relaxed); }

 private:
  struct Reply;
  PacError start(Deadline deadline);
  // Sends `request` and answers the worker's questions until its reply
  // (Loaded or Answer) or its end. `owner`: for the DNS lookups.
  Reply exchange(const std::string& request, Deadline deadline, const std::string& owner);
  // After the worker ended mid-call: reaps it and says why.
  PacError ended(bool killed_by_timer, const char* doing);
  void drop();

  const PacEnvironment& env_;
  std::string label_;
  std::shared_ptr<WorkerProcess> proc_;        // set and reset by the calling thread, under mutex_
  std::unique_ptr<wire::FrameReader> reader_;  // proc_'s output
  mutable std::mutex mutex_;
  bool shut_ = false;  // under mutex_
  std::atomic<uint64_t> timed_out_kills_{0};
};

// True when `argv` asks this program to be a PAC worker (argv[1] is
// kWorkerFlag). main() then returns runPacWorker().
bool isPacWorker(int argc, char** argv);
// The worker's life: reads its channel (worker_channel) until the
// evaluator closes it. Returns the exit status: 0, or 2 when the channel
// carried something that is not the protocol.
int runPacWorker();

}  // namespace h2gate::pac
