// proxy_authentication and proxy_credentials of a cluster
// (config/cluster_loader.cc): what loads, and the errors, each with file,
// line, column and field.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "config/loader.h"
#include "gateway/base/keyring.h"
#include "tests/support/config_util.h"
#include "tests/support/temp_dir.h"

using namespace h2gate::config;
using h2gate::testing::allProblems;
using h2gate::testing::hasProblem;
using h2gate::testing::ScopedEnv;

namespace {

// A cluster c with one TLS endpoint; `auth` (indented 4) is inserted at
// line 10 of the file.
std::string withAuth(const std::string& auth) {
  return std::string(h2gate::testing::kMinimalConfig) +
         "  clusters:\n"
         "  - name: c\n" +
         auth +
         "    load_assignment:\n"
         "      endpoints:\n"
         "      - lb_endpoints:\n"
         "        - endpoint: {address: {socket_address: {address: proxy.corp.example, "
         "port_value: 8443}}}\n"
         "    transport_socket:\n"
         "      name: envoy.transport_sockets.tls\n"
         "      typed_config: {common_tls_context: {alpn_protocols: [h2, http/1.1]}}\n";
}

LoadResult load(const std::string& yaml) {
  return h2gate::testing::loadYaml(yaml);
}

}  // namespace

TEST_CASE("proxy_authentication: each scheme loads", "[config][auth]") {
  SECTION("negotiate: the user's credential cache, the endpoint's host") {
    const LoadResult r = load(withAuth("    proxy_authentication: {scheme: negotiate}\n"));
    INFO(allProblems(r.problems));
    REQUIRE(r.ok());
    const Cluster& c = r.bootstrap.clusters[0];
    REQUIRE(c.authentication);
    CHECK(c.authentication->scheme == ProxyAuthentication::Scheme::Negotiate);
    CHECK(c.authentication->spn.empty());
    CHECK(c.authentication->client_keytab.empty());
    CHECK_FALSE(c.credentials);
    CHECK(c.tls->alpn_protocols == std::vector<std::string>{"h2", "http/1.1"});
  }
  SECTION("the default scheme is auto; credentials from the environment") {
    ScopedEnv pw("H2GATE_TEST_NTLM_PW", "pa55");
    const LoadResult r = load(withAuth(
        "    proxy_authentication:\n"
        "      credentials: {username: 'CORP\\alice', password: '${H2GATE_TEST_NTLM_PW}'}\n"));
    INFO(allProblems(r.problems));
    REQUIRE(r.ok());
    const Cluster& c = r.bootstrap.clusters[0];
    CHECK(c.authentication->scheme == ProxyAuthentication::Scheme::Auto);
    REQUIRE(c.credentials);
    CHECK(c.credentials->username == "CORP\\alice");
    CHECK(c.credentials->password == "pa55");
  }
  SECTION("ntlm: HTTP/1.1 only, the password from a file") {
    h2gate::test::TempDir dir("auth");
    const std::string file = dir.write("pw", "line one\r\n");
    const LoadResult r =
        load(withAuth("    proxy_authentication:\n"
                      "      scheme: ntlm\n"
                      "      credentials:\n"
                      "        username: alice@CORP\n"
                      "        password_file: {filename: " +
                      file + "}\n"));
    INFO(allProblems(r.problems));
    REQUIRE(r.ok());
    const Cluster& c = r.bootstrap.clusters[0];
    CHECK(c.authentication->scheme == ProxyAuthentication::Scheme::Ntlm);
    CHECK(c.credentials->password == "line one");  // one trailing line break dropped
    CHECK(c.credentials->password_file == file);
    // NTLM authenticates connections: h2 is not offered.
    CHECK(c.tls->alpn_protocols == std::vector<std::string>{"http/1.1"});
  }
  SECTION("basic, with the cluster's proxy_credentials") {
    const LoadResult r =
        load(withAuth("    proxy_credentials: {username: bob, password: x}\n"
                      "    proxy_authentication: {scheme: basic}\n"));
    INFO(allProblems(r.problems));
    REQUIRE(r.ok());
    CHECK(r.bootstrap.clusters[0].credentials->username == "bob");
  }
  SECTION("negotiate with a password: no keytab, the principal optional") {
    const LoadResult r =
        load(withAuth("    proxy_authentication:\n"
                      "      scheme: negotiate\n"
                      "      principal: alice@CORP.EXAMPLE\n"
                      "      credentials: {username: 'CORP\\alice', password: x}\n"));
    INFO(allProblems(r.problems));
    REQUIRE(r.ok());
    const Cluster& c = r.bootstrap.clusters[0];
    CHECK(c.authentication->principal == "alice@CORP.EXAMPLE");
    CHECK(c.authentication->client_keytab.empty());
    CHECK(c.credentials->username == "CORP\\alice");
  }
  SECTION("a keytab, a principal and an spn") {
    h2gate::test::TempDir dir("auth");
    const std::string kt = dir.write("svc.keytab", "x");
    const LoadResult r =
        load(withAuth("    proxy_authentication:\n"
                      "      scheme: negotiate\n"
                      "      spn: HTTP@proxy.corp.example\n"
                      "      principal: svc@CORP.EXAMPLE\n"
                      "      client_keytab: {filename: " +
                      kt + "}\n"));
    INFO(allProblems(r.problems));
    REQUIRE(r.ok());
    const ProxyAuthentication& a = *r.bootstrap.clusters[0].authentication;
    CHECK(a.spn == "HTTP@proxy.corp.example");
    CHECK(a.principal == "svc@CORP.EXAMPLE");
    CHECK(a.client_keytab == kt);
  }
}

