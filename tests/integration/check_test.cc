// `h2gate check URL` against real proxies (nghttpx speaking h2, squid's
// HTTPS port speaking HTTP/1.1 only, squid with Basic authentication or a
// CONNECT-denying ACL) and nginx: every failure the testbed can produce
// gives the right first failure, its advice and exit 1; a working path
// gives exit 0. No h2gate daemon runs in these tests.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tests/support/upstream_env.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

CommandResult check(const std::vector<std::string>& args) {
  testFile("1k");  // nginx serves /1k
  std::vector<std::string> argv{H2GATE_BINARY, "check"};
  argv.insert(argv.end(), args.begin(), args.end());
  return runCommand(argv, milliseconds(60000));
}

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
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
  const std::string url = env.nghttpx.url();
  env.nghttpx.stop();
  CommandResult r =
      check({env.nginx.httpsUrl("/1k"), "--upstream", url, "--cacert", env.ca.caCertPath()});
  INFO(r.out);
  CHECK(r.exit_code == 1);
  CHECK(has(r.out, "FAIL  tcp"));
  CHECK(has(lastLine(r.out), "FAIL (tcp): connecting to proxy failed: 127.0.0.1:" +
                                 str(env.nghttpx.port()) + ": Connection refused"));
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
  CHECK(has(r.out, "basic up front as 'alice'"));
  CHECK(has(lastLine(r.out), "the proxy rejected the credentials"));
  CHECK(!has(r.out, "wrong"));  // the password is never printed

  r = check({env.nginx.httpsUrl("/1k"), "--upstream", "https://alice:s3cret@127.0.0.1:" + port,
             "--cacert", env.ca.caCertPath()});
  INFO(r.out);
  CHECK(r.exit_code == 0);
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
