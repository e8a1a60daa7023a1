// `h2gate check URL` against real proxies (nghttpx speaking h2, squid's
// HTTPS port speaking HTTP/1.1 only, squid with Basic authentication or a
// CONNECT-denying ACL) and nginx: every failure the testbed can produce
// gives the right first failure, its advice and exit 1; a working path
// gives exit 0. No h2gate daemon runs in these tests. Proxy authentication
// (Negotiate with a real KDC and squid, NTLM with the pyspnego test proxy)
// and fallback (endpoints, fallback_clusters) are walked as the daemon
// walks them. A hostile server (tests/support/hostile_server.py) cannot
// drive the terminal through what check prints, nor keep it waiting or
// growing without end.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tests/support/auth_proxy.h"
#include "tests/support/hostile_server.h"
#include "tests/support/kerberos_proxy.h"
#include "tests/support/net.h"
#include "tests/support/upstream_env.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

CommandResult check(const std::vector<std::string>& args) {
  testFile("1k");  // nginx serves /1k
  std::vector<std::string> argv{H2gate::binaryPath(H2GATE_BINARY), "check"};
  argv.insert(argv.end(), args.begin(), args.end());
  return runCommand(argv, milliseconds(60000));
}

// The last line the command printed.
std::string lastLine(const std::string& out) {
  std::string s = out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s.substr(s.rfind('\n') + 1);
}

}  // namespace

TEST_CASE("check: a working h2 path exits 0 and shows every step", "[check]") {
  H2Env env;
  // The chain itself works (curl straight to nghttpx).
  CommandResult c = runCurl({"-sS", "-o", "/dev/null", "-w", "%{http_code}", "--proxy-cacert",
                             env.ca.caCertPath(), "--cacert", env.ca.caCertPath(), "-x",
                             env.nghttpx.url(), env.nginx.httpsUrl("/1k")});
  REQUIRE(c.out == "200");

  CommandResult r = check({env.nginx.httpsUrl("/1k"), "--upstream", env.nghttpx.url(), "--cacert",
                           env.ca.caCertPath()});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(has(r.out, "ok    route"));
  CHECK(has(r.out, "goes to cluster 'upstream'"));
  CHECK(has(r.out, "ok    tcp"));
  CHECK(has(r.out, "ok    tls"));
  CHECK(has(r.out, "ok    verify"));
  CHECK((has(r.out, "ok    alpn") && has(r.out, "h2: one TLS connection")));
  CHECK((has(r.out, "ok    connect") && has(r.out, ": 200")));
  // The origin's certificate is from the test CA, not the system store: a
  // warning, not a failure (apps verify the origin themselves).
  CHECK(has(r.out, "WARN  origin-tls"));
  CHECK((has(r.out, "ok    request") && has(r.out, "HEAD /1k -> HTTP/1.1 200")));
  CHECK(lastLine(r.out).rfind("OK: " + env.nginx.httpsUrl("/1k") +
                                  " answered 200 through cluster "
                                  "'upstream' (127.0.0.1:" +
                                  str(env.nghttpx.port()) + ", h2)",
                              0) == 0);
  // It really went through nghttpx, as a CONNECT.
  CHECK(!env.nghttpx.waitForAccessLines(1, "CONNECT", milliseconds(5000)).empty());

  // Plain http:// goes through the proxy as an absolute-form HEAD.
  r = check(
      {env.nginx.httpUrl("/1k"), "--upstream", env.nghttpx.url(), "--cacert", env.ca.caCertPath()});
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK((has(r.out, "ok    request") && has(r.out, "through the proxy: 200")));
}

TEST_CASE("check: the proxy is down", "[check]") {
  H2Env env;
  RefusingPort down;
  const std::string url = "https://127.0.0.1:" + str(down.port());
  // The fixture: curl is refused there too.
  const CommandResult c = runCommand({"curl", "-sS", "-o", "/dev/null", url}, milliseconds(10000));
  CHECK(c.exit_code == 7);
  CommandResult r =
      check({env.nginx.httpsUrl("/1k"), "--upstream", url, "--cacert", env.ca.caCertPath()});
  INFO(r.out);
  CHECK(r.exit_code == 1);
  CHECK(has(r.out, "FAIL  tcp"));
  CHECK(has(lastLine(r.out), "FAIL (tcp): connecting to proxy failed: 127.0.0.1:" +
                                 str(down.port()) + ": Connection refused"));
  CHECK(!has(r.out, "connect  "));  // nothing after the first failure
}

TEST_CASE("check: a proxy certificate from an unknown CA", "[check]") {
  H2Env env;
  // Without --cacert the system store is used, which does not know the test CA.
  CommandResult r = check({env.nginx.httpsUrl("/1k"), "--upstream", env.nghttpx.url()});
  INFO(r.out);
  CHECK(r.exit_code == 1);
  CHECK(has(r.out, "FAIL  tls"));
  CHECK(has(lastLine(r.out),
            "FAIL (tls): certificate verify failed: unable to get local issuer "
            "certificate"));
  CHECK(has(lastLine(r.out), "unknown CA: pass --cacert FILE"));
  CHECK(has(r.out, "chain: CN="));
}

