#include "gateway/upstream/auth/ticket_schedule.h"

#include <algorithm>

namespace h2gate::upstream::auth {

int64_t renewalTime(int64_t start, int64_t end) {
  if (end <= start) return start;
  constexpr int64_t kBeforeEnd = 5 * 60;
  const int64_t lifetime = end - start;
  // 20% rounded up, so that even a ticket of a few seconds is renewed before it ends.
  return end - std::min(kBeforeEnd, (lifetime + 4) / 5);
}

int64_t retryDelay(TicketFailure kind) {
  return kind == TicketFailure::Credentials ? kRetryCredentialsSeconds : kRetryTransientSeconds;
}

}  // namespace h2gate::upstream::auth
