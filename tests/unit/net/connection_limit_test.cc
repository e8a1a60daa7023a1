#include "gateway/net/connection_limit.h"

#include <atomic>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

using h2gate::net::ConnectionLimit;
using std::chrono::seconds;

TEST_CASE("ConnectionLimit: slots up to the maximum, given back on release", "[limits]") {
  ConnectionLimit limit;
  for (int i = 0; i < 3; ++i) CHECK(limit.tryAcquire(3));
  CHECK_FALSE(limit.tryAcquire(3));
  CHECK(limit.open() == 3);
  limit.release();
  CHECK(limit.tryAcquire(3));
  CHECK_FALSE(limit.tryAcquire(3));
  // A lower limit (after a reload) refuses until enough have closed.
  CHECK_FALSE(limit.tryAcquire(2));
}

TEST_CASE("ConnectionLimit: never over the maximum across threads", "[limits]") {
  ConnectionLimit limit;
  constexpr uint32_t kMax = 50;
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i)
        if (limit.tryAcquire(kMax)) ++granted;
    });
  for (auto& t : threads) t.join();
  CHECK(granted == static_cast<int>(kMax));
  CHECK(limit.open() == kMax);
}

TEST_CASE("ConnectionLimit: refusals are reported once per interval with their count", "[limits]") {
  ConnectionLimit limit;
  const auto t0 = ConnectionLimit::Clock::time_point{} + seconds(100);
  CHECK(limit.noteRefusal(t0, seconds(10)) == 1);  // the first is reported at once
  CHECK(limit.noteRefusal(t0 + seconds(1), seconds(10)) == 0);
  CHECK(limit.noteRefusal(t0 + seconds(9), seconds(10)) == 0);
  CHECK(limit.noteRefusal(t0 + seconds(10), seconds(10)) == 3);
  CHECK(limit.noteRefusal(t0 + seconds(11), seconds(10)) == 0);
}
