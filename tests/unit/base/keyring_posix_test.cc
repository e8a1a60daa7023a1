// The Secret Service backend (gateway/base/keyring_posix.cc) where there is
// none to ask: no D-Bus session bus, or a bus address nothing listens on.
// Each operation fails at once with the cause and what to do. A real
// Secret Service (gnome-keyring-daemon on a private bus), a locked keyring
// and one that does not answer: tests/integration/keyring_test.cc.
#include "gateway/base/keyring.h"

#include <chrono>

#include <catch2/catch.hpp>

#include "tests/support/config_util.h"
#include "tests/support/temp_dir.h"

using namespace h2gate;
using h2gate::testing::ScopedEnv;
using Clock = std::chrono::steady_clock;

TEST_CASE("keyring: no D-Bus session bus gives the reason at once", "[keyring]") {
  h2gate::test::TempDir runtime("keyring-runtime");  // no "bus" socket in it
  ScopedEnv bus("DBUS_SESSION_BUS_ADDRESS", std::nullopt);
  ScopedEnv dir("XDG_RUNTIME_DIR", runtime.path().string());
  const auto start = Clock::now();
  keyring::Entry e;
  std::string error;
  CHECK(keyring::lookup("corp", &e, &error) == keyring::Status::Failed);
  CHECK(error ==
        "no Secret Service: DBUS_SESSION_BUS_ADDRESS is not set (there is no D-Bus session bus, "
        "as in a system service or an ssh login); use password_file or ${ENV} instead");
  error.clear();
  CHECK(keyring::store("corp", "alice", "pw", &error) == keyring::Status::Failed);
  CHECK(error.starts_with("no Secret Service: DBUS_SESSION_BUS_ADDRESS is not set"));
  error.clear();
  CHECK(keyring::remove("corp", &error) == keyring::Status::Failed);
  CHECK(error.starts_with("no Secret Service: DBUS_SESSION_BUS_ADDRESS is not set"));
  CHECK(Clock::now() - start < std::chrono::seconds(2));
}

TEST_CASE("keyring: a session bus address nothing listens on", "[keyring]") {
  h2gate::test::TempDir runtime("keyring-runtime");
  ScopedEnv bus("DBUS_SESSION_BUS_ADDRESS", "unix:path=" + runtime.file("no-bus"));
  const auto start = Clock::now();
  keyring::Entry e;
  std::string error;
  CHECK(keyring::lookup("corp", &e, &error) == keyring::Status::Failed);
  INFO(error);
  CHECK(error.starts_with("no Secret Service: cannot connect to the D-Bus session bus ("));
  CHECK(error.ends_with("); use password_file or ${ENV} instead"));
  CHECK(Clock::now() - start < keyring::kTimeout);
}
