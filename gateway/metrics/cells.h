// The values behind h2gate's metrics, cheap enough for the data path.
//
// Each cell is written by exactly one thread (the worker that owns its
// Shard) and read by scrapes from any thread. The writer does a relaxed load
// and a relaxed store instead of a read-modify-write: no lock prefix, no CAS
// loop, the cost of a plain increment. prometheus-cpp's own Counter (a CAS on
// a double) and Histogram (a mutex) are built for many writers; ours need
// not be, because every worker has its own cells and a scrape adds them up
// (see Shard and Collector). A cell MUST NOT be written by two threads.
//
// Built with -DH2GATE_METRICS=OFF (CMake), every write compiles to nothing:
// a binary for measuring what the metrics cost (tests/bench/run.sh compares
// the two in the same rounds), never one to ship — its scrapes are all zero.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>

namespace h2gate::metrics {

using Duration = std::chrono::nanoseconds;

#ifdef H2GATE_NO_METRICS
inline constexpr bool kCellsOn = false;
#else
inline constexpr bool kCellsOn = true;
#endif

class Counter {
 public:
  void add(uint64_t n = 1) {
    if constexpr (kCellsOn)
      v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  uint64_t value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

// A gauge summed over workers at scrape time (active connections, streams…),
// or a per-connection value that only one worker ever sets. clear() takes
// the series out of the exposition (a connection that closed).
class Gauge {
 public:
  void add(int64_t n = 1) { set(valueOrZero() + n); }
  void sub(int64_t n = 1) { set(valueOrZero() - n); }
  void set(int64_t n) {
    if constexpr (kCellsOn) v_.store(n, std::memory_order_relaxed);
  }
  void clear() {
    if constexpr (kCellsOn) v_.store(kAbsent, std::memory_order_relaxed);
  }
  bool present() const { return v_.load(std::memory_order_relaxed) != kAbsent; }
  int64_t value() const { return valueOrZero(); }

 private:
  static constexpr int64_t kAbsent = std::numeric_limits<int64_t>::min();
  int64_t valueOrZero() const {
    const int64_t v = v_.load(std::memory_order_relaxed);
    return v == kAbsent ? 0 : v;
  }
  std::atomic<int64_t> v_{0};
};

// Durations, from 100 µs to 30 s. Bucket counts are not cumulative here; the
// scrape makes them so, and takes the total from the buckets, so a scrape
// racing an observe() still sees +Inf == count.
class Histogram {
 public:
  static constexpr std::array<double, 17> kBounds{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                  0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                                  1,      2.5,     5,      10,    30};
  void observe(Duration d) {
    if constexpr (!kCellsOn) return;
    const int64_t ns = std::max<int64_t>(0, d.count());
    size_t i = 0;
    while (i < kBounds.size() && static_cast<double>(ns) > kBounds[i] * 1e9) ++i;
    bump(buckets_[i], 1);
    bump(sum_ns_, static_cast<uint64_t>(ns));
  }
  uint64_t bucket(size_t i) const { return buckets_[i].load(std::memory_order_relaxed); }
  double sumSeconds() const {
    return static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
  }

 private:
  static void bump(std::atomic<uint64_t>& a, uint64_t n) {
    a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> buckets_{};  // last: +Inf
  std::atomic<uint64_t> sum_ns_{0};
};

}  // namespace h2gate::metrics
