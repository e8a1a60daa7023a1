#include "gateway/pac_engine/answer_cache.h"

#include "gateway/pac_engine/evaluator.h"

namespace h2gate::pac {
namespace {

// Per entry besides its strings: the list, hash and expiry nodes, the hash
// bucket, the shared result and its control block (64-bit, libstdc++).
constexpr std::size_t kEntryOverhead = 256 + sizeof(PacResult);

std::size_t heapOf(const std::string& s) {
  return s.capacity() > 15 ? s.capacity() + 1 : 0;  // beyond the small-string buffer
}

}  // namespace

std::size_t AnswerCache::entryBytes(std::string_view key, const PacResult& r) {
  std::size_t n = kEntryOverhead + key.size() + heapOf(r.answer) + heapOf(r.error.message);
  n += r.proxies.entries.capacity() * sizeof(ProxyEntry);
  for (const ProxyEntry& e : r.proxies.entries) n += heapOf(e.host);
  n += r.proxies.skipped.capacity() * sizeof(SkippedEntry);
  for (const SkippedEntry& s : r.proxies.skipped) n += heapOf(s.text) + heapOf(s.reason);
  return n;
}

void AnswerCache::erase(List::iterator it) {
  bytes_ -= it->bytes;
  by_expiry_.erase(it->expiry);
  index_.erase(std::string_view(it->key));
  lru_.erase(it);
}

void AnswerCache::sweep(Clock::time_point now) {
  while (!by_expiry_.empty() && by_expiry_.begin()->first <= now) erase(by_expiry_.begin()->second);
}

std::shared_ptr<const PacResult> AnswerCache::get(std::string_view key, Clock::time_point now) {
  sweep(now);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->result;
}

void AnswerCache::put(std::string key, std::shared_ptr<const PacResult> result,
                      Clock::time_point expires, Clock::time_point now) {
  sweep(now);
  if (auto it = index_.find(std::string_view(key)); it != index_.end()) erase(it->second);
  if (max_entries_ == 0 || expires <= now) return;
  const std::size_t size = entryBytes(key, *result);
  if (size > max_bytes_) return;
  while (!lru_.empty() && (lru_.size() >= max_entries_ || bytes_ + size > max_bytes_))
    erase(std::prev(lru_.end()));
  lru_.push_front(Entry{std::move(key), std::move(result), size, {}});
  const List::iterator it = lru_.begin();
  it->expiry = by_expiry_.emplace(expires, it);
  index_.emplace(std::string_view(it->key), it);
  bytes_ += size;
}

void AnswerCache::clear() {
  index_.clear();
  by_expiry_.clear();
  lru_.clear();
  bytes_ = 0;
}

}  // namespace h2gate::pac
