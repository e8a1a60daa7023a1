// When a ticket got with a password is renewed, and how long a failure
// keeps h2gate from asking the KDC again (gateway/upstream/auth/ticket_schedule.h).
#include "gateway/upstream/auth/ticket_schedule.h"

#include <catch2/catch.hpp>

using namespace h2gate::upstream::auth;

TEST_CASE("renewalTime: 5 minutes before the end, or at 80% of a short lifetime",
          "[auth][kerberos]") {
  const int64_t t0 = 1'800'000'000;
  // A 10-hour ticket (MIT's and Active Directory's default): 5 minutes before it ends.
  CHECK(renewalTime(t0, t0 + 10 * 3600) == t0 + 10 * 3600 - 300);
  // 25 minutes: both rules give 20 minutes.
  CHECK(renewalTime(t0, t0 + 25 * 60) == t0 + 20 * 60);
  // Shorter than 25 minutes: 80% of the lifetime comes first.
  CHECK(renewalTime(t0, t0 + 60) == t0 + 48);
  CHECK(renewalTime(t0, t0 + 90) == t0 + 72);
  CHECK(renewalTime(t0, t0 + 10 * 60) == t0 + 8 * 60);
  // Longer: 5 minutes before the end.
  CHECK(renewalTime(t0, t0 + 3600) == t0 + 3300);
  CHECK(renewalTime(t0, t0 + 26 * 60) == t0 + 21 * 60);
  // Renewal always falls inside the lifetime (never after the end).
  for (int64_t life : {1, 2, 5, 59, 299, 300, 301, 1499, 1500, 1501, 86400}) {
    const int64_t at = renewalTime(t0, t0 + life);
    CHECK(at >= t0);
    CHECK(at < t0 + life);
  }
  // A ticket that ends when it starts (or a clock gone wrong): renew at once.
  CHECK(renewalTime(t0, t0) == t0);
  CHECK(renewalTime(t0, t0 - 10) == t0);
}

TEST_CASE("retryDelay: a refused password waits 15 minutes, an unreachable KDC 30 s",
          "[auth][kerberos]") {
  CHECK(retryDelay(TicketFailure::Credentials) == 900);
  CHECK(retryDelay(TicketFailure::Transient) == 30);
}
