// Route fallback (forward_proxy's fallback_clusters / direct_fallback) with
// real peers: a primary cluster whose proxy cannot be reached, a backup
// cluster (nghttpx -> squid -> nginx), and DIRECT last when the config allows.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "tests/support/h2_env.h"
#include "tests/support/net.h"
#include "tests/support/scrape.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

struct FallbackEnv {
  explicit FallbackEnv(bool squid_auth = false)
      : nginx(H2Env::nginxOptions(ca)),
        squid(squidOptions(squid_auth)),
        backup(H2Env::nghttpxOptions(H2Env::Options{}, ca, squid.httpPort())) {
    testFile("1m");  // made on first use: the origin serves it
  }

  static Squid::Options squidOptions(bool auth) {
    Squid::Options s;
    s.auth = auth;
    return s;
  }

  // forward_proxy typed_config `route`; clusters "primary" (a port nothing
  // listens on), "dead2" (another such port) and "backup" (nghttpx).
  H2gate& start(const std::string& route, bool wait_backup = true) {
    const std::vector<std::string> fast{"connect_timeout: 2s"};
    H2gate::Options o;
    o.binary = H2GATE_BINARY;
    o.yaml = directModeYaml() + "        typed_config: " + route +
             "\n"
             "  clusters:\n" +
             clusterYaml("primary", {dead_port}, ca.caCertPath(), {}, fast) +
             clusterYaml("dead2", {dead_port2}, ca.caCertPath(), {}, fast) +
             clusterYaml("backup", {backup.port()}, ca.caCertPath(), {}, fast);
    o.args = {"--log-level", "debug"};
    gate = std::make_unique<H2gate>(std::move(o));
    if (wait_backup) {
      INFO(gate->process().logTail());
      REQUIRE(gate->process().waitForLog(
          "proxy 127\\.0\\.0\\.1:" + str(backup.port()) + " negotiated h2", milliseconds(10000)));
    }
    return *gate;
  }

  CommandResult curl(const std::vector<std::string>& args) {
    std::vector<std::string> all{"-sS",        "-x", gate->proxyUrl(), "--cacert", ca.caCertPath(),
                                 "--max-time", "30"};
    all.insert(all.end(), args.begin(), args.end());
    return runCurl(all, milliseconds(40000));
  }
  // A 1 MiB download (https: CONNECT; http: absolute-form); true when whole.
  bool fetch(const std::string& url, const std::string& name) {
    auto r = curl({"-o", out.file(name), "-w", "%{http_code}", url});
    INFO("curl: " << r.exit_code << " " << r.out << " " << r.err << "\n"
                  << gate->process().logTail(20));
    CHECK(r.exit_code == 0);
    return r.exit_code == 0 && r.out == "200" &&
           sha256File(out.file(name)) == testFile("1m").sha256;
  }
  double fallbacks(const std::string& from, const std::string& to) {
    return scrapeMetrics(gate->adminPort())
        .sum("h2gate_route_fallbacks_total", {{"cluster", from}, {"fallback", to}});
  }

  TempDir work{"fallback"};
  TestCA ca{work.path().string()};
  Nginx nginx;
  Squid squid;
  Nghttpx backup;
  const uint16_t dead_port = freePort();
  const uint16_t dead_port2 = freePort();
  TempDir out{"out"};
  std::unique_ptr<H2gate> gate;  // stops first
};

}  // namespace

TEST_CASE("fallback: when the primary cluster's proxy cannot be reached, the backup carries it",
          "[fallback]") {
  FallbackEnv env;
  env.start("{cluster: primary, fallback_clusters: [backup]}");
  // CONNECT (inner TLS to nginx) and absolute-form, each more than once: the
  // first meets the primary's connect failure, later ones its down endpoint.
  for (int i = 0; i < 2; ++i) {
    CHECK(env.fetch(env.nginx.httpsUrl("/1m?c" + str(i)), "c" + str(i)));
    CHECK(env.fetch(env.nginx.httpUrl("/1m?f" + str(i)), "f" + str(i)));
  }
  CHECK(env.fallbacks("primary", "backup") == 4);
  // Every request went through the backup proxy; the access log names it.
  CHECK(env.backup.waitForAccessLines(4, "", milliseconds(5000)).size() == 4);
  const auto log = env.gate->waitForAccessLog(4, milliseconds(5000));
  REQUIRE(log.size() == 4);
  for (const auto& e : log) {
    INFO(e.line);
    CHECK(e.get("cluster") == "backup");
    CHECK(e.get("protocol") == "h2");
    CHECK(e.num("status") == 200);
  }
  CHECK(env.gate->process().waitForLog("falling back to cluster 'backup'", milliseconds(1000)));
}

TEST_CASE("fallback: DIRECT last only when direct_fallback allows it", "[fallback]") {
  FallbackEnv env;
  SECTION("allowed: two unreachable clusters, then DIRECT") {
    env.start("{cluster: primary, fallback_clusters: [dead2], direct_fallback: true}", false);
    CHECK(env.fetch(env.nginx.httpsUrl("/1m?d"), "d"));
    CHECK(env.fetch(env.nginx.httpUrl("/1m?e"), "e"));
    CHECK(env.fallbacks("primary", "dead2") == 2);
    CHECK(env.fallbacks("dead2", "direct") == 2);
    const auto log = env.gate->waitForAccessLog(2, milliseconds(5000));
    REQUIRE(log.size() == 2);
    for (const auto& e : log) {
      INFO(e.line);
      CHECK(e.get("cluster").empty());
      CHECK(e.get("protocol") == "direct");
    }
    CHECK(env.backup.accessLines().empty());
  }
  SECTION("not allowed: the app gets the failure, naming every route tried") {
    env.start("{cluster: primary, fallback_clusters: [dead2]}", false);
    auto r = env.curl({"-o", env.out.file("x"), "-w", "%{http_code}", env.nginx.httpUrl("/1m?x")});
    INFO(r.out << " " << r.err);
    CHECK((r.out == "502" || r.out == "503"));
    const std::string body = readFile(env.out.file("x"));
    INFO(body);
    CHECK(body.find("cluster 'primary'") != std::string::npos);
    CHECK(body.find("then cluster 'dead2'") != std::string::npos);
    CHECK(env.fallbacks("primary", "dead2") == 1);
    CHECK(env.fallbacks("dead2", "direct") == 0);
  }
}

TEST_CASE("fallback: a proxy's own refusal is final, never a reason to go elsewhere",
          "[fallback]") {
  // squid behind the backup proxy wants credentials h2gate does not send: the
  // 407 reached a proxy that decided, so DIRECT must not be tried.
  FallbackEnv env(/*squid_auth=*/true);
  env.start("{cluster: backup, direct_fallback: true}");
  auto r = env.curl({"-o", env.out.file("a"), "-w", "%{http_code}", env.nginx.httpUrl("/1m?a")});
  INFO(r.out << " " << r.err);
  CHECK(r.out == "407");
  auto c =
      env.curl({"-o", env.out.file("b"), "-w", "%{http_connect}", env.nginx.httpsUrl("/1m?b")});
  INFO(c.out << " " << c.err);
  CHECK(c.exit_code != 0);  // the CONNECT was refused: curl gets no tunnel
  CHECK(c.out == "407");
  CHECK(env.fallbacks("backup", "direct") == 0);
  CHECK(env.nginx.accessLog().find("/1m?") == std::string::npos);
}
