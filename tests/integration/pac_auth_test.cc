// Authentication to the proxies a PAC file names (pac.proxies.
// proxy_authentication, filters/pac_routing_config.h), with real servers:
// nginx serves the PAC file and the test files (tests/support/pac_env.h);
// an MIT KDC in a throwaway realm and squid with negotiate_kerberos_auth
// (tests/support/kerberos_proxy.h), reached as "localhost" (the realm's SPN
// is HTTP/localhost); nghttpx (TLS, h2) in front of that squid; the NTLM /
// Basic test proxy (tests/support/auth_proxy.h). Every transfer is compared
// byte for byte and its user looked up in the right proxy's log. Which
// proxies may get the credentials is authenticate_to's: a proxy it does not
// list gets no Proxy-Authorization at all, and the app its 407.
// [pac_auth]
//
// The fixtures themselves (squid with curl's GSSAPI client, the test proxy
// with curl --proxy-ntlm) are proven in upstream_auth_test.cc.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/auth_proxy.h"
#include "tests/support/pac_auth_env.h"
#include "tests/support/scrape.h"

using namespace h2gate::test;
using namespace h2gate::test::pacauth;
using std::chrono::milliseconds;

TEST_CASE("pac auth: Negotiate to the squid a PAC file names, CONNECT and absolute-form",
          "[pac_auth][kerberos]") {
  REQUIRE_PAC_AUTH_TOOLS();
  KerberosPacEnv env;
  const std::string scheme = GENERATE("negotiate", "auto");
  INFO("scheme " << scheme);
  const std::string proxy = "PROXY localhost:" + str(env.squid->httpPort());
  env.writePac("kerberos.pac", pacFor(proxy));
  H2gate& gate = env.startWith(pacBlock(env.pacUrl("kerberos.pac"),
                                        "                proxy_authentication: {scheme: " + scheme +
                                            "}\n"
                                            "                authenticate_to: [localhost]\n"));
  INFO(gate.process().logTail(40));

  // files.a.test through squid: two tunnels, one absolute-form GET.
  CHECK(env.fetch("", env.url("files.a.test", true, "/1m?c1"), "c1"));
  CHECK(env.fetch("", env.url("files.a.test", true, "/1m?c2"), "c2"));
  CHECK(env.fetch("", env.url("files.a.test", false, "/1m?g1"), "g1"));
  // The rest DIRECT (h2gate resolves web.internal.test itself).
  CHECK(env.fetch("", env.url("web.internal.test", true, "/1m?d1"), "d1"));

  // squid authenticated alice on each of its three; auto's first request
  // went without a token and got 407 (then again with one).
  const auto lines =
      env.squid->waitForAccessLines(scheme == "auto" ? 4 : 3, "", milliseconds(10000));
  INFO("squid: " << env.squid->accessLog());
  CHECK(endingWith(lines, kAlice) == 3);
  CHECK(linesWith(env.squid->accessLog(), " 407 ") == (scheme == "auto" ? 1u : 0u));
  CHECK_FALSE(has(env.squid->accessLog(), "web.internal.test"));

  // What the admin endpoint says of it.
  CHECK(has(pacEval(gate, env.url("files.a.test", false, "/")),
            "credentials for " + proxy + ": " + scheme + "\n"));
  CHECK(has(clustersLine(gate, proxy), " auth=negotiate "));
  if (scheme == "auto") CHECK(has(gate.stderrText(), "wants negotiate authentication (auto)"));
  const Scrape m = scrapeMetrics(gate.adminPort());
  CHECK(m.sum("h2gate_upstream_auth_total", {{"scheme", "negotiate"}, {"result", "success"}}) == 3);
  checkNotLogged(gate, kSecrets);
}

