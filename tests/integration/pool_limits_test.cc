// Upstream pool limits and the upkeep of its connections: a cluster's
// max_requests (requests and tunnels in progress, across workers), and idle
// HTTP/1.1 keep-alive connections to a proxy (idle_timeout, and a proxy that
// closes one while it sits in the pool).
#include <catch2/catch.hpp>

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
  o.yaml = upstreamModeYaml(env.nghttpx.port(), env.ca.caCertPath(), {},
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
