// Windows has no per-process open-file limit like RLIMIT_NOFILE: sockets are
// handles, bounded by memory, so there is nothing to raise and nothing to warn
// about (fd_limit_posix.cc is the POSIX side).
#include "gateway/net/fd_limit.h"

namespace h2gate::net {

FdLimit raiseFdLimit() {
  return {};
}

void raiseFdLimitAndLog(const config::Bootstrap&) {}

}  // namespace h2gate::net
