// What config/config.cc implements beside the config's plain structs: secrets
// are wiped (the whole buffer, not just what size() says) when replaced or
// dropped, and the authentication schemes' names as the config spells them.
#include "config/config.h"

#include <catch2/catch.hpp>

#include <string>

using namespace h2gate::config;

namespace {

// Whether the bytes of `s`'s whole buffer, up to its capacity, are all zero.
bool bufferZero(const std::string& s) {
  for (size_t i = 0; i < s.capacity(); ++i)
    if (s.data()[i] != '\0') return false;
  return true;
}

}  // namespace

TEST_CASE("config wipe: the whole capacity, an older longer value included", "[config][wipe]") {
  std::string s = "a-long-secret-password-of-forty-bytes!!!";
  s = "short";  // the capacity, and the older value's tail, stay
  REQUIRE(s.capacity() >= 40);
  wipe(s);
  CHECK(s.empty());
  CHECK(bufferZero(s));

  std::string empty;
  wipe(empty);  // nothing to wipe, no crash
  CHECK(empty.empty());
}

TEST_CASE("config ProxyCredentials: assignment copies or moves, the old password wiped",
          "[config][wipe]") {
  ProxyCredentials a("alice", "a-password-long-enough-for-the-heap!!!", "/run/secrets/a");
  const ProxyCredentials b("bob", "b-pass");
  a = b;
  CHECK(a.username == "bob");
  CHECK(a.password == "b-pass");
  CHECK(a.password_file.empty());
  CHECK(b.password == "b-pass");  // a copy

  ProxyCredentials c("carol", "c-password-long-enough-for-the-heap!!!", "/run/secrets/c");
  a = std::move(c);
  CHECK(a.username == "carol");
  CHECK(a.password == "c-password-long-enough-for-the-heap!!!");
  CHECK(a.password_file == "/run/secrets/c");

  // Assigned to itself: unchanged, not wiped.
  ProxyCredentials& same = a;
  a = same;
  CHECK(a.password == "c-password-long-enough-for-the-heap!!!");
}

TEST_CASE("config: the authentication schemes by their config names", "[config]") {
  CHECK(schemeName(ProxyAuthentication::Scheme::Auto) == "auto");
  CHECK(schemeName(ProxyAuthentication::Scheme::Negotiate) == "negotiate");
  CHECK(schemeName(ProxyAuthentication::Scheme::Ntlm) == "ntlm");
  CHECK(schemeName(ProxyAuthentication::Scheme::Basic) == "basic");
}

TEST_CASE("config: how a cluster authenticates, as the startup log says it", "[config]") {
  Cluster c;
  CHECK(authenticationText(c).empty());
  c.credentials = ProxyCredentials{};
  c.credentials->username = "alice";
  c.credentials->password = "never-in-the-text";
  CHECK(authenticationText(c) == "basic");  // credentials alone: Basic

  c.authentication = ProxyAuthentication{};
  c.authentication->scheme = ProxyAuthentication::Scheme::Auto;
  CHECK(authenticationText(c) ==
        "auto (Kerberos tickets got with the password of 'alice', no kinit)");
  c.authentication->principal = "alice@CORP.EXAMPLE";
  c.authentication->scheme = ProxyAuthentication::Scheme::Negotiate;
  CHECK(authenticationText(c) ==
        "negotiate (Kerberos tickets got with the password of 'alice@CORP.EXAMPLE', no kinit)");
  c.authentication->client_keytab = "/etc/h2gate/h2gate.keytab";
  CHECK(authenticationText(c) == "negotiate (Kerberos keytab /etc/h2gate/h2gate.keytab)");
  c.authentication->scheme = ProxyAuthentication::Scheme::Ntlm;
  CHECK(authenticationText(c) == "ntlm");
  c.authentication->scheme = ProxyAuthentication::Scheme::Basic;
  CHECK(authenticationText(c) == "basic");

  c.credentials.reset();  // the user's own tickets (kinit)
  c.authentication->client_keytab.clear();
  c.authentication->scheme = ProxyAuthentication::Scheme::Negotiate;
  CHECK(authenticationText(c) == "negotiate");
}