TEST_CASE("check: 407 from the proxy, with and without credentials", "[check]") {
  H2EnvOptions o;
  o.squid_auth = true;
  H2Env env(o);
  // The fixture: squid behind nghttpx wants credentials.
  CommandResult c =
      runCurl({"-sS", "-o", "/dev/null", "-w", "%{http_code}", "--proxy-cacert",
               env.ca.caCertPath(), "-x", env.nghttpx.url(), env.nginx.httpUrl("/1k")});
  REQUIRE(c.out == "407");

  CommandResult r = check({env.nginx.httpsUrl("/1k"), "--upstream", env.nghttpx.url(), "--cacert",
                           env.ca.caCertPath()});
  INFO(r.out);
  CHECK(r.exit_code == 1);
  CHECK((has(r.out, "--    proxy-auth") && has(r.out, "none configured")));
  CHECK(has(lastLine(r.out),
            "FAIL (connect): 407 proxy authentication required (the proxy "
            "offers: Basic)"));
  CHECK(has(lastLine(r.out), "give credentials"));

  const std::string port = str(env.nghttpx.port());
  r = check({env.nginx.httpsUrl("/1k"), "--upstream", "https://alice:wrong@127.0.0.1:" + port,
             "--cacert", env.ca.caCertPath()});
  INFO(r.out);
  CHECK(r.exit_code == 1);
  CHECK(has(r.out, "sending Basic ("));
  CHECK(has(r.out, "characters, not shown) as 'alice'"));
  CHECK(has(r.out, "FAIL  connect"));
  CHECK(has(lastLine(r.out),
            "FAIL (proxy-auth): the proxy rejected the Basic credentials as "
            "'alice' — check user name and password"));
  CHECK(!has(r.out, "wrong"));  // the password is never printed

  r = check({env.nginx.httpsUrl("/1k"), "--upstream", "https://alice:s3cret@127.0.0.1:" + port,
             "--cacert", env.ca.caCertPath()});
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK(!has(r.out, "s3cret"));

  // auto over h2: the 407 names Basic; the retry is a new stream on the
  // same h2 connection (one TLS handshake, one session).
  r = check({env.nginx.httpsUrl("/1k"), "--upstream", "https://alice:s3cret@127.0.0.1:" + port,
             "--cacert", env.ca.caCertPath(), "--proxy-auth", "auto"});
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK(has(r.out, "nothing sent up front (the scheme is learnt from the proxy's 407)"));
  CHECK(has(r.out, "the proxy offers Basic: auto picks basic; one retry with it"));
  CHECK(has(r.out, "Basic accepted (200"));
  CHECK(countOccurrences(r.out, "ok    tls") == 1);
  CHECK(countOccurrences(r.out, "session up") == 1);
  CHECK(!has(r.out, "reconnect"));
  CHECK(lastLine(r.out).rfind("OK: ", 0) == 0);
  CHECK(!has(r.out, "s3cret"));
}

TEST_CASE("check: the proxy refuses the CONNECT (squid ACL)", "[check]") {
  TempDir work("check-acl");
  TestCA ca{work.path().string()};
  Nginx::Options no;
  no.ca = &ca;
  Nginx nginx(no);
  Squid::Options so;
  so.ca = &ca;
  so.https = true;
  so.access_rules =
      "acl denied_port port " + str(nginx.tlsPort()) + "\nhttp_access deny CONNECT denied_port\n";
  Squid squid(so);
  const std::string proxy = "https://127.0.0.1:" + str(squid.httpsPort());
  // The fixture: squid answers this CONNECT with 403.
  CommandResult c =
      runCurl({"-sS", "-o", "/dev/null", "-w", "%{http_code}", "--proxy-cacert", ca.caCertPath(),
               "--cacert", ca.caCertPath(), "-x", proxy, nginx.httpsUrl("/1k")});
  REQUIRE(has(c.out + c.err, "403"));

  CommandResult r =
      check({nginx.httpsUrl("/1k"), "--upstream", proxy, "--cacert", ca.caCertPath()});
  INFO(r.out);
  CHECK(r.exit_code == 1);
  CHECK(has(lastLine(r.out),
            "FAIL (connect): CONNECT 127.0.0.1:" + str(nginx.tlsPort()) + " refused: 403"));
  CHECK(has(lastLine(r.out), "the proxy's policy denies this destination"));
  // Squid's HTTPS port offers no ALPN: HTTP/1.1, with a warning on the way.
  CHECK(has(r.out, "WARN  alpn"));
}

TEST_CASE("check: DNS failures, of the proxy and of the destination", "[check]") {
  CommandResult r = check({"https://example.com/", "--upstream", "https://proxy.invalid:3128"});
  INFO(r.out);
  CHECK(r.exit_code == 1);
  CHECK(has(lastLine(r.out), "FAIL (dns): lookup of proxy proxy.invalid failed"));
  CHECK(has(lastLine(r.out), "check the proxy's name in the config"));

  // Direct mode: h2gate resolves the destination itself.
  r = check({"https://no-such-host.invalid/"});
  INFO(r.out);
  CHECK(r.exit_code == 1);
  CHECK(has(r.out, "goes DIRECT"));
  CHECK(has(lastLine(r.out), "FAIL (dns): lookup of destination no-such-host.invalid failed"));
}

