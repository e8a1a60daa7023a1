#pragma once

#include <atomic>
#include <cstdint>

namespace h2gate {

// Ids for app and upstream connections alike, unique in the process, so a
// log line's [C17] names exactly one connection of either kind.
inline uint64_t nextConnectionId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace h2gate
