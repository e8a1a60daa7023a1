// What a listening socket does when accept() fails. EMFILE, ENFILE, ENOBUFS
// and ENOMEM leave the connection in the backlog, so accepting again at once
// fails again at once: a loop at 100% CPU. Every listener (the proxy
// listeners' workers, the admin endpoint) waits kRetryDelay before the next
// attempt and warns at most once per kWarnInterval, with the number of
// failures since the previous warning.
#pragma once

#include <chrono>
#include <cstdint>

namespace h2gate::net {

class AcceptBackoff {
 public:
  static constexpr std::chrono::milliseconds kRetryDelay{100};
  static constexpr std::chrono::seconds kWarnInterval{10};

  // Records one failure at `now`. True when it is to be logged now; then
  // *unlogged is the number of failures not logged since the last warning
  // (0 for the first).
  bool failed(std::chrono::steady_clock::time_point now, uint64_t* unlogged) {
    if (warned_ && now - last_warning_ < kWarnInterval) {
      ++unlogged_;
      return false;
    }
    *unlogged = unlogged_;
    unlogged_ = 0;
    warned_ = true;
    last_warning_ = now;
    return true;
  }

 private:
  bool warned_ = false;
  std::chrono::steady_clock::time_point last_warning_{};
  uint64_t unlogged_ = 0;
};

}  // namespace h2gate::net
