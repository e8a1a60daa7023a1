// RLIMIT_NOFILE: getrlimit/setrlimit (Windows: fd_limit_win.cc).
#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "gateway/base/log.h"
#include "gateway/net/fd_limit.h"

namespace h2gate::net {
namespace {

constexpr uint64_t kFewFds = 4096;

uint64_t toU64(rlim_t v) {
  return v == RLIM_INFINITY ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(v);
}

}  // namespace

FdLimit raiseFdLimit() {
  FdLimit out;
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) {
    out.error = std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno);
    return out;
  }
  out.soft_before = out.soft = toU64(rl.rlim_cur);
  out.hard = toU64(rl.rlim_max);
  if (rl.rlim_cur == rl.rlim_max) return out;
  // An unlimited hard limit is not a valid soft limit everywhere (macOS caps
  // it at kern.maxfilesperproc / OPEN_MAX): try the hard limit, then less.
  const rlim_t candidates[] = {rl.rlim_max, 1 << 20, 1 << 16, 10240};
  int last_errno = 0;
  for (rlim_t want : candidates) {
    if (want > rl.rlim_max || want <= rl.rlim_cur) continue;
    struct rlimit next = rl;
    next.rlim_cur = want;
    if (::setrlimit(RLIMIT_NOFILE, &next) == 0) {
      out.soft = toU64(want);
      return out;
    }
    last_errno = errno;
  }
  if (last_errno != 0)
    out.error = std::string("setrlimit(RLIMIT_NOFILE): ") + std::strerror(last_errno);
  return out;
}

void raiseFdLimitAndLog(const config::Bootstrap& bootstrap) {
  const FdLimit fd = raiseFdLimit();
  if (!fd.error.empty()) {
    H2G_LOG(
        Warn, 0, 0,
        "open-file limit stays at " << fd.soft << " (hard limit " << fd.hard << "): " << fd.error);
  } else if (fd.soft != fd.soft_before) {
    H2G_LOG(Info, 0, 0,
            "open-file limit (RLIMIT_NOFILE) raised from " << fd.soft_before << " to " << fd.soft);
  } else {
    H2G_LOG(Info, 0, 0, "open-file limit (RLIMIT_NOFILE) is " << fd.soft);
  }
  if (fd.soft == 0) return;  // could not read it
  const uint64_t needed = fdsNeeded(bootstrap);
  if (fd.soft < kFewFds) {
    H2G_LOG(Warn, 0, 0,
            "open-file limit " << fd.soft << " is below " << kFewFds << ": about "
                               << (fd.soft > kReserveFds ? (fd.soft - kReserveFds) / 2 : 0)
                               << " app connections at most; raise the hard limit (ulimit -Hn, "
                                  "LimitNOFILE= in a systemd unit)");
  } else if (fd.soft < needed) {
    H2G_LOG(Warn, 0, 0,
            "open-file limit " << fd.soft << " is below the " << needed
                               << " descriptors the listeners' max_connections may need: beyond "
                                  "about "
                               << (fd.soft - kReserveFds) / 2
                               << " app connections, accepting fails until some close");
  }
}

}  // namespace h2gate::net
