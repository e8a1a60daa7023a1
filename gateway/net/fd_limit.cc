#include "gateway/net/fd_limit.h"

namespace h2gate::net {

uint64_t fdsNeeded(const config::Bootstrap& bootstrap) {
  uint64_t n = kReserveFds;
  for (const config::Listener& l : bootstrap.listeners) n += 2 * uint64_t{l.max_connections};
  return n;
}

}  // namespace h2gate::net