TEST_CASE("check: a proxy that refuses h2 is used over HTTP/1.1", "[check]") {
  H1Env env;
  CommandResult r = check(
      {env.nginx.httpsUrl("/1k"), "--upstream", env.proxyUrl(), "--cacert", env.ca.caCertPath()});
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK((has(r.out, "WARN  alpn") && has(r.out, "the proxy refused h2, HTTP/1.1 used")));
  CHECK((has(r.out, "ok    connect") && has(r.out, ": 200")));
  CHECK((has(r.out, "ok    request") && has(r.out, "HEAD /1k -> HTTP/1.1 200")));
  CHECK(has(lastLine(r.out), ", http1)"));
  CHECK(has(lastLine(r.out), "warnings (above): alpn"));
}

TEST_CASE("check: a config file, and usage errors", "[check]") {
  H2Env env;
  TempDir dir("check");
  const std::string cfg =
      dir.write("h2gate.yaml", upstreamModeYaml(env.nghttpx.port(), env.ca.caCertPath()));
  CommandResult r = check({env.nginx.httpsUrl("/1k"), "-c", cfg});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(has(r.out, "goes to cluster 'proxy'"));

  r = check({"example.com"});
  CHECK(r.exit_code == 2);
  CHECK(has(r.err, "check: expected a URL"));
}

// --- Proxy authentication (gateway/upstream/auth/'s schemes) walked as the daemon does:
// squid with negotiate_kerberos_auth (a real MIT KDC), the NTLM test proxy
// (pyspnego verifies NTLMv2), each first proven with curl's own client.

namespace {

// `h2gate check URL -c FILE` with `env` on top.
// An ASan build given a password (NTLM through gss-ntlmssp): that library's
// own leak is suppressed (tests/lsan.supp), which needs full stack unwinding,
// as for the daemon in upstream_auth_test.cc. Only then, since unwinding at
// every malloc slows OpenSSL so much that, on a loaded machine, a TLS
// handshake inside the tunnel took 22-30 s: such a run gets --step-timeout 3m
// (a release build's steps take milliseconds; the timeouts are tested apart).
// Without ASan these variables do nothing.
CommandResult checkWith(const TempDir& dir, const std::string& yaml, const std::string& url,
                        std::map<std::string, std::optional<std::string>> env) {
  testFile("1k");
  const std::string cfg = dir.write("check-" + str(freePort()) + ".yaml", yaml);
  std::vector<std::string> args{H2gate::binaryPath(H2GATE_BINARY), "check", url, "-c", cfg};
  if (has(yaml, "password")) {
    const char* asan = std::getenv("ASAN_OPTIONS");
    env["ASAN_OPTIONS"] = std::string(asan ? asan : "") + ":fast_unwind_on_malloc=0";
    args.insert(args.end(), {"--step-timeout", "3m"});
  }
  env["LSAN_OPTIONS"] = "suppressions=" H2GATE_SOURCE_DIR "/tests/lsan.supp";
  return runCommand(args, env, milliseconds(400000));
}

// Nothing check printed may carry a credential: no Kerberos token
// (hasGssToken), no NTLM message ("NTLMSSP" in base64), no password.
void checkNoSecretsPrinted(const CommandResult& r, const std::vector<std::string>& passwords) {
  const std::string all = r.out + r.err;
  CHECK(!hasGssToken(all));
  CHECK(!has(all, "TlRMTVNTUA"));
  CHECK(!has(all, "Negotiate Y"));
  for (const std::string& p : passwords) CHECK(!has(all, p));
}

#define REQUIRE_AUTH_TOOLS()                                                 \
  do {                                                                       \
    const std::string missing = kerberosToolsMissing() + authProxyMissing(); \
    if (!missing.empty()) FAIL("not installed:" << missing);                 \
  } while (0)

}  // namespace