TEST_CASE("proxy_authentication: errors name file, line, column and field",
          "[config][auth][errors]") {
  const std::string p = "static_resources.clusters[0].proxy_authentication";
  // What goes under the cluster (indented 4), the problem it makes.
  struct Case {
    const char* what;
    std::string auth;
    std::string problem;
  };
  const std::vector<Case> cases{
      {"an unknown scheme", "    proxy_authentication: {scheme: kerberos}\n",
       "cfg.yaml:10:36: " + p +
           ".scheme: expected one of auto, negotiate, ntlm, basic, got 'kerberos'"},
      {"a Kerberos principal name where the spn goes",
       "    proxy_authentication:\n"
       "      spn: HTTP/proxy.corp.example@CORP.EXAMPLE\n",
       "cfg.yaml:11:12: " + p +
           ".spn: expected GSSAPI's SERVICE@HOST form, e.g. HTTP@proxy.example.com "
           "(not a Kerberos principal name like HTTP/proxy.example.com@REALM)"},
      {"Kerberos settings on a scheme without Kerberos",
       "    proxy_authentication:\n"
       "      scheme: ntlm\n"
       "      spn: HTTP@x\n",
       "cfg.yaml:12:12: " + p + ".spn: is for Negotiate (Kerberos): scheme ntlm has no use for it"},
      {"basic without credentials", "    proxy_authentication: {scheme: basic}\n",
       "cfg.yaml:10:27: " + p + ": scheme basic needs credentials (a username and a password)"},
      {"credentials twice",
       "    proxy_credentials: {username: a, password: b}\n"
       "    proxy_authentication:\n"
       "      credentials: {username: a, password: b}\n",
       "cfg.yaml:12:20: " + p +
           ".credentials: the cluster has proxy_credentials already: give the credentials once"},
      {"password and password_file both",
       "    proxy_authentication:\n"
       "      credentials: {username: a, password: b, password_file: {filename: /x}}\n",
       "cfg.yaml:11:62: " + p +
           ".credentials.password_file: give one of password, password_file and keyring"},
      {"neither password nor password_file",
       "    proxy_authentication:\n"
       "      credentials: {username: a}\n",
       "cfg.yaml:11:20: " + p + ".credentials.password: missing required field"},
      {"an unreadable password_file",
       "    proxy_authentication:\n"
       "      credentials: {username: a, password_file: {filename: /nonexistent/pw}}\n",
       "cfg.yaml:11:60: " + p +
           ".credentials.password_file.filename: cannot read '/nonexistent/pw': No such file or "
           "directory"},
      {"a ':' in a Basic user name",
       "    proxy_authentication:\n"
       "      scheme: basic\n"
       "      credentials: {username: 'a:b', password: c}\n",
       "cfg.yaml:11:7: " + p +
           ": the user name contains ':', which Basic cannot carry (scheme basic)"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const LoadResult r = load(withAuth(c.auth));
    INFO(allProblems(r.problems));
    CHECK(hasProblem(r.problems, c.problem));
  }
  {
    // negotiate with a keytab and a password: which would it use?
    h2gate::test::TempDir dir("auth");
    const std::string kt = dir.write("svc.keytab", "x");
    const LoadResult both =
        load(withAuth("    proxy_authentication:\n"
                      "      scheme: negotiate\n"
                      "      credentials: {username: alice, password: pw}\n"
                      "      client_keytab: {filename: " +
                      kt + "}\n"));
    INFO(allProblems(both.problems));
    CHECK(hasProblem(both.problems,
                     "cfg.yaml:13:22: " + p +
                         ".client_keytab: scheme negotiate takes its Kerberos tickets either from "
                         "client_keytab or with the password of credentials, not both: remove "
                         "one"));
    // auto may: the keytab for Negotiate, the credentials for NTLM and Basic.
    const LoadResult in_auto =
        load(withAuth("    proxy_authentication:\n"
                      "      credentials: {username: alice, password: pw}\n"
                      "      client_keytab: {filename: " +
                      kt + "}\n"));
    INFO(allProblems(in_auto.problems));
    CHECK(in_auto.ok());
  }
  // ntlm where the TLS settings offer h2 only.
  std::string yaml = withAuth("    proxy_authentication: {scheme: ntlm}\n");
  yaml.replace(yaml.find("[h2, http/1.1]"), 14, "[h2]");
  const LoadResult r = load(yaml);
  INFO(allProblems(r.problems));
  CHECK(hasProblem(r.problems, "cfg.yaml:10:36: " + p +
                                   ".scheme: NTLM needs HTTP/1.1 connections, but "
                                   "alpn_protocols does not offer http/1.1"));
}

namespace {

// The keyring, as config's parser sees it (gateway/base/keyring.h
// setLookupForTesting): entry "corp" holds alice and "kr-pw", entry
// "nouser" only a password, "locked" fails as a locked keyring does; any
// other name is absent. Restored at the end of the scope.
class FakeKeyring {
 public:
  FakeKeyring() {
    h2gate::keyring::setLookupForTesting(
        [this](const std::string& name, h2gate::keyring::Entry* out, std::string* error) {
          ++lookups;
          using h2gate::keyring::Status;
          if (name == "locked") {
            *error = "the keyring is locked and was not unlocked";
            return Status::Failed;
          }
          if (name != "corp" && name != "nouser") return Status::NotFound;
          if (name == "corp") out->username = "alice";
          out->password = "kr-pw";
          return Status::Ok;
        });
  }
  ~FakeKeyring() { h2gate::keyring::setLookupForTesting({}); }
  int lookups = 0;
};

}  // namespace

TEST_CASE("credentials from the keyring: keyring: NAME", "[config][auth][keyring]") {
  FakeKeyring keyring;
  SECTION("the entry's user name and password") {
    const LoadResult r =
        load(withAuth("    proxy_authentication:\n"
                      "      scheme: basic\n"
                      "      credentials: {keyring: corp}\n"));
    INFO(allProblems(r.problems));
    REQUIRE(r.ok());
    const Cluster& c = r.bootstrap.clusters[0];
    REQUIRE(c.credentials);
    CHECK(c.credentials->username == "alice");
    CHECK(c.credentials->password == "kr-pw");
    CHECK(c.credentials->keyring == "corp");
    CHECK(c.credentials->password_file.empty());
    CHECK(keyring.lookups == 1);
  }
  SECTION("the same user name given beside it; proxy_credentials too") {
    const LoadResult r =
        load(withAuth("    proxy_credentials: {username: alice, keyring: corp}\n"));
    INFO(allProblems(r.problems));
    REQUIRE(r.ok());
    CHECK(r.bootstrap.clusters[0].credentials->password == "kr-pw");
  }
  SECTION("an entry without a user name takes the config's") {
    const LoadResult r =
        load(withAuth("    proxy_authentication:\n"
                      "      credentials: {username: 'CORP\\bob', keyring: nouser}\n"));
    INFO(allProblems(r.problems));
    REQUIRE(r.ok());
    CHECK(r.bootstrap.clusters[0].credentials->username == "CORP\\bob");
    CHECK(r.bootstrap.clusters[0].credentials->password == "kr-pw");
  }
}

TEST_CASE("credentials from the keyring: errors name file, line, column, field and the reason",
          "[config][auth][keyring][errors]") {
  FakeKeyring keyring;
  const std::string p = "static_resources.clusters[0].proxy_authentication.credentials";
  struct Case {
    const char* what;
    std::string auth;
    std::string problem;
  };
  const std::vector<Case> cases{
      {"no such entry",
       "    proxy_authentication:\n"
       "      credentials: {keyring: nope}\n",
       "cfg.yaml:11:30: " + p + ".keyring: no entry 'nope' in " +
           std::string(h2gate::keyring::backendName()) +
           " (h2gate credentials set nope USER stores one)"},
      {"a keyring that cannot be read",
       "    proxy_authentication:\n"
       "      credentials: {keyring: locked}\n",
       "cfg.yaml:11:30: " + p +
           ".keyring: keyring entry 'locked': the keyring is locked and was not unlocked"},
      {"a user name other than the entry's",
       "    proxy_authentication:\n"
       "      credentials: {username: bob, keyring: corp}\n",
       "cfg.yaml:11:45: " + p +
           ".keyring: username 'bob' differs from 'alice', the user name keyring entry 'corp' "
           "holds"},
      {"an entry without a user name, none given",
       "    proxy_authentication:\n"
       "      credentials: {keyring: nouser}\n",
       "cfg.yaml:11:30: " + p +
           ".keyring: keyring entry 'nouser' holds no user name: give username"},
      {"keyring and password both",
       "    proxy_authentication:\n"
       "      credentials: {username: a, password: b, keyring: corp}\n",
       "cfg.yaml:11:56: " + p + ".keyring: give one of password, password_file and keyring"},
      {"an empty name",
       "    proxy_authentication:\n"
       "      credentials: {keyring: ''}\n",
       "cfg.yaml:11:30: " + p + ".keyring: an entry's name must not be empty"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const LoadResult r = load(withAuth(c.auth));
    INFO(allProblems(r.problems));
    CHECK(hasProblem(r.problems, c.problem));
    CHECK(allProblems(r.problems).find("kr-pw") == std::string::npos);
  }
}
