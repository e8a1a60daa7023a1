// Upstream pool limits and the upkeep of its connections: a cluster's
// max_requests (requests and tunnels in progress, across workers), and idle
// HTTP/1.1 keep-alive connections to a proxy (idle_timeout, and a proxy that
// closes one while it sits in the pool).
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/h2_env.h"
#include "tests/support/h2gate.h"
#include "tests/support/net.h"
#include "tests/support/scrape.h"
#include "tests/support/upstream_proxies.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string connectRequest(uint16_t port) {
  const std::string target = "127.0.0.1:" + str(port);
  return "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n";
}

std::string getRequest(uint16_t port, const std::string& path) {
  const std::string origin = "127.0.0.1:" + str(port);
  return "GET http://" + origin + path + " HTTP/1.1\r\nHost: " + origin + "\r\n\r\n";
}

// A CONNECT through h2gate to the echo server at `port`; REQUIREs a 200
// and that bytes come back through it.
std::unique_ptr<RawConnection> openEchoTunnel(H2gate& gate, uint16_t port, const std::string& tag) {
  auto c = std::make_unique<RawConnection>(gate.port());
  REQUIRE(c->send(connectRequest(port)));
  auto r = c->readResponse(milliseconds(10000), /*head_only=*/true);
  INFO(r.raw << "\n" << gate.process().logTail(20));
  REQUIRE(r.status == 200);
  REQUIRE(c->send("ping " + tag));
  REQUIRE(c->readExactly(5 + tag.size(), milliseconds(5000)) == "ping " + tag);
  return c;
}

// Sends `request` on new app connections until one is answered 200 (within
// 5 s); returns that connection, or null.
std::unique_ptr<RawConnection> waitForSlot(H2gate& gate, const std::string& request) {
  const auto deadline = Clock::now() + milliseconds(5000);
  while (Clock::now() < deadline) {
    auto c = std::make_unique<RawConnection>(gate.port());
    if (!c->send(request)) return nullptr;
    const bool head_only = request.rfind("CONNECT", 0) == 0;
    if (c->readResponse(milliseconds(10000), head_only).status == 200) return c;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return nullptr;
}

}  // namespace

TEST_CASE(
    "max_requests: beyond it 503 at once with the reason; a slot comes back when a tunnel ends",
    "[pool][limits]") {
  H2Env env;
  TcpServer echo(TcpServer::echo());
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  // Two workers, each with its own pool: the limit is the cluster's, not a
  // pool's (which worker takes an app connection is up to the kernel).
  o.yaml = "h2gate: {concurrency: 2}\n" +
           upstreamModeYaml(env.nghttpx.port(), env.ca.caCertPath(), {},
                            {"circuit_breakers: {thresholds: [{max_requests: 2}]}"});
  o.args = {"--log-level", "debug"};
  env.gate = std::make_unique<H2gate>(std::move(o));
  env.waitConnected();
  H2gate& gate = *env.gate;

  std::vector<std::unique_ptr<RawConnection>> tunnels;
  tunnels.push_back(openEchoTunnel(gate, echo.port(), "a"));
  tunnels.push_back(openEchoTunnel(gate, echo.port(), "b"));

  // The third tunnel, and an absolute-form request: both 503 at once.
  const auto first_refusal = Clock::now();
  for (const std::string& request :
       {connectRequest(echo.port()), getRequest(env.nginx.httpPort(), "/1k")}) {
    RawConnection third(gate.port());
    const auto start = Clock::now();
    REQUIRE(third.send(request));
    auto r = third.readResponse(milliseconds(5000));
    INFO(r.raw);
    CHECK(r.status == 503);
    CHECK(secondsSince(start) < 1.0);  // at once, not after a queue timeout
    CHECK(contains(r.body, "upstream cluster 'proxy' (max_requests 2)"));
  }
  // The two open tunnels are untouched.
  for (size_t i = 0; i < tunnels.size(); ++i) {
    const std::string again = "again " + str(i);
    REQUIRE(tunnels[i]->send(again));
    CHECK(tunnels[i]->readExactly(again.size(), milliseconds(5000)) == again);
  }

  // One ends (the app closes; h2gate ends the tunnel after
  // tunnel_half_close_timeout, 1 s, as nghttpx does not pass the FIN on):
  // exactly one new tunnel fits (the slot came back once, and the refused
  // requests took none).
  tunnels[0].reset();
  std::unique_ptr<RawConnection> next = waitForSlot(gate, connectRequest(echo.port()));
  INFO(gate.process().logTail(20));
  REQUIRE(next);
  REQUIRE(next->send("ping c"));
  CHECK(next->readExactly(6, milliseconds(5000)) == "ping c");
  {
    RawConnection refused(gate.port());
    REQUIRE(refused.send(connectRequest(echo.port())));
    CHECK(refused.readResponse(milliseconds(5000)).status == 503);
  }

  // Requests on a keep-alive app connection each take a slot and give it
  // back when their response is complete: with one slot free, three in a
  // row all succeed.
  tunnels[1].reset();
  REQUIRE(waitForSlot(gate, getRequest(env.nginx.httpPort(), "/1k")));
  {
    RawConnection keep(gate.port());
    for (int i = 0; i < 3; ++i) {
      // The app has the whole body once Content-Length is reached; the slot
      // comes back when the proxy's END_STREAM ends the h2 stream, which
      // nghttpx may send in a later frame. Wait for that (only `next`'s
      // stream open), so a busy machine cannot turn the test into a race.
      const auto deadline = Clock::now() + milliseconds(5000);
      while (scrapeMetrics(gate.adminPort())
                     .sum("h2gate_upstream_streams_active", {{"cluster", "proxy"}}) > 1 &&
             Clock::now() < deadline)
        std::this_thread::sleep_for(milliseconds(20));
      REQUIRE(keep.send(getRequest(env.nginx.httpPort(), "/1k?" + str(i))));
      auto r = keep.readResponse(milliseconds(10000));
      INFO(r.raw.substr(0, 300));
      CHECK(r.status == 200);
    }
  }

  const Scrape s = scrapeMetrics(gate.adminPort());
  CHECK(s.sum("h2gate_upstream_pool_overflows_total", {{"cluster", "proxy"}}) >= 3);
  // The refusals are logged once, then at most every 10 s, not each one.
  const double refusing = secondsSince(first_refusal);
  const std::string log = gate.stderrText();
  INFO(gate.process().logTail(30));
  const size_t warnings = countOccurrences(log, "cluster proxy is at max_requests (2 ");
  CHECK(warnings >= 1);
  CHECK(warnings <= 1 + static_cast<size_t>(refusing / 10));
  CHECK(warnings < countOccurrences(log, "503 for "));
  CHECK(regexSearch(log, "warn[^\n]*cluster proxy is at max_requests \\(2 [^\n]*\\(1 refused")
            .has_value());
  // The config dump shows it.
  const AdminReply dump = adminGet(gate.adminPort(), "/config_dump");
  CHECK(contains(dump.body, "max_requests: 2"));
}

