// A cluster whose only proxy is down: a request does not get 503 until the
// endpoint's back-off (up to 30 s) ends; it probes the proxy at once (at
// most one attempt per endpoint in flight) and waits for that attempt. So
// the first request after the proxy comes back is served, and while it is
// still down requests are refused as soon as the probe fails.
#include <catch2/catch.hpp>

#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/h2_env.h"
#include "tests/support/net.h"
#include "tests/support/upstream_proxies.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

// The background retry delay h2gate logged last for `port` (seconds), -1
// when none is logged yet.
double lastBackoff(H2gate& gate, uint16_t port) {
  const std::string log = gate.stderrText();
  const std::string needle = "proxy 127.0.0.1:" + str(port) + " down; next attempt in ";
  const size_t at = log.rfind(needle);
  if (at == std::string::npos) return -1;
  return std::stod(log.substr(at + needle.size()));
}

// Waits until h2gate logged a back-off of at least `seconds` for `port`.
bool waitForBackoff(H2gate& gate, uint16_t port, double seconds, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (lastBackoff(gate, port) >= seconds) return true;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return false;
}

}  // namespace

TEST_CASE("recovery: the first request after a single proxy comes back is served",
          "[failover][recovery]") {
  H2Env env;
  H2gate& gate = env.startGateYaml({});
  const std::string url = env.nginx.httpUrl("/1k");
  auto status = [&] {
    return env.curl({"-o", "/dev/null", "-w", "%{http_code}", url}, milliseconds(20000)).out;
  };
  REQUIRE(status() == "200");

  env.nghttpx.stop();
  const auto down_since = Clock::now();
  // The background retries fail until the back-off is long: the next one is
  // at least 8 s away.
  INFO(gate.process().logTail(20));
  REQUIRE(waitForBackoff(gate, env.nghttpx.port(), 8, milliseconds(30000)));
  const double backoff = lastBackoff(gate, env.nghttpx.port());
  // Still down: refused at once (the probe is refused), with each proxy's error.
  {
    const auto start = Clock::now();
    const auto r = env.curl({"-w", "\\n%{http_code}", url}, milliseconds(20000));
    INFO(r.out << r.err);
    CHECK(r.out.size() >= 3);
    CHECK(r.out.substr(r.out.size() - 3) == "503");
    CHECK(r.out.find("are down") != std::string::npos);
    CHECK(secondsSince(start) < 2.0);
  }

  env.nghttpx.restart();
  const double outage = secondsSince(down_since);
  const auto back = Clock::now();
  // Requests every 100 ms until one is served; with the probe, the first is.
  int attempts = 0;
  std::string last;
  while (secondsSince(back) < 40.0) {
    ++attempts;
    last = status();
    if (last == "200") break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  const double recovery = secondsSince(back);
  std::cout << "[figures] recovery: proxy down " << outage << " s (back-off " << backoff
            << " s), first 200 " << recovery << " s after it was back, at request " << attempts
            << "\n";
  INFO(gate.process().logTail(30));
  CHECK(last == "200");
  CHECK(attempts == 1);
  CHECK(recovery < 1.0);
  CHECK(gate.process().waitForLog("is reachable again", milliseconds(1000)));
}

TEST_CASE("recovery: requests while every proxy is down share one probe per endpoint",
          "[failover][recovery]") {
  // A "proxy" that accepts TCP and never answers the TLS handshake: every
  // attempt lasts connect_timeout, so attempts in flight can be counted.
  TcpServer silent([](int fd) { TcpServer::readUntilEof(fd, milliseconds(30000)); });
  // Proven with curl first: the handshake times out, and the server saw the connection.
  {
    const int before = silent.accepted();
    const auto r =
        runCurl({"-sS", "-k", "--max-time", "1", "https://127.0.0.1:" + str(silent.port()) + "/"},
                milliseconds(5000));
    CHECK(r.exit_code == 28);  // operation timed out
    CHECK(silent.accepted() == before + 1);
  }
  TempDir work("recovery");
  TestCA ca(work.path().string());
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  o.yaml = upstreamModeYaml(silent.port(), ca.caCertPath(), {}, {"connect_timeout: 0.5s"});
  o.args = {"--log-level", "debug"};
  H2gate gate(std::move(o));
  INFO(gate.process().logTail(30));
  // The start-up connection and the background retries fail until the next
  // retry is 4 s away.
  REQUIRE(waitForBackoff(gate, silent.port(), 4, milliseconds(20000)));

  const int accepted = silent.accepted();
  const auto start = Clock::now();
  std::vector<std::unique_ptr<RawConnection>> apps;
  for (int i = 0; i < 10; ++i) {
    apps.push_back(std::make_unique<RawConnection>(gate.port()));
    REQUIRE(apps.back()->send("GET http://origin.test/" + str(i) +
                              " HTTP/1.1\r\nHost: origin.test\r\n\r\n"));
  }
  for (auto& app : apps) {
    const HttpResponse r = app->readResponse(milliseconds(5000));
    INFO(r.raw);
    CHECK(r.status == 503);
    CHECK(r.body.find("all 1 upstream proxy of cluster 'proxy' are down") != std::string::npos);
  }
  const double secs = secondsSince(start);
  // They waited for the probe (connect_timeout), not for the back-off.
  CHECK(secs >= 0.4);
  CHECK(secs < 2.0);
  // Ten requests, one probe.
  CHECK(silent.accepted() == accepted + 1);
  CHECK(gate.process().waitForLog("probing 127\\.0\\.0\\.1:" + str(silent.port()) + " now",
                                  milliseconds(1000)));
}
