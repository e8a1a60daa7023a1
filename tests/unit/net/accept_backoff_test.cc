#include "gateway/net/accept_backoff.h"

#include <catch2/catch.hpp>

using h2gate::net::AcceptBackoff;
using std::chrono::milliseconds;

TEST_CASE("accept back-off: one warning per interval, with the count in between", "[net][accept]") {
  AcceptBackoff b;
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  uint64_t unlogged = 99;
  CHECK(b.failed(t0, &unlogged));
  CHECK(unlogged == 0);
  // 10 attempts per second (the retry delay) for a while: silent.
  int logged = 0;
  for (int i = 1; i < 100; ++i) logged += b.failed(t0 + i * AcceptBackoff::kRetryDelay, &unlogged);
  CHECK(logged == 0);
  CHECK(b.failed(t0 + AcceptBackoff::kWarnInterval, &unlogged));
  CHECK(unlogged == 99);
  CHECK_FALSE(b.failed(t0 + AcceptBackoff::kWarnInterval + milliseconds(1), &unlogged));
  CHECK(AcceptBackoff::kRetryDelay == milliseconds(100));
}