TEST_CASE("max_requests across a reload: tunnels still open count, the new limit applies",
          "[pool][limits][reload]") {
  H2Env env;
  TcpServer echo(TcpServer::echo());
  auto yaml = [&](int max_requests) {
    return upstreamModeYaml(
        env.nghttpx.port(), env.ca.caCertPath(), {},
        {"circuit_breakers: {thresholds: [{max_requests: " + str(max_requests) + "}]}"});
  };
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  o.yaml = yaml(2);
  o.args = {"--log-level", "debug"};
  env.gate = std::make_unique<H2gate>(std::move(o));
  env.waitConnected();
  H2gate& gate = *env.gate;
  auto status = [&](RawConnection& c) {
    REQUIRE(c.send(connectRequest(echo.port())));
    return c.readResponse(milliseconds(10000), /*head_only=*/true).status;
  };

  std::vector<std::unique_ptr<RawConnection>> tunnels;
  tunnels.push_back(openEchoTunnel(gate, echo.port(), "a"));
  tunnels.push_back(openEchoTunnel(gate, echo.port(), "b"));
  {
    RawConnection third(gate.port());
    CHECK(status(third) == 503);
  }
  // The cluster changes (a new pool per worker); the two tunnels stay on
  // the old one and still count.
  gate.writeFile("h2gate.yaml", yaml(3));
  const AdminReply post = adminPost(gate.adminPort(), "/reload");
  INFO(post.body << gate.process().logTail(20));
  REQUIRE(post.status == 200);
  tunnels.push_back(openEchoTunnel(gate, echo.port(), "c"));
  {
    RawConnection fourth(gate.port());
    CHECK(status(fourth) == 503);
  }
  for (size_t i = 0; i < 2; ++i) {
    const std::string again = "still " + str(i);
    REQUIRE(tunnels[i]->send(again));
    CHECK(tunnels[i]->readExactly(again.size(), milliseconds(5000)) == again);
  }
}

namespace {

// nginx ← squid https_port (HTTP/1.1 only) ← h2gate with a YAML cluster
// "proxy" whose common_http_protocol_options are `common` (a flow mapping).
struct IdleEnv {
  IdleEnv(const std::string& common, const std::string& squid_config)
      : nginx(nginxOptions(ca)), squid(squidOptions(ca, squid_config)) {
    H2gate::Options o;
    o.binary = H2GATE_BINARY;
    o.yaml = upstreamModeYaml(squid.httpsPort(), ca.caCertPath(), {},
                              {"typed_extension_protocol_options: "
                               "{envoy.extensions.upstreams.http.v3.HttpProtocolOptions: "
                               "{common_http_protocol_options: " +
                               common + "}}"});
    o.args = {"--log-level", "debug"};
    gate = std::make_unique<H2gate>(std::move(o));
    INFO(gate->process().logTail());
    REQUIRE(gate->process().waitForLog(
        "proxy 127\\.0\\.0\\.1:" + str(squid.httpsPort()) + " negotiated (http/1\\.1|no ALPN)",
        milliseconds(10000)));
  }
  static Nginx::Options nginxOptions(TestCA& ca) {
    Nginx::Options n;
    n.ca = &ca;
    return n;
  }
  static Squid::Options squidOptions(TestCA& ca, const std::string& extra) {
    Squid::Options s;
    s.ca = &ca;
    s.https = true;
    s.extra_config = extra;
    return s;
  }