TEST_CASE("check: Negotiate with a Kerberos ticket, and without one", "[check][auth][kerberos]") {
  REQUIRE_AUTH_TOOLS();
  KerberosSquidEnv env("check-krb");
  const std::string url = env.nginx.httpsUrl("/1k");
  // The fixture: curl's own GSSAPI client gets through with alice's ticket.
  {
    CommandResult c =
        env.realm.curl(env.realm.alice, {"-o", "/dev/null", "-w", "%{http_code}", "--proxy",
                                         "https://localhost:" + str(env.squid->httpsPort()),
                                         "--proxy-cacert", env.ca.caCertPath(), "--cacert",
                                         env.ca.caCertPath(), "--proxy-negotiate", "-U", ":", url});
    INFO(c.err);
    REQUIRE(c.out == "200");
  }
  const std::string yaml = authConfigYaml("localhost", env.squid->httpsPort(), env.ca.caCertPath(),
                                          "      scheme: negotiate\n");

  CommandResult r = checkWith(env.work, yaml, url, env.realm.kdc.env(env.realm.alice));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(has(r.out, "--    proxy-auth"));
  CHECK(has(r.out, "configured: negotiate"));
  CHECK(has(r.out, "ok    proxy-auth"));
  CHECK(has(r.out, "sending Negotiate ("));
  CHECK(has(r.out, "characters, not shown)"));
  // squid sends no mutual-authentication token: said, not a failure.
  CHECK(has(r.out, "Negotiate accepted (200"));
  CHECK(has(r.out, "the proxy sent no mutual-authentication token"));
  CHECK(has(r.out, "ok    connect"));
  CHECK(lastLine(r.out).rfind("OK: " + url, 0) == 0);
  checkNoSecretsPrinted(r, {"alice-pw"});
  // squid saw alice's ticket: curl's CONNECT and check's.
  const auto lines = env.squid->waitForAccessLines(2, "CONNECT", milliseconds(5000));
  INFO(env.squid->accessLog());
  CHECK(std::count_if(lines.begin(), lines.end(),
                      [](const std::string& l) { return l.ends_with(" alice@H2GATE.TEST"); }) == 2);

  // No credential cache: the first failure is the missing ticket.
  r = checkWith(env.work, yaml, url, env.realm.kdc.env("FILE:" + env.work.file("no-such-cache")));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK(has(r.out, "cannot make negotiate credentials"));
  CHECK(has(r.out, "FAIL  connect"));
  CHECK(has(r.out, "407 proxy authentication required (the proxy offers: Negotiate)"));
  CHECK(lastLine(r.out).rfind("FAIL (proxy-auth): no negotiate credentials: ", 0) == 0);
  CHECK(has(lastLine(r.out), "no Kerberos ticket: run kinit"));
  CHECK(has(lastLine(r.out), "— get a Kerberos ticket: run kinit"));
  checkNoSecretsPrinted(r, {"alice-pw"});

  // auto: the 407 names Negotiate; one retry with a ticket.
  r = checkWith(env.work,
                authConfigYaml("localhost", env.squid->httpsPort(), env.ca.caCertPath(),
                               "      scheme: auto\n"),
                url, env.realm.kdc.env(env.realm.alice));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(has(r.out, "nothing sent up front (the scheme is learnt from the proxy's 407)"));
  CHECK(has(r.out,
            "407 Proxy Authentication Required, the proxy offers Negotiate: auto picks "
            "negotiate; one retry with it"));
  CHECK(has(r.out, "Negotiate accepted (200"));
  CHECK(lastLine(r.out).rfind("OK: ", 0) == 0);
  checkNoSecretsPrinted(r, {"alice-pw"});
}

TEST_CASE("check: Negotiate with a password, no kinit: the ticket it got; a wrong password",
          "[check][auth][kerberos][password]") {
  REQUIRE_AUTH_TOOLS();
  KerberosSquidEnv env("check-krb-pw");
  const std::string url = env.nginx.httpsUrl("/1k");
  env.realm.kdc.addPrincipal("bob", "Bob-pw-check");
  // The fixture: bob's own ticket gets curl through squid.
  {
    CommandResult c =
        env.realm.curl(env.realm.kdc.kinit("bob", "Bob-pw-check"),
                       {"-o", "/dev/null", "-w", "%{http_code}", "--proxy",
                        "http://localhost:" + str(env.squid->httpPort()), "--proxy-negotiate", "-U",
                        ":", "--cacert", env.ca.caCertPath(), url});
    INFO(c.err);
    REQUIRE(c.out == "200");
  }
  const auto no_cache = env.realm.kdc.env("FILE:" + env.work.file("no-such-cache"));
  auto yaml = [&](const std::string& password) {
    return authConfigYaml("localhost", env.squid->httpsPort(), env.ca.caCertPath(),
                          "      scheme: negotiate\n"
                          "      credentials: {username: bob, password: " +
                              password + "}\n");
  };
  CommandResult r = checkWith(env.work, yaml("Bob-pw-check"), url, no_cache);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(has(r.out, "configured: negotiate as 'bob'"));
  CHECK(has(r.out, "sending Negotiate ("));
  CHECK(has(r.out,
            " ms  Kerberos ticket for bob@H2GATE.TEST got with the configured "
            "password (no kinit; kept in memory), valid until "));
  CHECK(has(r.out, "Negotiate accepted (200"));
  CHECK(lastLine(r.out).rfind("OK: " + url, 0) == 0);
  checkNoSecretsPrinted(r, {"Bob-pw-check"});
  const auto lines = env.squid->waitForAccessLines(2, "CONNECT", milliseconds(5000));
  INFO(env.squid->accessLog());
  CHECK(std::count_if(lines.begin(), lines.end(),
                      [](const std::string& l) { return l.ends_with(" bob@H2GATE.TEST"); }) == 2);

  // A wrong password: said, with what to do.
  r = checkWith(env.work, yaml("Wrong-pw-check"), url, no_cache);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK(has(r.out, "cannot make negotiate credentials: Negotiate (Kerberos) to proxy "));
  CHECK(lastLine(r.out).rfind("FAIL (proxy-auth): no negotiate credentials: ", 0) == 0);
  CHECK(has(lastLine(r.out),
            "getting a ticket for bob@H2GATE.TEST with the configured password: "
            "the KDC rejected the password"));
  CHECK(has(lastLine(r.out),
            "— h2gate gets the ticket with the password of the cluster's "
            "credentials: check the user name (or principal) and the password"));
  checkNoSecretsPrinted(r, {"Bob-pw-check", "Wrong-pw-check"});
}

