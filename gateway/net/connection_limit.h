// A count of slots shared by every worker thread, and the rate limiting of
// the "limit reached" log line: a listener's open app connections
// (max_connections), a cluster's requests in progress (max_requests).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace h2gate::net {

class ConnectionLimit {
 public:
  using Clock = std::chrono::steady_clock;

  // Takes a slot if fewer than `max` are taken. Thread-safe. A true return
  // MUST be paired with exactly one release().
  bool tryAcquire(uint32_t max);
  // Gives back a slot taken by tryAcquire(). Thread-safe.
  void release();
  uint32_t open() const { return open_.load(std::memory_order_relaxed); }

  // Counts one refused connection. Returns how many were refused since the
  // last report when it is time to log one (the first refusal, then at most
  // once per `interval`), else 0. Thread-safe.
  uint64_t noteRefusal(Clock::time_point now, Clock::duration interval);

 private:
  std::atomic<uint32_t> open_{0};
  std::atomic<uint64_t> refused_{0};  // since the last report
  static constexpr int64_t kNever = INT64_MIN;
  std::atomic<int64_t> last_report_{kNever};  // Clock ticks
};

}  // namespace h2gate::net
