#include "gateway/server/run_as.h"

namespace h2gate::run_as {

// No LocalSystem here: a daemon's Kerberos identity is whatever credential
// cache or keytab it is given (config/README.md).
std::string processUserSid() {
  return {};
}

bool isLocalSystem(const std::string&) {
  return false;
}

}  // namespace h2gate::run_as
