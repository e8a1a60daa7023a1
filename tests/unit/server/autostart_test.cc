// `h2gate autostart ...` (gateway/server/autostart.h) where there is no Run
// key: on POSIX (autostart_posix.cc) every call says so and fails with
// status 2. The Windows start at logon (autostart_win.cc) is installed,
// read back with reg.exe and removed by h2gate.exe under wine
// (tests/integration/windows_exe_test.cc, [windows-autostart]).
#include "gateway/server/autostart.h"

#include <iostream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

using namespace h2gate;

#if !defined(_WIN32)

namespace {

template <class Fn>
std::string stderrOf(Fn fn, int* status) {
  std::ostringstream captured;
  std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
  *status = fn();
  std::cerr.rdbuf(old);
  return captured.str();
}

}  // namespace

TEST_CASE("autostart: not on this platform, said plainly, status 2", "[server][autostart]") {
  const std::string said =
      "h2gate: autostart: Windows only; on Linux a systemd user unit starts h2gate as you "
      "(deploy/README.md)\n";
  int status = 0;
  CHECK(stderrOf(
            [] {
              return autostart::install({"-c", "/etc/h2gate/h2gate.yaml"});
            },
            &status) == said);
  CHECK(status == 2);
  CHECK(stderrOf([] { return autostart::uninstall(); }, &status) == said);
  CHECK(status == 2);
  CHECK(stderrOf([] { return autostart::status(); }, &status) == said);
  CHECK(status == 2);
  CHECK(autostart::defaultLogFile().empty());
  CHECK(autostart::detachConsole().empty());
}

#endif
