// The PAC evaluator's answer cache (gateway/pac_engine/evaluator.h): results by
// key (PacQuery::cache_key), each until it expires.
//
// Bounds. At most `max_entries` results and `max_bytes` bytes: a new one
// pushes out the least recently used until both hold, and a single result
// larger than `max_bytes` is not kept at all. The bytes are an estimate of
// the heap each entry holds (entryBytes(): its key, the answer text and
// the parsed entries, the error message, and a fixed amount for the
// containers' nodes and the shared result), so that 10,000 answers of
// 64 KiB (what a PAC file may return, pac_context.h kMaxAnswer) cannot
// hold 650 MB.
//
// Expiry. Every call that takes `now` first frees what has expired by then
// (in order of expiry, so the cost is per expired entry), so a burst of
// distinct hosts is given back once its answers expire, not when each is
// next asked for.
//
// Not thread-safe: the evaluator calls it under its lock. The clock is the
// caller's: every call takes `now` (steady_clock), which the tests set.
#pragma once

#include <chrono>
#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

namespace h2gate::pac {

struct PacResult;

class AnswerCache {
 public:
  using Clock = std::chrono::steady_clock;

  AnswerCache(std::size_t max_entries, std::size_t max_bytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // The result under `key` if it has not expired by `now` (it becomes the
  // most recently used), else null.
  std::shared_ptr<const PacResult> get(std::string_view key, Clock::time_point now);
  // Keeps `result` under `key` until `expires`, replacing what was there.
  void put(std::string key, std::shared_ptr<const PacResult> result, Clock::time_point expires,
           Clock::time_point now);
  // Frees every entry expired by `now`.
  void sweep(Clock::time_point now);
  void clear();

  std::size_t entries() const { return lru_.size(); }
  std::size_t bytes() const { return bytes_; }
  std::size_t maxBytes() const { return max_bytes_; }

  // What one entry holds, estimated (see above).
  static std::size_t entryBytes(std::string_view key, const PacResult& result);

 private:
  struct Entry;
  using List = std::list<Entry>;
  using Expiry = std::multimap<Clock::time_point, List::iterator>;
  struct Entry {
    std::string key;
    std::shared_ptr<const PacResult> result;
    std::size_t bytes = 0;
    Expiry::iterator expiry;
  };
  void erase(List::iterator it);

  std::size_t max_entries_;
  std::size_t max_bytes_;
  std::size_t bytes_ = 0;
  List lru_;  // most recently used first
  // Views of the keys in lru_'s nodes, which never move.
  std::unordered_map<std::string_view, List::iterator> index_;
  Expiry by_expiry_;
};

}  // namespace h2gate::pac
