// One Duktape heap (a JavaScript global environment) with the limits a PAC
// file runs under:
//   - memory: every allocation of the heap goes through an allocator that
//     counts bytes and refuses past `max_bytes` (the script gets a
//     RangeError "alloc failed"; Duktape first collects garbage and retries);
//   - time: the executor's interrupt (every 256k bytecode instructions, see
//     CMakeLists.txt) checks the deadline set for the current run and
//     unwinds the script with a RangeError when it has passed, whatever
//     try/catch the script has (Duktape keeps rethrowing until it is out);
//   - clock: Date and Date.now() read the clock given here.
// A regular-expression match checks the deadline too (CMakeLists.txt
// patches the matcher). What is not interruptible: native functions
// (Array.prototype.indexOf over a huge array-like runs minutes in one call,
// a string search as long) and compiling the source. The evaluator runs
// heaps in worker processes it kills at the deadline for that reason
// (gateway/pac_engine/worker.h).
//
// Threads: a JsHeap belongs to one thread at a time (Duktape heaps are not
// thread-safe); cancel() may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include <duktape.h>

#include "gateway/pac_engine/pac_error.h"
#include "gateway/pac_engine/resolver.h"

namespace h2gate::pac {

class JsHeap {
 public:
  // Wall-clock time in milliseconds since the epoch, for Date.
  using Clock = std::function<double()>;

  // `clock` empty: the system clock. `owner` is returned by ownerOf() for
  // native functions to find their context.
  JsHeap(std::size_t max_bytes, Clock clock, void* owner);
  ~JsHeap();
  JsHeap(const JsHeap&) = delete;
  JsHeap& operator=(const JsHeap&) = delete;

  // False when the heap could not even be created (max_bytes too small).
  bool valid() const { return ctx_ != nullptr; }
  duk_context* ctx() const { return ctx_; }

  // The run that follows is cut off at `deadline`; clear with
  // Deadline::max(). Resets the timed-out and refused flags.
  void setDeadline(Deadline deadline);
  // From any thread: the current and every later run stop at the next
  // interrupt (the heap is being thrown away).
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }

  // A native function found the run's deadline passed (it waited on DNS):
  // the error it throws is reported as a Timeout.
  void markTimedOut() { timed_out_ = true; }
  // What cut the last run short, if anything.
  bool timedOut() const { return timed_out_; }
  bool allocationRefused() const { return refused_; }
  std::size_t bytesInUse() const { return used_; }
  std::size_t peakBytes() const { return peak_; }
  std::size_t maxBytes() const { return max_bytes_; }

  // Compiles `source` as global code named `filename` and runs it, under
  // the current deadline. Leaves nothing on the value stack.
  PacError runProgram(std::string_view source, const char* filename);

  // The error on top of the stack (left there by a failed protected call)
  // as a PacError: Timeout or Memory when a limit cut the run short, else
  // `kind` with the error's text ("TypeError: ... (line 3)"). Pops it.
  PacError popError(PacError::Kind kind);
  // Fills `err` when the time or memory limit struck the last call.
  bool limitStruck(PacError& err) const;

  // The `owner` given to the constructor of the heap that runs `ctx`.
  static void* ownerOf(duk_context* ctx);
  // What the hooks in duk_config.h call (CMakeLists.txt).
  bool checkTimeout();
  double now() const;

 private:
  static void* alloc(void* udata, duk_size_t size);
  static void* realloc(void* udata, void* ptr, duk_size_t size);
  static void free(void* udata, void* ptr);
  static void fatal(void* udata, const char* msg);

  std::size_t max_bytes_;
  Clock clock_;
  void* owner_;
  duk_context* ctx_ = nullptr;
  std::size_t used_ = 0;
  std::size_t peak_ = 0;
  bool refused_ = false;
  bool timed_out_ = false;
  Deadline deadline_ = Deadline::max();
  std::atomic<bool> cancelled_{false};
};

}  // namespace h2gate::pac
