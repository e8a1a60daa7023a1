// Routing by a PAC file through real proxies: nginx serves the PAC file
// (proven with curl first), which sends *.internal.test DIRECT, *.a.test to
// nghttpx (an HTTPS h2 proxy) and the rest to squid (a plain PROXY) failing
// over to a second squid. Every transfer is compared byte for byte and
// looked up in the access log of the proxy that must have carried it.
// Then hostile PAC files (an endless loop, a throw, a garbage answer, a
// 10 MB file, a server that never answers): traffic keeps flowing by the
// fallback, RSS stays bounded, the log says it once. [pac_routing]
//
// The fixture (nginx, the names each side resolves) is
// tests/support/pac_env.h.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <netinet/in.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/pac_env.h"
#include "tests/support/scrape.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

// A TCP listener that accepts (the kernel does) and never answers: a PAC
// server that hangs.
class SilentServer {
 public:
  SilentServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd_, 64) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~SilentServer() { ::close(fd_); }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

int countMatches(const std::string& text, const std::string& needle) {
  return countOccurrences(text, needle);
}

}  // namespace

TEST_CASE("pac routing: DIRECT, HTTPS h2 proxy and PROXY with failover, as the PAC file says",
          "[pac_routing]") {
  if (!haveMountNamespaces()) FAIL("needs root for a private /etc/hosts (unshare -m)");
  PacEnv env;
  // squid2 behind nghttpx too (the HTTPS proxy); squid1 is the PROXY one.
  auto squid1 = std::make_unique<Squid>(PacEnv::squidOptions());
  const uint16_t squid1_port = squid1->httpPort();
  Squid squid2(PacEnv::squidOptions());
  Nghttpx nghttpx(H2Env::nghttpxOptions(H2Env::Options{}, env.ca, squid2.httpPort()));
  const std::string pac =
      "function FindProxyForURL(url, host) {\n"
      "  if (dnsDomainIs(host, \".internal.test\")) return \"DIRECT\";\n"
      "  if (shExpMatch(host, \"*.a.test\")) return \"HTTPS 127.0.0.1:" +
      str(nghttpx.port()) +
      "\";\n"
      "  return \"PROXY 127.0.0.1:" +
      str(squid1->httpPort()) + "; PROXY 127.0.0.1:" + str(squid2.httpPort()) +
      "\";\n"
      "}\n";
  env.writePac("proxy.pac", pac);

  // The fixture first: nginx serves the PAC file as written.
  const std::string fetched = env.out.file("fixture.pac");
  const CommandResult proof = runCurl(
      {"-sS", "-o", fetched, "-w", "%{http_code} %{content_type}", env.pacUrl("proxy.pac")});
  REQUIRE(proof.out == "200 application/x-ns-proxy-autoconfig");
  REQUIRE(readFile(fetched) == pac);

  env.start(PacEnv::listener("local_proxy", "              url: " + env.pacUrl("proxy.pac") +
                                                "\n"
                                                "              refresh_interval: 1s\n"
                                                "              retry_interval: 1s\n"
                                                "              fallback: {reject: 503}\n"
                                                "              proxies: {trusted_ca: " +
                                                env.ca.caCertPath() + "}\n"),
            {"local_proxy"});
  INFO(env.gate->process().logTail(60));
  REQUIRE(env.gate->process().waitForLog("using the PAC file from", kPacLoadTimeout));

  // DIRECT: h2gate resolves web.internal.test itself.
  CHECK(env.fetch("", env.url("web.internal.test", true, "/1m?d1"), "d1"));
  CHECK(env.fetch("", env.url("web.internal.test", false, "/1m?d2"), "d2"));
  // *.a.test: through nghttpx (TLS, h2), which hands it to squid2.
  CHECK(env.fetch("", env.url("files.a.test", true, "/1m?h1"), "h1"));
  CHECK(env.fetch("", env.url("files.a.test", false, "/1m?h2"), "h2"));
  // The rest: squid1, a plain HTTP proxy.
  CHECK(env.fetch("", env.url("origin.test", true, "/1m?p1"), "p1"));
  CHECK(env.fetch("", env.url("origin.test", false, "/1m?p2"), "p2"));

  const auto h2lines = nghttpx.waitForAccessLines(2, "", milliseconds(5000));
  INFO("nghttpx: " << nghttpx.accessLog());
  CHECK(h2lines.size() == 2);
  CHECK(countMatches(nghttpx.accessLog(), "files.a.test") == 2);
  CHECK(countMatches(nghttpx.accessLog(), " h2 ") == 2);
  CHECK(nghttpx.accessLog().find("origin.test") == std::string::npos);
  CHECK(nghttpx.accessLog().find("internal.test") == std::string::npos);
  squid1->waitForAccessLines(2, "", milliseconds(5000));
  INFO("squid1: " << squid1->accessLog());
  CHECK(countMatches(squid1->accessLog(), "origin.test") == 2);
  CHECK(squid1->accessLog().find("a.test") == std::string::npos);
  CHECK(squid1->accessLog().find("internal.test") == std::string::npos);
  CHECK(squid2.accessLog().find("origin.test") == std::string::npos);
  CHECK(env.nginx.waitForAccessCount("/1m?d", 2) == 2);

  // squid1 goes away: the PAC's second PROXY carries the rest.
  squid1.reset();
  CHECK(env.fetch("", env.url("origin.test", true, "/1m?f1"), "f1"));
  CHECK(env.fetch("", env.url("origin.test", false, "/1m?f2"), "f2"));
  squid2.waitForAccessLines(4, "", milliseconds(5000));
  INFO("squid2: " << squid2.accessLog());
  CHECK(countMatches(squid2.accessLog(), "origin.test") == 2);

  const auto log = env.gate->waitForAccessLog(8, milliseconds(5000));
  REQUIRE(log.size() == 8);
  for (size_t i = 0; i < log.size(); ++i) {
    const auto& e = log[i];
    INFO(e.line);
    const std::string target = e.get("target");
    CHECK(e.num("status") == 200);
    if (target.find("internal.test") != std::string::npos) {
      CHECK(e.get("protocol") == "direct");
    } else if (target.find("a.test") != std::string::npos) {
      CHECK(e.get("cluster") == "HTTPS 127.0.0.1:" + str(nghttpx.port()));
      CHECK(e.get("protocol") == "h2");
    } else if (i >= 6) {  // after squid1 stopped
      CHECK(e.get("cluster") == "PROXY 127.0.0.1:" + str(squid2.httpPort()));
    } else {
      CHECK(e.get("cluster") == "PROXY 127.0.0.1:" + str(squid1_port));
    }
  }
  // The failover is in the log and the metrics.
  CHECK(env.gate->stderrText().find("falling back to PROXY 127.0.0.1:" + str(squid2.httpPort())) !=
        std::string::npos);

  // Admin: /pac and /pac/eval.
  const AdminReply status = adminGet(env.gate->adminPort(), "/pac");
  INFO(status.body);
  CHECK(status.status == 200);
  CHECK(status.body.find("in use: " + env.pacUrl("proxy.pac")) != std::string::npos);
  CHECK(status.body.find("sha256: " + sha256Hex(pac)) != std::string::npos);
  const AdminReply eval =
      adminGet(env.gate->adminPort(), "/pac/eval?url=https%3A%2F%2Fx.a.test%2Fsecret%3Fq");
  INFO(eval.body);
  CHECK(eval.status == 200);
  CHECK(eval.body.find("FindProxyForURL(\"https://x.a.test/\", \"x.a.test\")") !=
        std::string::npos);
  CHECK(eval.body.find("answer: HTTPS 127.0.0.1:" + str(nghttpx.port())) != std::string::npos);

  // The PAC server loses the file: the last good one stays in use, /ready
  // says so, and traffic still follows it.
  std::filesystem::remove(env.work.path() / "pac" / "proxy.pac");
  REQUIRE(env.gate->process().waitForLog("pac local_proxy/routes\\[0\\] \\(url\\): .*404",
                                         milliseconds(10000)));
  const AdminReply ready = adminGet(env.gate->adminPort(), "/ready");
  INFO(ready.body);
  CHECK(ready.status == 200);
  CHECK(ready.body.find("pac local_proxy/routes[0]: the last fetch failed") != std::string::npos);
  CHECK(ready.body.find("keeping the PAC file fetched at") != std::string::npos);
  CHECK(env.fetch("", env.url("files.a.test", true, "/1m?k1"), "k1"));
  nghttpx.waitForAccessLines(3, "", milliseconds(5000));  // a tunnel is logged when it ends
  CHECK(countMatches(nghttpx.accessLog(), "files.a.test") == 3);

  const Scrape m = scrapeMetrics(env.gate->adminPort());
  CHECK(m.sum("h2gate_pac_download_failures_total", {}) >= 1);
  CHECK(m.sum("h2gate_pac_evaluations_total", {}) >= 3);
  CHECK(m.sum("h2gate_pac_cache_hits_total", {}) >= 1);
  CHECK(m.sum("h2gate_pac_loaded", {}) == 1);
  CHECK(m.sum("h2gate_route_fallbacks_total", {}) >= 1);
}