TEST_CASE("check: Negotiate's mutual authentication is verified, a forged answer fails",
          "[check][auth][kerberos]") {
  REQUIRE_AUTH_TOOLS();
  KerberosOriginEnv env("check-mutual");
  const KerberosRealm& realm = env.realm;
  const std::string mutual = GENERATE("ok", "forged");
  AuthProxy::Options o;
  // auto picks Negotiate among the three.
  o.schemes = "basic,ntlm,negotiate";
  o.mutual = mutual;
  o.ntlm_users = {"CORP:alice:ntlm-pw"};
  o.basic = "CORP\\alice:ntlm-pw";
  AuthProxy proxy(realm.negotiateProxyOptions(o));
  // As in a domain, one password serves every scheme: with credentials,
  // Negotiate's ticket is got with it.
  env.realm.kdc.changePassword("alice", "ntlm-pw");
  const std::string url = env.nginx.httpsUrl("/1k");
  CommandResult r =
      checkWith(env.work,
                authConfigYaml("localhost", proxy.port(), "",
                               "      scheme: auto\n"
                               "      credentials: {username: 'CORP\\alice', password: "
                               "ntlm-pw}\n"),
                url, realm.kdc.env(realm.alice));
  INFO(r.out << r.err << proxy.logText());
  // Offered in the proxy's order; auto takes the strongest.
  CHECK(has(r.out, ", the proxy offers "));
  CHECK(has(r.out, ": auto picks negotiate; one retry with it"));
  if (mutual == "ok") {
    CHECK(r.exit_code == 0);
    CHECK(has(r.out, "Negotiate accepted (200"));
    CHECK(has(r.out, "the proxy's mutual-authentication token verified"));
  } else {
    CHECK(r.exit_code == 1);
    CHECK(lastLine(r.out).rfind("FAIL (proxy-auth): the upstream proxy could not prove its "
                                "identity (Kerberos mutual authentication failed",
                                0) == 0);
    CHECK(!has(r.out, "ok    connect"));
  }
  checkNoSecretsPrinted(r, {"alice-pw", "ntlm-pw"});
}

TEST_CASE("check: NTLM's three messages on one connection; a wrong password",
          "[check][auth][ntlm]") {
  REQUIRE_AUTH_TOOLS();
  TempDir work("check-ntlm");
  TestCA ca{work.path().string()};
  Nginx::Options no;
  no.ca = &ca;
  Nginx nginx(no);
  AuthProxy::Options o;
  o.schemes = "ntlm";
  o.ntlm_users = {"CORP:alice:ntlm-pw"};
  AuthProxy proxy(o);
  const std::string url = nginx.httpsUrl("/1k");
  // The fixture: curl --proxy-ntlm gets through with the password, not without.
  auto curl = [&](const std::string& user) {
    return runCurl({"-sS", "-o", "/dev/null", "-w", "%{http_connect}", "--cacert", ca.caCertPath(),
                    "--proxy", proxy.url(), "--proxy-ntlm", "-U", user, url},
                   milliseconds(30000));
  };
  REQUIRE(curl("CORP\\alice:ntlm-pw").out == "200");
  REQUIRE(curl("CORP\\alice:wrong").out == "407");
  const size_t before = proxy.requests().size();

  const std::string password = GENERATE("ntlm-pw", "not-the-password");
  const std::string scheme = GENERATE("ntlm", "auto");
  INFO(scheme << " " << password);
  CommandResult r = checkWith(work,
                              authConfigYaml("127.0.0.1", proxy.port(), "",
                                             "      scheme: " + scheme +
                                                 "\n"
                                                 "      credentials: {username: 'CORP\\alice', "
                                                 "password: " +
                                                 password + "}\n"),
                              url, {});
  INFO(r.out << r.err << proxy.logText());
  if (scheme == "auto") CHECK(has(r.out, "the proxy offers NTLM: using ntlm on this connection"));
  CHECK(has(r.out, "NTLM negotiate message (type 1)"));
  CHECK(has(r.out, "with the NTLM challenge (type 2): sending NTLM ("));
  CHECK(has(r.out, "the authenticate message (type 3), on the same connection"));
  // The proxy saw the handshake on one connection.
  std::vector<std::map<std::string, std::string>> mine;
  const auto all = proxy.requests();
  mine.assign(all.begin() + static_cast<std::ptrdiff_t>(before), all.end());
  std::set<std::string> clients;
  for (const auto& e : mine) clients.insert(e.at("client"));
  CHECK(clients.size() == 1);
  if (password == "ntlm-pw") {
    CHECK(r.exit_code == 0);
    CHECK(has(r.out, "NTLM accepted (200"));
    CHECK(has(r.out, "the connection is authenticated"));
    CHECK(lastLine(r.out).rfind("OK: " + url, 0) == 0);
  } else {
    CHECK(r.exit_code == 1);
    CHECK(has(r.out, "FAIL  connect"));
    CHECK(lastLine(r.out) ==
          "FAIL (proxy-auth): the proxy rejected the NTLM credentials as 'CORP\\alice' — check "
          "user name and password (and DOMAIN\\user for NTLM)");
    // One handshake, rejected: no loop.
    size_t rejected = 0;
    for (const auto& e : mine) rejected += e.at("scheme") == "ntlm-rejected";
    CHECK(rejected == 1);
  }
  checkNoSecretsPrinted(r, {password});
}