TEST_CASE("pac auth: an HTTPS proxy over HTTP/2, 20 tunnels on one connection, a ticket each",
          "[pac_auth][kerberos][h2]") {
  REQUIRE_PAC_AUTH_TOOLS();
  KerberosPacEnv env;
  Nghttpx nghttpx(negotiateNghttpxOptions(env.ca, env.squid->httpPort()));
  const std::string proxy = "HTTPS localhost:" + str(nghttpx.port());
  env.writePac("h2.pac", pacFor(proxy));
  H2gate& gate = env.startWith(
      pacBlock(env.pacUrl("h2.pac"), "                trusted_ca: " + env.ca.caCertPath() +
                                         "\n"
                                         "                proxy_authentication: "
                                         "{scheme: negotiate}\n"
                                         "                authenticate_to: "
                                         "[LOCALHOST.]\n"));
  INFO(gate.process().logTail(40));
  // 20 tunnels at once (HTTP/1.1 to the origin: a tunnel per transfer).
  std::vector<std::string> args{"-Z", "--parallel-max", "20", "--http1.1", "-w", "%{http_code}\\n"};
  for (int i = 0; i < 20; ++i)
    args.insert(args.end(),
                {"-o", env.out.file("t" + str(i)), env.url("files.a.test", true, "/1m?" + str(i))});
  const CommandResult r = env.curl("", args);
  CHECK(countOccurrences(r.out, "200\n") == 20);
  for (int i = 0; i < 20; ++i)
    CHECK(sha256File(env.out.file("t" + str(i))) == testFile("1m").sha256);

  const auto connects = nghttpx.waitForAccessLines(20, "CONNECT", milliseconds(10000));
  INFO("nghttpx: " << nghttpx.accessLog());
  REQUIRE(connects.size() == 20);
  // One h2 connection from h2gate; every stream carried a token of its own.
  CHECK(nghttpx.clients("CONNECT").size() == 1);
  CHECK(linesWith(nghttpx.accessLog(), " h2 ") == 20);
  const std::set<std::string> tokens = negotiateTokens(connects);
  CHECK(tokens.size() == 20);
  CHECK(tokens.count("") == 0);
  const auto lines = env.squid->waitForAccessLines(20, "CONNECT", milliseconds(10000));
  INFO("squid: " << env.squid->accessLog());
  CHECK(endingWith(lines, kAlice) == 20);
  CHECK(linesWith(env.squid->accessLog(), " 407 ") == 0);
  const std::string line = clustersLine(gate, proxy);
  CHECK(has(line, " alpn=h2 "));
  CHECK(has(line, " auth=negotiate "));
  checkNotLogged(gate, kSecrets);
}

namespace {

// PacEnv with the authenticating test proxy (schemes per `o`; NTLM user
// CORP\alice, password ntlm-pw); with `tls`, speaking TLS with ALPN h2 and
// http/1.1 (its certificate from the env's CA).
struct TestProxyPacEnv : PacEnv {
  explicit TestProxyPacEnv(AuthProxy::Options o, bool tls = false) {
    o.ntlm_users = {"CORP:alice:ntlm-pw"};
    if (tls) {
      const CertFiles cert = ca.issueServer("authproxy");
      o.tls_cert = cert.cert;
      o.tls_key = cert.key;
      o.alpn = "h2,http/1.1";
    }
    proxy = std::make_unique<AuthProxy>(std::move(o));
  }
  H2gate& startWith(const std::string& pac_block) {
    H2gate& g = start(PacEnv::listener("local_proxy", pac_block), {"local_proxy"},
                      [](H2gate::Options& o) { ntlmSanitizerEnv(o); });
    REQUIRE(g.process().waitForLog("using the PAC file from", kPacLoadTimeout));
    return g;
  }
  // The proxy's log entries with this `field` value.
  std::vector<std::map<std::string, std::string>> entries(const std::string& field,
                                                          const std::string& value) const {
    std::vector<std::map<std::string, std::string>> out;
    for (auto& e : proxy->requests())
      if (e[field] == value) out.push_back(e);
    return out;
  }
  std::unique_ptr<AuthProxy> proxy;
};

}  // namespace