TEST_CASE("pac routing: hostile PAC files and servers; traffic flows by the fallback",
          "[pac_routing]") {
  if (!haveMountNamespaces()) FAIL("needs root for a private /etc/hosts (unshare -m)");
  PacEnv env;
  env.writePac("loop.pac", "function FindProxyForURL(url, host) { while (true) {} }\n");
  env.writePac("throw.pac",
               "function FindProxyForURL(url, host) { throw new Error('no answer today'); }\n");
  env.writePac("garbage.pac",
               "function FindProxyForURL(url, host) { return 'PROXYY nonsense;;; SOCKS5 x:1'; }\n");
  // 10 MB: a comment and a valid function (past the 8 MiB default max_size).
  std::string big = "function FindProxyForURL(url, host) { return 'PROXY 127.0.0.1:9'; }\n//";
  big.append(10u << 20, 'x');
  env.writePac("big.pac", big + "\n");
  SilentServer silent;

  std::string listeners;
  const std::vector<std::pair<std::string, std::string>> cases{
      {"loop", "              url: " + env.pacUrl("loop.pac") + "\n"},
      {"throws", "              url: " + env.pacUrl("throw.pac") + "\n"},
      {"garbage", "              url: " + env.pacUrl("garbage.pac") + "\n"},
      {"big", "              url: " + env.pacUrl("big.pac") + "\n"},
      {"hangs", "              url: http://127.0.0.1:" + str(silent.port()) +
                    "/proxy.pac\n              fetch_timeout: 1s\n"},
  };
  std::vector<std::string> names;
  for (const auto& [name, source] : cases) {
    listeners += PacEnv::listener(name, source +
                                            "              evaluation: {timeout: 200ms}\n"
                                            "              fallback: {direct: true}\n");
    names.push_back(name);
  }
  env.start(listeners, names);
  INFO(env.gate->process().logTail(80));
  // The big file is refused at the download; the silent server times out.
  if (!env.gate->process().waitForLog("pac hangs/routes\\[0\\] \\(url\\): .*no complete answer",
                                      milliseconds(10000)))
    FAIL(env.gate->stderrText());

  // h2gate and its PAC worker processes, where the heaps are.
  auto rss = [&] {
    const pid_t pid = env.gate->process().pid();
    long sum = procStatusKiB(pid, "VmRSS");
    for (pid_t p : descendants(pid)) sum += std::max(0L, procStatusKiB(p, "VmRSS"));
    return sum;
  };
  const long rss_before = rss();
  for (int round = 0; round < 5; ++round) {
    for (const std::string& name : names) {
      INFO(name << " round " << round);
      CHECK(env.fetch(name, env.url("web.internal.test", round % 2 == 0, "/1m?" + name),
                      name + str(round)));
    }
  }
  const long rss_after = rss();
  INFO("RSS " << rss_before << " KiB -> " << rss_after << " KiB");
  CHECK(rss_after > 0);
  // Each endless loop rebuilds a heap; none may accumulate.
  CHECK(rss_after - rss_before < 64 * 1024);

  // Each trouble logged once (not per request), with its kind.
  const std::string err = env.gate->stderrText();
  CHECK(countMatches(err, "pac loop/routes[0]: no usable answer (timeout") == 1);
  CHECK(countMatches(err, "pac throws/routes[0]: no usable answer (exception") == 1);
  CHECK(countMatches(err, "pac garbage/routes[0]: no usable answer (") == 1);
  CHECK(countMatches(err, "pac big/routes[0]: no usable answer (no_script") == 1);
  CHECK(countMatches(err, "pac hangs/routes[0]: no usable answer (no_script") == 1);
  // /ready says which routes run without a PAC.
  const AdminReply ready = adminGet(env.gate->adminPort(), "/ready");
  INFO(ready.body);
  CHECK(ready.status == 200);
  CHECK(ready.body.find("pac big/routes[0]: no PAC file loaded") != std::string::npos);
  CHECK(ready.body.find("pac hangs/routes[0]: no PAC file loaded") != std::string::npos);
  const Scrape m = scrapeMetrics(env.gate->adminPort());
  CHECK(m.sum("h2gate_pac_timeouts_total", {{"route", "loop/routes[0]"}}) >= 1);
  CHECK(m.sum("h2gate_pac_errors_total", {{"route", "throws/routes[0]"}}) >= 1);
  CHECK(m.sum("h2gate_pac_download_failures_total", {{"route", "hangs/routes[0]"}}) >= 1);
  CHECK(m.sum("h2gate_pac_fallbacks_total", {}) >= 25);
}