TEST_CASE("check: a proxy that cannot be reached, then the next endpoint and the fallback route",
          "[check][fallback]") {
  H2Env env;
  const uint16_t dead = freePort();
  TempDir dir("check-fallback");
  const std::vector<std::string> fast{"connect_timeout: 2s"};

  // Two endpoints: the first down, the second nghttpx.
  std::string yaml =
      directModeYaml() +
      "        typed_config: {cluster: proxy}\n"
      "  clusters:\n" +
      clusterYaml("proxy", {dead, env.nghttpx.port()}, env.ca.caCertPath(), {}, fast);
  CommandResult r = runCommand({H2gate::binaryPath(H2GATE_BINARY), "check",
                                env.nginx.httpsUrl("/1k"), "-c", dir.write("eps.yaml", yaml)},
                               milliseconds(60000));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(has(r.out, "endpoint 1 of 2: 127.0.0.1:" + str(dead)));
  CHECK(has(r.out, "FAIL  tcp"));
  CHECK(has(r.out, "endpoint 2 of 2: 127.0.0.1:" + str(env.nghttpx.port())));
  CHECK(has(lastLine(r.out),
            "answered 200 through cluster 'proxy' (127.0.0.1:" + str(env.nghttpx.port()) +
                ", h2); after 1 that could not be "
                "reached: cluster 'proxy' endpoint 127.0.0.1:" +
                str(dead) + ": tcp: connecting to proxy failed"));

  // fallback_clusters: the primary cluster is down, the backup works.
  yaml = directModeYaml() +
         "        typed_config: {cluster: primary, fallback_clusters: [backup]}\n"
         "  clusters:\n" +
         clusterYaml("primary", {dead}, env.ca.caCertPath(), {}, fast) +
         clusterYaml("backup", {env.nghttpx.port()}, env.ca.caCertPath(), {}, fast);
  r = runCommand({H2gate::binaryPath(H2GATE_BINARY), "check", env.nginx.httpsUrl("/1k"), "-c",
                  dir.write("fb.yaml", yaml)},
                 milliseconds(60000));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(has(r.out, "goes to cluster 'primary' (then, if it cannot be reached: cluster 'backup')"));
  CHECK(has(r.out, "cluster 'primary' cannot be reached: on to cluster 'backup', as the daemon"));
  CHECK(has(lastLine(r.out), "through cluster 'backup' (127.0.0.1:" + str(env.nghttpx.port()) +
                                 ", h2); after 1 that could not be reached: cluster 'primary': "
                                 "tcp: connecting to proxy failed"));

  // Both down: the failure of the last, the others said before it.
  yaml = directModeYaml() +
         "        typed_config: {cluster: primary, fallback_clusters: [backup]}\n"
         "  clusters:\n" +
         clusterYaml("primary", {dead}, env.ca.caCertPath(), {}, fast) +
         clusterYaml("backup", {freePort()}, env.ca.caCertPath(), {}, fast);
  r = runCommand({H2gate::binaryPath(H2GATE_BINARY), "check", env.nginx.httpsUrl("/1k"), "-c",
                  dir.write("fb2.yaml", yaml)},
                 milliseconds(60000));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK(has(r.out, "(tried before: cluster 'primary': tcp: connecting to proxy failed"));
  CHECK(lastLine(r.out).rfind("FAIL (tcp): connecting to proxy failed", 0) == 0);
}

// --- Hostile servers: what they send is printed escaped, and their heads
// are bounded in size and in time.