  // An absolute-form GET through h2gate on a new app connection: its status
  // (0: no answer).
  int get(const std::string& path) {
    RawConnection c(gate->port());
    if (!c.send(getRequest(nginx.httpPort(), path))) return 0;
    const auto r = c.readResponse(milliseconds(10000));
    return r.status;
  }

  // h2gate's connections to squid's https_port in TCP state `state`.
  int connections(const std::string& state) const {
    const CommandResult r =
        runCommand({"ss", "-Htn", "state", state, "( dport = :" + str(squid.httpsPort()) + " )"},
                   milliseconds(10000));
    if (r.exit_code != 0) return -1;
    return static_cast<int>(std::count(r.out.begin(), r.out.end(), '\n'));
  }

  // Polls h2gate's log until `text` occurs at least `n` times (5 s at most).
  bool waitForLogCount(const std::string& text, size_t n) {
    const auto deadline = Clock::now() + milliseconds(5000);
    while (countOccurrences(gate->stderrText(), text) < n) {
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return true;
  }

  double activeGauge() const {
    return scrapeMetrics(gate->adminPort())
        .sum("h2gate_upstream_connections_active", {{"cluster", "proxy"}, {"protocol", "http1"}});
  }

  TempDir work{"pool-idle"};
  TestCA ca{work.path().string()};
  Nginx nginx;
  Squid squid;
  std::unique_ptr<H2gate> gate;  // stops first
};

}  // namespace

TEST_CASE("idle_timeout: an idle HTTP/1.1 proxy connection is closed; the next request opens one",
          "[pool][h1][idle]") {
  IdleEnv env("{idle_timeout: 1s}", "");
  H2gate& gate = *env.gate;
  INFO(gate.process().logTail(30));
  const std::string closed = "unused for 1s (idle_timeout): closed";
  // The pre-connected connection may have timed out already.
  const size_t before = countOccurrences(gate.stderrText(), closed);
  REQUIRE(env.get("/1k?a") == 200);
  CHECK(env.connections("established") == 1);  // kept alive, idle in the pool
  CHECK(env.activeGauge() == 1);
  // Unused for 1 s: closed by h2gate (squid itself would keep it 5 minutes).
  CHECK(env.waitForLogCount(closed, before + 1));
  const auto deadline = Clock::now() + milliseconds(3000);
  while (env.connections("established") != 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(100));
  CHECK(env.connections("established") == 0);
  CHECK(env.activeGauge() == 0);
  // The next request is served on a new connection.
  REQUIRE(env.get("/1k?b") == 200);
  const auto lines = env.squid.waitForAccessLines(2, "GET", milliseconds(5000));
  CHECK(lines.size() == 2);
  CHECK(env.squid.clients("GET").size() == 2);
  CHECK(env.activeGauge() == 1);
}

TEST_CASE(
    "idle HTTP/1.1 proxy connection closed by the proxy: dropped at once, the next request "
    "succeeds",
    "[pool][h1][idle]") {
  // squid closes idle client connections after 1 s; h2gate's own
  // idle_timeout is off, so only noticing squid's close can save the next
  // request from a dead connection.
  IdleEnv env("{idle_timeout: 0s}", "client_idle_pconn_timeout 1 second");
  H2gate& gate = *env.gate;
  INFO(gate.process().logTail(30));
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    REQUIRE(env.get("/1k?" + str(round)) == 200);
    CHECK(env.waitForLogCount("closed by the proxy while idle: closed and dropped from the pool",
                              static_cast<size_t>(round) + 1));
    // h2gate closed its side at once: nothing left half-closed.
    std::this_thread::sleep_for(milliseconds(200));
    CHECK(env.connections("close-wait") == 0);
    CHECK(env.connections("established") == 0);
    CHECK(env.activeGauge() == 0);
    std::this_thread::sleep_for(milliseconds(500));
  }
  // Nothing failed towards the app, and each request had its own connection.
  REQUIRE(env.get("/1k?last") == 200);
  CHECK(env.squid.waitForAccessLines(3, "GET", milliseconds(5000)).size() == 3);
  CHECK(env.squid.clients("GET").size() == 3);
  for (const auto& e : gate.accessLog()) CHECK(e.num("status") == 200);
  CHECK(gate.stderrText().find("unexpected byte") == std::string::npos);
}