TEST_CASE("pac routing: an HTTPS proxy without h2 (squid https_port) is spoken HTTP/1.1",
          "[pac_routing][pac_h1]") {
  if (!haveMountNamespaces()) FAIL("needs root for a private /etc/hosts (unshare -m)");
  PacEnv env;
  Squid::Options so = PacEnv::squidOptions();
  so.https = true;
  so.ca = &env.ca;
  Squid squid(so);
  // The fixture first: curl through squid's TLS port (no h2 there).
  const CommandResult proof =
      runCurl({"-sS", "-o", "/dev/null", "-w", "%{http_code}", "--proxy-cacert",
               env.ca.caCertPath(), "--cacert", env.ca.caCertPath(), "-x",
               "https://127.0.0.1:" + str(squid.httpsPort()), env.url("origin.test", true, "/1k")});
  INFO(proof.err);
  REQUIRE(proof.out == "200");

  env.writePac("tls.pac", "function FindProxyForURL(url, host) { return \"HTTPS 127.0.0.1:" +
                              str(squid.httpsPort()) + "\"; }\n");
  H2gate& gate = env.start(
      PacEnv::listener("local_proxy",
                       "              file: " + (env.work.path() / "pac" / "tls.pac").string() +
                           "\n"
                           "              fallback: {reject: 503}\n"
                           "              proxies: {trusted_ca: " +
                           env.ca.caCertPath() + "}\n"),
      {"local_proxy"});
  INFO(gate.process().logTail(40));
  REQUIRE(gate.process().waitForLog("using the PAC file from", kPacLoadTimeout));

  CHECK(env.fetch("", env.url("origin.test", true, "/1m?t1"), "t1"));
  CHECK(env.fetch("", env.url("origin.test", false, "/1m?t2"), "t2"));
  CHECK(env.fetch("", env.url("origin.test", true, "/1m?t3"), "t3"));
  CHECK(gate.process().waitForLog("proxy 127\\.0\\.0\\.1:" + str(squid.httpsPort()) +
                                      " negotiated (no ALPN \\(HTTP/1\\.1\\)|http/1\\.1)",
                                  milliseconds(1000)));
  squid.waitForAccessLines(4, "", milliseconds(5000));
  INFO("squid: " << squid.accessLog());
  CHECK(countOccurrences(squid.accessLog(), "CONNECT origin.test") == 3);  // curl's and 2
  CHECK(countOccurrences(squid.accessLog(), "GET http://origin.test") == 1);
  const auto log = gate.waitForAccessLog(3, milliseconds(5000));
  REQUIRE(log.size() == 3);
  for (const auto& e : log) {
    INFO(e.line);
    CHECK(e.num("status") == 200);
    CHECK(e.get("cluster") == "HTTPS 127.0.0.1:" + str(squid.httpsPort()));
    CHECK(e.get("protocol") == "http1");
  }
}
