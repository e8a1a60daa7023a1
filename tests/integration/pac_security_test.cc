// What a PAC file can make h2gate do, when whoever serves it (an http://
// WPAD URL) is not the operator: the proxies it names get none of the
// listener's upstream_headers (credentials, identity tokens), which the
// configured cluster still gets; and an answer naming h2gate itself in any
// spelling is a loop, refused at once. The answer cache's size is in the
// metrics. [pac_security]
//
// The fixture (nginx serving the PAC file, squid behind the proxies) is
// tests/support/pac_env.h; the proxies are nghttpx logging the headers they
// get, proven with curl first.
#include <catch2/catch.hpp>

#include <openssl/evp.h>

#include <chrono>
#include <string>

#include "tests/support/net.h"
#include "tests/support/pac_env.h"
#include "tests/support/scrape.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

const std::string kToken = "tok-LISTENER-7b1f";
const std::string kUser = "app1";
const std::string kPassword = "pw-LISTENER-93ac";

// A Basic Proxy-Authorization value, as curl and h2gate write it.
std::string basic(const std::string& user, const std::string& password) {
  const std::string plain = user + ":" + password;
  std::string out(4 * ((plain.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(plain.data()),
                                static_cast<int>(plain.size()));
  out.resize(static_cast<std::size_t>(n));
  return "Basic " + out;
}

Nghttpx::Options loggingProxy(PacEnv& env, uint16_t backend) {
  Nghttpx::Options n = H2Env::nghttpxOptions(H2Env::Options{}, env.ca, backend);
  n.log_headers = {"x-identity-token", "proxy-authorization"};
  return n;
}

}  // namespace

TEST_CASE("pac security: a proxy the PAC file names gets none of the listener's upstream_headers",
          "[pac_routing][pac_security]") {
  if (!haveMountNamespaces()) FAIL("needs root for a private /etc/hosts (unshare -m)");
  PacEnv env;
  Squid squid(PacEnv::squidOptions());
  Nghttpx named(loggingProxy(env, squid.httpPort()));  // the PAC file's choice
  Nghttpx corp(loggingProxy(env, squid.httpPort()));   // the operator's cluster

  // The fixture first: nghttpx logs the headers a client gives it.
  const CommandResult proof =
      runCurl({"-sS", "-o", "/dev/null", "-w", "%{http_code}", "--proxy", named.url(),
               "--proxy-cacert", env.ca.caCertPath(), "--cacert", env.ca.caCertPath(),
               "--proxy-header", "X-Identity-Token: probe-token", "--proxy-user", "probe:probe-pw",
               env.url("origin.test", true, "/1m?probe")},
              milliseconds(30000));
  INFO("curl: " << proof.err);
  REQUIRE(proof.out == "200");
  REQUIRE(named.waitForAccessLines(1, "CONNECT", milliseconds(5000)).size() == 1);
  REQUIRE_THAT(named.accessLog(), Catch::Contains("x-identity-token=probe-token"));
  REQUIRE_THAT(named.accessLog(),
               Catch::Contains("proxy-authorization=" + basic("probe", "probe-pw")));

  env.writePac("proxy.pac", "function FindProxyForURL(url, host) {\n  return \"HTTPS 127.0.0.1:" +
                                str(named.port()) + "\";\n}\n");
  const std::string listener = listenerYaml("local_proxy",
                                            "      - name: h2gate.filters.upstream_headers\n"
                                            "        typed_config:\n"
                                            "          request_headers_to_add:\n"
                                            "          - header: {key: X-Identity-Token, value: " +
                                                kToken +
                                                "}\n"
                                                "          proxy_credentials: {username: " +
                                                kUser + ", password: " + kPassword +
                                                "}\n"
                                                "      - name: h2gate.filters.forward_proxy\n"
                                                "        typed_config:\n"
                                                "          routes:\n"
                                                "          - match: {hosts: [files.a.test]}\n"
                                                "            cluster: corp\n"
                                                "          - match: {}\n"
                                                "            pac:\n"
                                                "              url: " +
                                                env.pacUrl("proxy.pac") +
                                                "\n"
                                                "              fallback: {reject: 503}\n"
                                                "              proxies: {trusted_ca: " +
                                                env.ca.caCertPath() + "}\n");
  env.start(listener, {"local_proxy"}, [&](H2gate::Options& o) {
    o.yaml += "  clusters:\n" + clusterYaml("corp", {corp.port()}, env.ca.caCertPath());
  });
  INFO(env.gate->process().logTail(60));
  REQUIRE(env.gate->process().waitForLog("using the PAC file from", kPacLoadTimeout));

  // Through the PAC file's proxy: a tunnel and an absolute-form request.
  CHECK(env.fetch("local_proxy", env.url("origin.test", true, "/1m?t1"), "t1"));
  CHECK(env.fetch("local_proxy", env.url("origin.test", false, "/1m?g1"), "g1"));
  // Through the configured cluster.
  CHECK(env.fetch("local_proxy", env.url("files.a.test", true, "/1m?t2"), "t2"));
  CHECK(env.fetch("local_proxy", env.url("files.a.test", false, "/1m?g2"), "g2"));

  const std::string credentials = basic(kUser, kPassword);
  const auto to_named = named.waitForAccessLines(3, "", milliseconds(5000));  // probe + 2
  INFO("named proxy: " << named.accessLog());
  REQUIRE(to_named.size() == 3);
  for (std::size_t i = 1; i < to_named.size(); ++i) {
    CHECK_THAT(to_named[i], Catch::Contains("origin.test"));
    CHECK_THAT(to_named[i], Catch::EndsWith("x-identity-token=- proxy-authorization=-"));
  }
  CHECK(named.accessLog().find(kToken) == std::string::npos);
  CHECK(named.accessLog().find(credentials) == std::string::npos);

  const auto to_corp = corp.waitForAccessLines(2, "", milliseconds(5000));
  INFO("configured cluster: " << corp.accessLog());
  REQUIRE(to_corp.size() == 2);
  for (const std::string& line : to_corp) {
    CHECK_THAT(line, Catch::Contains("files.a.test"));
    CHECK_THAT(line, Catch::EndsWith("x-identity-token=" + kToken +
                                     " proxy-authorization=" + credentials));
  }

  // The answer cache is in the metrics: one https answer (host and port)
  // and one for the http URL.
  const Scrape m = scrapeMetrics(env.gate->adminPort());
  const std::map<std::string, std::string> route{{"route", "local_proxy/routes[1]"}};
  CHECK(m.sum("h2gate_pac_cache_entries", route) == 2);
  CHECK(m.sum("h2gate_pac_cache_bytes", route) > 200);
  CHECK(m.sum("h2gate_pac_cache_bytes", route) < 16 * 1024);
}

TEST_CASE("pac security: a PAC file naming h2gate as 127.1:PORT is a loop, refused at once",
          "[pac_routing][pac_security][pac_loop]") {
  if (!haveMountNamespaces()) FAIL("needs root for a private /etc/hosts (unshare -m)");
  PacEnv env;
  const uint16_t port = freePort();
  // By an IPv4 shorthand, and (for URLs with "byname") by a name that h2gate's
  // /etc/hosts maps to 127.0.0.1.
  env.writePac("self.pac",
               "function FindProxyForURL(url, host) {\n"
               "  if (url.indexOf('byname') >= 0) return \"PROXY gate.internal.test:" +
                   str(port) + "\";\n  return \"PROXY 127.1:" + str(port) + "\";\n}\n");
  std::string listener =
      PacEnv::listener("local_proxy", "              url: " + env.pacUrl("self.pac") +
                                          "\n"
                                          "              on_loop: reject\n");
  const std::string any_port = "port_value: 0}";
  REQUIRE(listener.find(any_port) != std::string::npos);
  listener.replace(listener.find(any_port), any_port.size(), "port_value: " + str(port) + "}");
  env.start(listener, {"local_proxy"}, {},
            "127.0.0.1 web.internal.test\n127.0.0.1 gate.internal.test\n");
  INFO(env.gate->process().logTail(60));
  REQUIRE(env.gate->port("local_proxy") == port);
  REQUIRE(env.gate->process().waitForLog("using the PAC file from", kPacLoadTimeout));

  for (const bool tls : {false, true}) {
    const auto start = std::chrono::steady_clock::now();
    const CommandResult r =
        env.curl("local_proxy", {"-w", tls ? "%{http_connect}" : "%{http_code}", "-o",
                                 env.out.file("loop"), env.url("origin.test", tls, "/1m?loop")});
    const auto took = std::chrono::steady_clock::now() - start;
    INFO((tls ? "CONNECT" : "GET") << ": " << r.out << " " << r.err);
    CHECK(r.out == "503");
    CHECK(took < milliseconds(3000));
    if (!tls)
      CHECK_THAT(readFile(env.out.file("loop")), Catch::Contains("names h2gate itself (PROXY "
                                                                 "127.1:" +
                                                                 str(port) + ")"));
  }
  CHECK(env.gate->process().waitForLog(
      "names h2gate's own listener \\(PROXY 127\\.1:" + str(port) + "\\)", milliseconds(2000)));

  // A name: resolved before the decision, then the same refusal.
  const auto start = std::chrono::steady_clock::now();
  const CommandResult r =
      env.curl("local_proxy", {"-w", "%{http_code}", "-o", env.out.file("byname"),
                               env.url("origin.test", false, "/1m?byname")});
  CHECK(r.out == "503");
  CHECK(std::chrono::steady_clock::now() - start < milliseconds(3000));
  CHECK_THAT(readFile(env.out.file("byname")),
             Catch::Contains("names h2gate itself (PROXY gate.internal.test:" + str(port) + ")"));

  // Nothing looped: h2gate saw exactly the three requests curl made.
  const auto log = env.gate->waitForAccessLog(3, milliseconds(5000));
  CHECK(log.size() == 3);
}