namespace {

// Nothing a server sent reached the output raw: no control byte but the
// newline that ends each of check's own lines (no ESC sequence to set the
// title or clear the screen, no CR to overwrite a line, no C1 CSI), and no
// line that a server forged.
void checkPrintable(const std::string& out) {
  size_t controls = 0;
  for (const char ch : out) {
    const auto c = static_cast<unsigned char>(ch);
    controls += (c < 0x20 && c != '\n') || c == 0x7f;
  }
  CHECK(controls == 0);
  CHECK(!has(out, "\xc2\x9b"));  // U+009B, the C1 form of ESC [
  CHECK(!has(out, "\n  ok    forged"));
  CHECK(out.rfind("  ok    forged", 0) != 0);
}

// A reason phrase with a title-setting OSC, a clear-screen CSI, a C1 CSI,
// and a bare CR or LF meant to forge a line of check's output.
std::string hostileText(const std::string& variant) {
  std::string t =
      "Forbidden \x1b]0;pwned-title\x07\x1b[2J\xc2\x9b"
      "31mred";
  if (variant == "cr") t += "\rOK: forged";
  if (variant == "lf") t += "\n  ok    forged";
  return t;
}

}  // namespace

TEST_CASE("check: a hostile proxy's certificate subject and reason phrase are printed escaped",
          "[check][hostile]") {
  TempDir work("check-hostile");
  TestCA ca{work.path().string()};
  const std::string variant = GENERATE("esc", "cr", "lf");
  INFO("variant " << variant);
  // The subject's CN carries ESC sequences, CR and LF (a certificate can).
  const CertFiles cert = ca.issueServerWithName(
      "hostile-" + variant, "evil\x1b]0;pwned-cn\x07\x1b[2J\r\n  ok    forged line");
  HostileServer::Options o;
  o.mode = HostileServer::Mode::Status;
  o.status = 403;
  o.reason = hostileText(variant);
  o.tls_cert = cert.cert;
  o.tls_key = cert.key;
  HostileServer proxy(o);
  // The fixture, with curl: a TLS proxy with that certificate (verified
  // with the test CA), answering the CONNECT with 403 and that reason.
  CommandResult c =
      runCurl({"-v", "-sS", "-o", "/dev/null", "-w", "%{http_connect}", "--proxy-cacert",
               ca.caCertPath(), "-x", proxy.url(), "https://127.0.0.1:9/"},
              milliseconds(20000));
  INFO(c.err);
  REQUIRE(c.out == "403");
  REQUIRE(has(c.err, "\x1b]0;pwned-cn\x07"));  // curl -v prints the subject raw
  REQUIRE(has(c.err, "\x1b]0;pwned-title\x07"));

  CommandResult r = runCommand({H2gate::binaryPath(H2GATE_BINARY), "check", "https://127.0.0.1:9/",
                                "--upstream", proxy.url(), "--cacert", ca.caCertPath()},
                               milliseconds(30000));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  checkPrintable(r.out);
  checkPrintable(r.err);
  // The subject is shown, escaped, in the TLS step's chain.
  CHECK(has(r.out, "chain: CN=evil\\x1b]0;pwned-cn\\x07\\x1b[2J\\r\\n  ok    forged line (issuer"));
  // The reason phrase, escaped, where the parser takes it as one (the
  // daemon's parser, llhttp, ends a status line at a bare CR or LF: then
  // the answer is not HTTP h2gate accepts, said without the server's bytes).
  if (variant == "esc") {
    CHECK(has(lastLine(r.out),
              "FAIL (connect): CONNECT 127.0.0.1:9 refused: 403 Forbidden "
              "\\x1b]0;pwned-title\\x07\\x1b[2J\\u009b31mred — "));
  } else {
    CHECK(lastLine(r.out).rfind("FAIL (connect): ", 0) == 0);
  }
}

TEST_CASE("check: a hostile destination's status line and certificate are printed escaped",
          "[check][hostile]") {
  TempDir work("check-hostile-origin");
  TestCA ca{work.path().string()};
  const bool tls = GENERATE(false, true);
  const std::string variant = GENERATE("esc", "cr", "lf");
  INFO((tls ? "https " : "http ") << variant);
  const CertFiles cert = ca.issueServerWithName("origin-" + variant, "origin\x1b]0;pwned-cn\x07");
  HostileServer::Options o;
  o.mode = HostileServer::Mode::Status;
  o.status = 200;
  o.reason = hostileText(variant);
  if (tls) {
    o.tls_cert = cert.cert;
    o.tls_key = cert.key;
  }
  HostileServer origin(o);
  // The fixture, with curl: the status line comes back with its bytes.
  CommandResult c =
      runCurl({"-sS", "-I", "--cacert", ca.caCertPath(), origin.url("/")}, milliseconds(20000));
  INFO(c.err);
  REQUIRE(has(c.out, "HTTP/1.1 200 Forbidden \x1b]0;pwned-title\x07"));

  // Direct mode: check connects to the destination itself.
  CommandResult r = runCommand({H2gate::binaryPath(H2GATE_BINARY), "check", origin.url("/")},
                               milliseconds(30000));
  INFO(r.out << r.err);
  checkPrintable(r.out);
  checkPrintable(r.err);
  CHECK(r.exit_code == 0);
  CHECK(
      has(r.out, "HEAD / -> HTTP/1.1 200 Forbidden \\x1b]0;pwned-title\\x07\\x1b[2J\\u009b31mred" +
                     std::string(variant == "cr"   ? "\\rOK: forged"
                                 : variant == "lf" ? "\\n  ok    forged"
                                                   : "")));
  if (tls) CHECK(has(r.out, "chain: CN=origin\\x1b]0;pwned-cn\\x07 (issuer"));
}

