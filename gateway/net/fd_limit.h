// The process's open-file limit (RLIMIT_NOFILE). Every app connection costs
// up to two descriptors (its socket and, in direct mode or to an HTTP/1.1
// proxy, the upstream socket), so the usual soft limit of 1024 would cap a
// proxy at about 500 tunnels while the hard limit allows far more.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"

namespace h2gate::net {

struct FdLimit {
  uint64_t soft_before = 0;
  uint64_t soft = 0;  // after raising
  uint64_t hard = 0;  // UINT64_MAX: unlimited
  std::string error;  // why it could not be read or raised; "" when fine
};

// Raises the soft limit to the hard limit (where the hard limit is
// "unlimited", to the highest value setrlimit accepts; fd_limit_posix.cc).
// Windows has no such limit: returns zeros (fd_limit_win.cc).
FdLimit raiseFdLimit();

// Descriptors kept apart from app connections: listeners, pools, the admin
// endpoint and logs.
inline constexpr uint64_t kReserveFds = 64;

// Descriptors the listeners may need at their max_connections: two per app
// connection plus kReserveFds (fd_limit.cc).
uint64_t fdsNeeded(const config::Bootstrap& bootstrap);

// raiseFdLimit(), then logs the soft limit at Info, and a Warn when it
// stays below 4096 or below fdsNeeded(bootstrap). Call once at start. Does
// nothing on Windows.
void raiseFdLimitAndLog(const config::Bootstrap& bootstrap);

}  // namespace h2gate::net
