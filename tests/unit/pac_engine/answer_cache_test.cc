// The PAC answer cache's bounds: entries, bytes (large answers from many
// hosts), and expiry freeing what is no longer asked for. The clock is the
// test's: every call takes `now`.
#include "gateway/pac_engine/answer_cache.h"

#include <catch2/catch.hpp>

#include "gateway/pac_engine/evaluator.h"

using namespace h2gate::pac;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

std::shared_ptr<const PacResult> answer(std::size_t size) {
  auto r = std::make_shared<PacResult>();
  r->answer = "PROXY a.test:1";
  while (r->answer.size() < size) r->answer += "; PROXY a.test:1";
  r->proxies = parseProxyList(r->answer);
  r->from_cache = true;
  return r;
}

std::string key(int i) {
  return "https://host" + std::to_string(i) + ".example:443";
}

}  // namespace

TEST_CASE("pac answer cache: many hosts with large answers stay under the byte bound",
          "[pac][answer_cache]") {
  constexpr std::size_t kMax = 1u << 20;
  AnswerCache cache(10000, kMax);
  const auto t0 = Clock::now();
  const auto big = answer(64 * 1024 - 100);
  const std::size_t one = AnswerCache::entryBytes(key(0), *big);
  CHECK(one > 64 * 1024 - 100);
  for (int i = 0; i < 4000; ++i) {
    cache.put(key(i), big, t0 + 60s, t0);
    REQUIRE(cache.bytes() <= kMax);
  }
  // As many as fit, the most recent ones.
  CHECK(cache.entries() == kMax / one);
  CHECK(cache.get(key(3999), t0));
  CHECK_FALSE(cache.get(key(0), t0));
  // Small answers: the entry bound applies instead.
  AnswerCache small(100, kMax);
  for (int i = 0; i < 1000; ++i) small.put(key(i), answer(10), t0 + 60s, t0);
  CHECK(small.entries() == 100);
  CHECK(small.bytes() == 100 * AnswerCache::entryBytes(key(999), *answer(10)));
  // One answer larger than the whole bound is not kept.
  AnswerCache tiny(10, 64 * 1024);
  tiny.put(key(1), big, t0 + 60s, t0);
  CHECK(tiny.entries() == 0);
  CHECK(tiny.bytes() == 0);
}

TEST_CASE("pac answer cache: expired answers are freed without being asked for",
          "[pac][answer_cache]") {
  AnswerCache cache(10000, 16u << 20);
  const auto t0 = Clock::now();
  for (int i = 0; i < 500; ++i) cache.put(key(i), answer(1000), t0 + 60s, t0);
  for (int i = 500; i < 600; ++i) cache.put(key(i), answer(1000), t0 + 5s, t0);  // errors
  CHECK(cache.entries() == 600);
  std::size_t long_lived = 0;
  for (int i = 0; i < 500; ++i) long_lived += AnswerCache::entryBytes(key(i), *answer(1000));
  // Any call frees what has expired by its `now`: here the short-lived ones.
  CHECK_FALSE(cache.get("https://other.example:443", t0 + 6s));
  CHECK(cache.entries() == 500);
  CHECK(cache.bytes() == long_lived);
  // A recently used entry expires all the same.
  CHECK(cache.get(key(1), t0 + 59s));
  cache.sweep(t0 + 60s);
  CHECK(cache.entries() == 0);
  CHECK(cache.bytes() == 0);
  // A put replaces the older answer and its expiry.
  cache.put(key(1), answer(10), t0 + 61s, t0 + 60s);
  cache.put(key(1), answer(2000), t0 + 70s, t0 + 60s);
  CHECK(cache.entries() == 1);
  CHECK(cache.bytes() == AnswerCache::entryBytes(key(1), *answer(2000)));
  CHECK(cache.get(key(1), t0 + 65s));
  cache.clear();
  CHECK(cache.bytes() == 0);
}