TEST_CASE("check: a response head without end stops at 64 KiB", "[check][hostile]") {
  HostileServer::Options o;
  o.mode = HostileServer::Mode::Endless;
  HostileServer server(o);
  // The fixture, with curl: a head that never ends (curl gives up at its
  // own limit of 100 KiB).
  CommandResult c =
      runCurl({"-sS", "-o", "/dev/null", "--max-time", "20", server.url("/")}, milliseconds(30000));
  INFO(c.err);
  REQUIRE(c.exit_code != 0);
  REQUIRE(!c.timed_out);
  REQUIRE(has(c.err, "header"));

  // The destination, in direct mode (check reads this head itself).
  const auto start = std::chrono::steady_clock::now();
  CommandResult r = runCommand({H2gate::binaryPath(H2GATE_BINARY), "check", server.url("/")},
                               milliseconds(30000));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.out << r.err << "took " << seconds << " s");
  CHECK(!r.timed_out);
  CHECK(r.exit_code == 1);
  CHECK(seconds < 10);
  CHECK(lastLine(r.out) ==
        "FAIL (request): the response head from 127.0.0.1:" + str(server.port()) +
            " has no end within its first 64 KiB (h2gate's limit for a response head, the "
            "daemon's too) — the destination does not speak HTTP on this port, or its answer is "
            "broken: check the URL's port, or ask the server's administrator");

  // The same server as a proxy: its answer to the CONNECT.
  r = runCommand({H2gate::binaryPath(H2GATE_BINARY), "check", "https://127.0.0.1:9/", "--upstream",
                  server.url()},
                 milliseconds(30000));
  INFO(r.out << r.err);
  CHECK(!r.timed_out);
  CHECK(r.exit_code == 1);
  CHECK(lastLine(r.out).rfind("FAIL (connect): no answer: ", 0) == 0);
  CHECK(has(lastLine(r.out), "64 KiB"));
}

TEST_CASE("check: a head sent a byte at a time ends at the step's deadline", "[check][hostile]") {
  HostileServer::Options o;
  o.mode = HostileServer::Mode::Slow;
  o.interval_seconds = 0.5;
  HostileServer server(o);
  // The fixture, with curl: bytes keep coming, the head never ends in time.
  CommandResult c =
      runCurl({"-sS", "-o", "/dev/null", "--max-time", "3", server.url("/")}, milliseconds(20000));
  INFO(c.err);
  REQUIRE(c.exit_code == 28);  // CURLE_OPERATION_TIMEDOUT
  REQUIRE(has(c.err, "bytes received"));

  // Each wait is short (a byte every 0.5 s), the step is not: it ends at
  // --step-timeout, counted from its start.
  auto timed = [&](const std::vector<std::string>& args, double* seconds) {
    std::vector<std::string> argv{H2gate::binaryPath(H2GATE_BINARY), "check"};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto start = std::chrono::steady_clock::now();
    CommandResult r = runCommand(argv, milliseconds(30000));
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  };
  double seconds = 0;
  CommandResult r = timed({server.url("/"), "--step-timeout", "2s"}, &seconds);
  INFO(r.out << r.err << "took " << seconds << " s");
  CHECK(!r.timed_out);
  CHECK(r.exit_code == 1);
  CHECK(seconds < 8);
  CHECK(lastLine(r.out).rfind("FAIL (request): no complete response head (", 0) == 0);
  CHECK(has(lastLine(r.out), " bytes came) from 127.0.0.1:" + str(server.port()) +
                                 " within 2 s (--step-timeout) — the destination (or the path "
                                 "to it) answers too slowly or not at all: check the URL's host "
                                 "and port; --step-timeout DURATION waits longer"));

  // As a proxy: its answer to the CONNECT has the same deadline.
  r = timed({"https://127.0.0.1:9/", "--upstream", server.url(), "--step-timeout", "2s"}, &seconds);
  INFO(r.out << r.err << "took " << seconds << " s");
  CHECK(!r.timed_out);
  CHECK(r.exit_code == 1);
  CHECK(seconds < 8);
  CHECK(lastLine(r.out) ==
        "FAIL (connect): no complete answer within 2 s (--step-timeout) — the proxy (or what is "
        "behind it) does not answer in time; --step-timeout DURATION waits longer");

  // A bad value is a usage error; the option is check's alone.
  r = timed({server.url("/"), "--step-timeout", "1h"}, &seconds);
  CHECK(r.exit_code == 2);
  CHECK(has(r.err, "--step-timeout: expected a duration from 100ms to 10m"));
  r = runCommand({H2gate::binaryPath(H2GATE_BINARY), "--step-timeout", "5s"}, milliseconds(10000));
  CHECK(r.exit_code == 2);
  CHECK(has(r.err, "--step-timeout is an option of h2gate check"));
}
