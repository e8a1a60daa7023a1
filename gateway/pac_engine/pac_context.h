// One PAC file loaded into one JavaScript heap, ready to answer
// FindProxyForURL(url, host). Blocking and single-threaded: the evaluator
// (gateway/pac_engine/evaluator.h) keeps one per worker thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gateway/pac_engine/js_heap.h"
#include "gateway/pac_engine/pac_error.h"
#include "gateway/pac_engine/pac_library.h"
#include "gateway/pac_engine/resolver.h"

namespace h2gate::pac {

// What a PAC heap needs from outside. Shared (read-only) by the evaluator's
// threads.
struct PacEnvironment {
  std::shared_ptr<PacResolver> resolver;  // required
  // Bound of each DNS call from the script (the run's deadline also applies).
  std::chrono::milliseconds dns_timeout{2000};
  // Wall clock for Date in milliseconds since the epoch; empty: the system's.
  JsHeap::Clock clock;
  // alert(message) from the script; empty: dropped. Called on PAC threads.
  std::function<void(std::string_view)> alert;
  // Memory limit of each heap, in bytes.
  std::size_t heap_limit = 32u << 20;
};

// What FindProxyForURL returned, or why it did not.
struct RawAnswer {
  std::string text;  // the string it returned (at most kMaxAnswer bytes)
  PacError error;
  unsigned lookups_refused = 0;  // DNS calls past kMaxLookupsPerRun (answered "not found")
};

inline constexpr std::size_t kMaxAnswer = 64 * 1024;

// Distinct names one run (the top-level code, or one FindProxyForURL call)
// may ask DNS for. A name asked again in the same run gets the first
// answer without a lookup; a name past the bound gets "not found" without
// one. Real PAC files ask for a few names; a loop over dnsResolve() would
// otherwise send a lookup per iteration until the deadline (tens of
// thousands with a DNS server that answers quickly).
inline constexpr std::size_t kMaxLookupsPerRun = 32;

class PacContext : public PacHost {
 public:
  explicit PacContext(const PacEnvironment& env);
  ~PacContext() override;
  PacContext(const PacContext&) = delete;
  PacContext& operator=(const PacContext&) = delete;

  // Compiles `script`, runs its top-level code and checks that it defines
  // FindProxyForURL or FindProxyForURLEx, all by `deadline`. `name` names
  // the file in error messages.
  PacError load(std::string_view script, std::string_view name, Deadline deadline);

  // FindProxyForURLEx(url, host) when the script defines it (as WinHTTP
  // does), else FindProxyForURL(url, host), by `deadline`.
  RawAnswer findProxy(std::string_view url, std::string_view host, Deadline deadline);

  // From any thread: stop the current and later runs (shutdown).
  void cancel() { heap_.cancel(); }
  std::size_t heapBytes() const { return heap_.bytesInUse(); }
  std::size_t peakHeapBytes() const { return heap_.peakBytes(); }
  // Whether the script defines FindProxyForURLEx.
  bool usesEx() const { return uses_ex_; }
  // DNS calls of the last run refused by kMaxLookupsPerRun.
  unsigned lookupsRefused() const { return lookups_refused_; }

  // PacHost
  std::vector<net::IpAddress> dnsLookup(const std::string& host, bool v4_only) override;
  std::vector<net::IpAddress> myAddresses() override;
  void alert(std::string_view message) override;
  bool runPastDeadline() override;

 private:
  Deadline dnsDeadline() const;
  void startRun(Deadline deadline, std::string_view owner);
  void endRun();

  const PacEnvironment& env_;
  JsHeap heap_;
  bool loaded_ = false;
  bool uses_ex_ = false;
  Deadline run_deadline_ = Deadline::max();
  // The run's lookups so far ("4 name" / "* name" -> answer) and the owner
  // they are made for (the query's host; "" at load).
  std::vector<std::pair<std::string, std::vector<net::IpAddress>>> run_lookups_;
  std::string owner_;
  unsigned lookups_refused_ = 0;
};

}  // namespace h2gate::pac