TEST_CASE("pac auth: NTLM to the proxy a PAC file names, over HTTP/1.1", "[pac_auth][ntlm]") {
  REQUIRE_PAC_AUTH_TOOLS();
  AuthProxy::Options o;
  o.schemes = "ntlm";
  TestProxyPacEnv env(o);
  const std::string proxy = "PROXY 127.0.0.1:" + str(env.proxy->port());
  // The test proxy resolves the destination itself: localhost.
  env.writePac("ntlm.pac", pacFor(proxy, "localhost"));
  H2gate& gate = env.startWith(
      pacBlock(env.pacUrl("ntlm.pac"),
               "                proxy_authentication:\n"
               "                  scheme: ntlm\n"
               "                  credentials: {username: 'CORP\\alice', password: ntlm-pw}\n"
               "                authenticate_to: [127.0.0.1]\n"));
  INFO(gate.process().logTail(40));
  CHECK(env.fetch("", env.url("localhost", true, "/1m?c1"), "c1"));
  CHECK(env.fetch("", env.url("localhost", true, "/1m?c2"), "c2"));
  CHECK(env.fetch("", env.url("localhost", false, "/1m?g1"), "g1"));
  CHECK(env.fetch("", env.url("web.internal.test", false, "/1m?d1"), "d1"));

  INFO(env.proxy->logText());
  // A handshake per connection, NTLMv2, as CORP\alice; never a request
  // without credentials.
  const auto authenticated = env.entries("scheme", "ntlm");
  REQUIRE(authenticated.size() == 3);
  for (const auto& e : authenticated) {
    CHECK(e.at("user") == "CORP\\alice");
    CHECK(std::stoi(e.at("nt_len")) > 24);
  }
  CHECK(env.entries("scheme", "ntlm-challenge").size() == 3);
  CHECK(env.entries("scheme", "none").empty());
  CHECK_FALSE(has(env.proxy->logText(), "web.internal.test"));
  CHECK(
      has(pacEval(gate, env.url("localhost", true, "/")), "credentials for " + proxy + ": ntlm\n"));
  const std::string line = clustersLine(gate, proxy);
  CHECK(has(line, " auth=ntlm "));
  CHECK(has(line, " alpn=http/1.1 "));
  checkNotLogged(gate, kSecrets);
}

TEST_CASE("pac auth: an HTTPS proxy a PAC file names that wants NTLM is reached over HTTP/1.1",
          "[pac_auth][ntlm][h2]") {
  REQUIRE_PAC_AUTH_TOOLS();
  AuthProxy::Options o;
  o.schemes = "ntlm";
  // Over h2 the test proxy answers every stream 407 NTLM (it cannot do
  // NTLM there); over HTTP/1.1 it does.
  TestProxyPacEnv env(o, /*tls=*/true);
  const std::string scheme = GENERATE("ntlm", "auto");
  INFO("scheme " << scheme);
  const std::string proxy = "HTTPS 127.0.0.1:" + str(env.proxy->port());
  env.writePac("ntlm-tls.pac", pacFor(proxy, "localhost"));
  // No authenticate_to: the PAC URL's host, 127.0.0.1, is the default.
  H2gate& gate = env.startWith(pacBlock(
      env.pacUrl("ntlm-tls.pac"),
      "                trusted_ca: " + env.ca.caCertPath() +
          "\n"
          "                proxy_authentication:\n"
          "                  scheme: " +
          scheme +
          "\n"
          "                  credentials: {username: 'CORP\\alice', password: ntlm-pw}\n"));
  INFO(gate.process().logTail(40));
  for (int i = 0; i < 2; ++i)
    CHECK(env.fetch("", env.url("localhost", true, "/1m?c" + str(i)), "c" + str(i)));
  INFO(env.proxy->logText());
  // scheme ntlm: HTTP/1.1 from the first connection (ALPN http/1.1 only);
  // auto: once over h2 (its 407 says NTLM), then HTTP/1.1.
  CHECK(env.entries("scheme", "h2").size() == (scheme == "auto" ? 1u : 0u));
  const auto authenticated = env.entries("scheme", "ntlm");
  CHECK(authenticated.size() == 2);
  for (const auto& e : authenticated) CHECK(e.at("user") == "CORP\\alice");
  const std::string line = clustersLine(gate, proxy);
  CHECK(has(line, " auth=ntlm "));
  CHECK(has(line, " alpn=http/1.1 "));
  if (scheme == "auto")
    CHECK(has(gate.stderrText(), "reaches this proxy over HTTP/1.1 connections from now on"));
  checkNotLogged(gate, kSecrets);
}

