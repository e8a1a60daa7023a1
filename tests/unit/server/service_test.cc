// `h2gate service ...` (gateway/server/service.h) where there is no service
// manager to register with: on POSIX (service_posix.cc) every call says so
// and fails with status 2, so a script or a user typing it on Linux learns
// that systemd runs h2gate. The Windows service (service_win.cc) is
// installed (`h2gate.exe service install`), run by the service manager and
// removed under wine by tests/windows/msi_test.sh.
#include "gateway/server/service.h"

#include <functional>
#include <iostream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

using namespace h2gate;

#if !defined(_WIN32)

namespace {

// What `fn` wrote to std::cerr.
template <class Fn>
std::string stderrOf(Fn fn, int* status) {
  std::ostringstream captured;
  std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
  *status = fn();
  std::cerr.rdbuf(old);
  return captured.str();
}

}  // namespace

TEST_CASE("service: not on this platform, said plainly, status 2", "[server][service]") {
  const std::string said =
      "h2gate: service: Windows only; on Linux systemd runs h2gate "
      "(deploy/debian/h2gate.service)\n";
  int status = 0;
  CHECK(stderrOf(
            [] {
              return service::install({"-c", "/etc/h2gate/h2gate.yaml"});
            },
            &status) == said);
  CHECK(status == 2);
  CHECK(stderrOf([] { return service::uninstall(); }, &status) == said);
  CHECK(status == 2);
  bool served = false;
  CHECK(stderrOf(
            [&] {
              return service::run([&](const std::function<void()>&) {
                served = true;
                return 0;
              });
            },
            &status) == said);
  CHECK(status == 2);
  CHECK_FALSE(served);  // nothing runs as a service that is not one
  CHECK(service::defaultLogFile().empty());
}

#endif
