// When h2gate asks a KDC again for a Kerberos ticket it gets with a
// password (gssapi_posix.cc): renewal before a ticket ends, and how long a
// failure keeps it from trying. Plain arithmetic on seconds (the KDC's
// times are whole seconds since the epoch), so tests can check it without
// a KDC. Standard library only.
#pragma once

#include <cstdint>

namespace h2gate::upstream::auth {

// A ticket valid from `start` to `end` is renewed 5 minutes before its end,
// or 20% of its lifetime before, when that is less (tickets shorter than
// 25 minutes): a 10-hour ticket at 9 h 55 min, a 60-second one after 48 s. The 5 minutes match
// the margin within which a token is no longer made on the event loop
// (gssapi_posix.cc, kTicketMargin); the 80% keeps short tickets (a test
// KDC's minute, a realm with tight policy) from being renewed on every
// request. An `end` at or before `start` gives `start`: renew at once.
int64_t renewalTime(int64_t start, int64_t end);

// Why getting a ticket with the password failed, for the back-off.
enum class TicketFailure {
  // The KDC refused the credentials themselves: a wrong or expired password,
  // an unknown, locked or disabled principal; or the principal's name cannot
  // be understood (no default realm). Asking again with the same password
  // cannot help and counts towards the account's lockout (Active Directory
  // locks an account after a few wrong passwords in a few minutes).
  Credentials,
  // The KDC could not be reached, or another error that may pass.
  Transient,
};

// Seconds after a failure before the same principal and password are tried
// again (requests in between get the failure at once, with no KDC asked).
// A configuration reload with another password starts afresh.
constexpr int64_t kRetryCredentialsSeconds = 15 * 60;
constexpr int64_t kRetryTransientSeconds = 30;
int64_t retryDelay(TicketFailure kind);

}  // namespace h2gate::upstream::auth
