// What both keyring backends share (gateway/base/keyring.cc): entry names,
// the Entry that wipes its password, the lookup hook config's tests use.
// The backends: keyring_posix_test.cc, keyring_win_test.cc, and with a real
// Secret Service tests/integration/keyring_test.cc.
#include "gateway/base/keyring.h"

#include <catch2/catch.hpp>

using namespace h2gate;

TEST_CASE("keyring: entry names", "[keyring]") {
  CHECK(keyring::checkName("corp").empty());
  CHECK(keyring::checkName("proxy.corp.example:8080").empty());
  CHECK(keyring::checkName("Zürich office").empty());
  CHECK(keyring::checkName(std::string(128, 'a')).empty());
  CHECK(keyring::checkName("") == "an entry's name must not be empty");
  CHECK(keyring::checkName(std::string(129, 'a')) == "an entry's name has at most 128 characters");
  CHECK(keyring::checkName("a\nb") == "an entry's name must not contain control characters");
  CHECK(keyring::checkName(std::string("a\0b", 3)) ==
        "an entry's name must not contain control characters");
}

TEST_CASE("keyring: an Entry's password is overwritten when cleared", "[keyring]") {
  keyring::Entry e;
  e.username = "alice";
  e.password = "a password longer than the small-string buffer";
  const char* bytes = e.password.data();
  const std::size_t size = e.password.size();
  e.clear();
  CHECK(e.password.empty());
  CHECK(e.username.empty());
  // The same buffer (clear() keeps the capacity), now zeros.
  CHECK(e.password.data() == bytes);
  CHECK(std::string(bytes, size) == std::string(size, '\0'));
}

TEST_CASE("keyring: lookup() asks the test hook while it is set", "[keyring]") {
  int calls = 0;
  keyring::setLookupForTesting([&](const std::string& name, keyring::Entry* out, std::string*) {
    ++calls;
    out->username = "u-" + name;
    out->password = "p";
    return keyring::Status::Ok;
  });
  keyring::Entry e;
  std::string error;
  CHECK(keyring::lookup("x", &e, &error) == keyring::Status::Ok);
  CHECK(e.username == "u-x");
  CHECK(calls == 1);
  keyring::setLookupForTesting({});
  keyring::Entry none;
  // The real keyring again: whatever it says, the hook is not asked.
  keyring::lookup("h2gate-unit-test-no-such-entry", &none, &error);
  CHECK(calls == 1);
}
