#include "gateway/net/connection_limit.h"

namespace h2gate::net {

bool ConnectionLimit::tryAcquire(uint32_t max) {
  uint32_t cur = open_.load(std::memory_order_relaxed);
  do {
    if (cur >= max) return false;
  } while (!open_.compare_exchange_weak(cur, cur + 1, std::memory_order_relaxed));
  return true;
}

void ConnectionLimit::release() {
  open_.fetch_sub(1, std::memory_order_relaxed);
}

uint64_t ConnectionLimit::noteRefusal(Clock::time_point now, Clock::duration interval) {
  refused_.fetch_add(1, std::memory_order_relaxed);
  const int64_t t = now.time_since_epoch().count();
  int64_t last = last_report_.load(std::memory_order_relaxed);
  if (last != kNever && t - last < interval.count()) return 0;
  // Only the thread that moves last_report_ reports.
  if (!last_report_.compare_exchange_strong(last, t, std::memory_order_relaxed)) return 0;
  return refused_.exchange(0, std::memory_order_relaxed);
}

}  // namespace h2gate::net