TEST_CASE(
    "pac auth: a proxy authenticate_to does not list gets no credentials; the default "
    "domain does",
    "[pac_auth][basic]") {
  REQUIRE_PAC_AUTH_TOOLS();
  AuthProxy::Options o;
  o.schemes = "basic";
  o.basic = "alice:basic-pw";
  TestProxyPacEnv env(o);
  const std::string proxy = "PROXY 127.0.0.1:" + str(env.proxy->port());
  env.writePac("basic.pac", pacFor(proxy, "localhost"));
  const std::string auth =
      "                proxy_authentication:\n"
      "                  scheme: basic\n"
      "                  credentials: {username: alice, password: basic-pw}\n";

  SECTION("authenticate_to: [localhost]: 127.0.0.1 is not it") {
    H2gate& gate = env.startWith(
        pacBlock(env.pacUrl("basic.pac"), auth + "                authenticate_to: [localhost]\n"));
    INFO(gate.process().logTail(40));
    // Several requests, tunnels and absolute-form: the proxy's 407 each time.
    for (int i = 0; i < 3; ++i) {
      auto r = env.curl("", {"-o", "/dev/null", "-w", "%{http_code}",
                             env.url("localhost", false, "/1k?" + str(i))});
      CHECK(r.out == "407");
      r = env.curl("", {"-o", "/dev/null", "-w", "%{http_connect}",
                        env.url("localhost", true, "/1k?" + str(i))});
      CHECK(r.out == "407");
    }
    // The proxy got no Proxy-Authorization at all, of any scheme.
    INFO(env.proxy->logText());
    const auto all = env.proxy->requests();
    CHECK(all.size() == 6);
    CHECK(env.entries("authorization", "no").size() == all.size());
    CHECK(env.entries("scheme", "none").size() == all.size());
    // Logged once, at warn, naming the proxy, the route and the list.
    const std::string log = gate.stderrText();
    const std::string refusal =
        "pac local_proxy/routes[0]: proxy 127.0.0.1:" + str(env.proxy->port()) +
        " named by the PAC file gets no credentials: not in "
        "authenticate_to [localhost]";
    CHECK(linesWith(log, refusal) == 1);
    std::istringstream in(log);
    for (std::string line; std::getline(in, line);)
      if (has(line, refusal)) CHECK(has(line, " warn "));
    CHECK(has(pacEval(gate, env.url("localhost", false, "/")),
              "credentials for " + proxy + ": none, not in authenticate_to [localhost]\n"));
    CHECK(has(clustersLine(gate, proxy), " auth=none(authenticate_to) "));
    // /config_dump shows the route's proxy_authentication, its password redacted.
    const std::string dump = adminGet(gate.adminPort(), "/config_dump").body;
    CHECK(has(dump, "proxy_authentication"));
    CHECK(has(dump, "authenticate_to"));
    CHECK(has(dump, "[redacted]"));
    CHECK_FALSE(has(dump, "basic-pw"));
    checkNotLogged(gate, kSecrets);
  }

  SECTION("no authenticate_to: the PAC URL's host, 127.0.0.1, may have them") {
    H2gate& gate = env.startWith(pacBlock(env.pacUrl("basic.pac"), auth));
    INFO(gate.process().logTail(40));
    CHECK(env.fetch("", env.url("localhost", false, "/1m?g1"), "g1"));
    CHECK(env.fetch("", env.url("localhost", true, "/1m?c1"), "c1"));
    INFO(env.proxy->logText());
    const auto ok = env.entries("scheme", "basic");
    REQUIRE(ok.size() == 2);
    for (const auto& e : ok) CHECK(e.at("user") == "alice");
    CHECK(env.entries("scheme", "none").empty());
    CHECK_FALSE(has(gate.stderrText(), "gets no credentials"));
    CHECK(has(pacEval(gate, env.url("localhost", false, "/")),
              "credentials for " + proxy + ": basic\n"));
    CHECK(has(clustersLine(gate, proxy), " auth=basic "));
    checkNotLogged(gate, kSecrets);
  }
}
