// Network changes (gateway/net/network_monitor.h): when an address appears,
// h2gate has every upstream h2 connection prove itself with a PING; one that
// cannot answer (its path went silent) is replaced, and the next request
// succeeds within network_change_timeout plus one connect.
//
// Needs root: the test's main thread moves into a fresh network namespace
// (setns) before starting anything, so nginx, squid, nghttpx, h2gate and curl
// all run there on its own loopback, and `ip addr add` changes only that
// namespace (tests/support/netns.h). Skipped (with a warning) without root
// or `ip netns`.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <memory>
#include <string>
#include <thread>

#include "tests/support/h2_env.h"
#include "tests/support/h2gate.h"
#include "tests/support/netns.h"
#include "tests/support/scrape.h"
#include "tests/support/tcp_relay.h"
#include "tests/support/upstream_proxies.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

// h2gate (debug log) for the chain's cluster at `proxy_port`, with
// h2gate.network_change_timeout = `timeout`.
std::unique_ptr<H2gate> startGate(H2Env& env, uint16_t proxy_port, const std::string& timeout) {
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  o.yaml = upstreamModeYaml(proxy_port, env.ca.caCertPath()) +
           "h2gate:\n  network_change_timeout: " + timeout + "\n";
  o.args = {"--log-level", "debug"};
  auto gate = std::make_unique<H2gate>(std::move(o));
  INFO(gate->process().logTail());
  REQUIRE(gate->process().waitForLog("proxy 127\\.0\\.0\\.1:" + str(proxy_port) + " negotiated h2",
                                     milliseconds(10000)));
  return gate;
}

// One HTTPS download through h2gate (a CONNECT tunnel = one h2 stream).
CommandResult fetch(H2Env& env, H2gate& gate, const std::string& tag) {
  return runCurl({"-sS", "-o", "/dev/null", "-w", "%{http_code}", "-x", gate.proxyUrl(), "--cacert",
                  env.ca.caCertPath(), "--max-time", "20", env.nginx.httpsUrl("/1k?" + tag)},
                 milliseconds(25000));
}

// True, with a warning that the test is skipped, where network namespaces
// cannot be made.
bool netnsMissing() {
  std::string why;
  if (haveNetns(&why)) return false;
  WARN("skipped: " << why);
  return true;
}

}  // namespace

TEST_CASE("network change: the upstream h2 connection answers a PING and is kept", "[netchange]") {
  if (netnsMissing()) return;
  InNetns ns;
  REQUIRE(ns.error() == "");
  H2Env env;
  auto gate = startGate(env, env.nghttpx.port(), "2s");
  Process& p = gate->process();
  CHECK(fetch(env, *gate, "before").out == "200");
  const size_t connects = countOccurrences(gate->stderrText(), "connecting to proxy");

  REQUIRE(ns.ip({"addr", "add", "10.203.0.1/24", "dev", "lo"}));
  INFO(p.logTail(30));
  REQUIRE(
      p.waitForLog("network change: address 10\\.203\\.0\\.1/24 added on lo; confirming "
                   "upstream connections",
                   milliseconds(3000)));
  REQUIRE(p.waitForLog(
      "confirming the connection to 127\\.0\\.0\\.1:" + str(env.nghttpx.port()) + " with a PING",
      milliseconds(2000)));
  CHECK(fetch(env, *gate, "after").out == "200");
  // Answered: kept, nothing reconnected.
  std::this_thread::sleep_for(milliseconds(2500));  // past the PING deadline
  CHECK(gate->stderrText().find("did not answer a PING") == std::string::npos);
  CHECK(countOccurrences(gate->stderrText(), "connecting to proxy") == connects);
  CHECK(fetch(env, *gate, "later").out == "200");

  // Removing it is a change too.
  REQUIRE(ns.ip({"addr", "del", "10.203.0.1/24", "dev", "lo"}));
  CHECK(p.waitForLog("network change: address 10\\.203\\.0\\.1/24 removed from lo",
                     milliseconds(3000)));
}

TEST_CASE("network change: a connection whose path went silent is replaced in time",
          "[netchange]") {
  if (netnsMissing()) return;
  InNetns ns;
  REQUIRE(ns.error() == "");
  H2Env env;
  TcpRelay relay(env.nghttpx.port());
  auto gate = startGate(env, relay.port(), "1s");
  Process& p = gate->process();
  CHECK(fetch(env, *gate, "before").out == "200");
  REQUIRE(relay.accepted() == 1);

  // The old path dies silently at the moment the network changes.
  relay.blackholeExisting();
  REQUIRE(ns.ip({"addr", "add", "10.203.0.1/24", "dev", "lo"}));
  INFO(p.logTail(40));
  REQUIRE(p.waitForLog("network change: .*; confirming upstream connections", milliseconds(3000)));
  // The next request waits for the PING's verdict (1 s), then goes out on a
  // fresh connection: within the timeout plus one connect and handshake.
  const auto start = Clock::now();
  const CommandResult r = fetch(env, *gate, "after");
  const double secs = secondsSince(start);
  INFO("curl: " << r.err);
  CHECK(r.out == "200");
  CHECK(secs < 1.0 + 2.0);
  CHECK(p.waitForLog("did not answer a PING within 1", milliseconds(1000)));
  CHECK(relay.accepted() == 2);
  // A path lost to a network change says nothing about the proxy: it was
  // not taken down (no back-off, no 503 for the waiting request).
  CHECK(gate->stderrText().find("are down") == std::string::npos);
  CHECK(fetch(env, *gate, "later").out == "200");
}

// A proxy that was down on the old network may be reachable on the new one:
// the change tries it again at once, whatever its back-off had grown to,
// while another proxy goes on serving. (Before, the change cancelled the
// retry and tried nothing: the proxy stayed "down" in /clusters for good,
// even once it was back; CI hit that when a container's veth link went
// away during failover_test.)
TEST_CASE("network change: a proxy down on the old network is tried again at once", "[netchange]") {
  if (netnsMissing()) return;
  InNetns ns;
  REQUIRE(ns.error() == "");
  H2Env env;
  Nghttpx& a = env.nghttpx;
  Nghttpx b(H2Env::nghttpxOptions(env.options, env.ca, env.squid.httpPort()));
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  o.yaml =
      upstreamModeYaml(a.port(), env.ca.caCertPath(), {}, {"connect_timeout: 2s"}, {b.port()}) +
      "h2gate:\n  network_change_timeout: 1s\n";
  o.args = {"--log-level", "debug"};
  H2gate gate(std::move(o));
  Process& p = gate.process();
  INFO(p.logTail(40));
  REQUIRE(p.waitForLog("proxy 127\\.0\\.0\\.1:" + str(a.port()) + " negotiated h2",
                       milliseconds(10000)));
  const auto state = [&](const Nghttpx& proxy, const std::string& want, milliseconds timeout) {
    return waitForEndpointState(gate.adminPort(), proxy.port(), want, timeout);
  };

  // A goes away; h2gate finds it down and serves through B.
  a.process().kill(SIGKILL);
  REQUIRE(state(a, "down", milliseconds(5000)));
  CHECK(fetch(env, gate, "via-b").out == "200");
  // Its back-off grows: 0.5 s, 1 s, 2 s, 4 s between attempts.
  std::this_thread::sleep_for(milliseconds(4000));

  // Still away at the change: tried at once, found down, and its back-off
  // starts over from 0.5 s.
  const std::string restarted = "proxy 127.0.0.1:" + str(a.port()) + " down; next attempt in 0.5s";
  const size_t restarts = countOccurrences(gate.stderrText(), restarted);
  REQUIRE(ns.ip({"addr", "add", "10.203.0.2/24", "dev", "lo"}));
  REQUIRE(p.waitForLog("network change: address 10\\.203\\.0\\.2/24 added on lo; confirming",
                       milliseconds(3000)));
  CHECK(p.waitForLog("1 endpoint\\(s\\) no longer considered down, tried again now",
                     milliseconds(2000)));
  const auto deadline = Clock::now() + milliseconds(3000);
  while (countOccurrences(gate.stderrText(), restarted) == restarts && Clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(50));
  CHECK(countOccurrences(gate.stderrText(), restarted) > restarts);
  CHECK(state(a, "down", milliseconds(1000)));
  std::this_thread::sleep_for(milliseconds(4000));  // the back-off grows again

  // Back before the next change: the change finds it up, long before its
  // back-off would have.
  a.restart();
  REQUIRE(ns.ip({"addr", "del", "10.203.0.2/24", "dev", "lo"}));
  REQUIRE(p.waitForLog("network change: address 10\\.203\\.0\\.2/24 removed from lo",
                       milliseconds(3000)));
  CHECK(state(a, "up", milliseconds(3000)));
  CHECK(fetch(env, gate, "after").out == "200");
  CHECK(p.running());
}

TEST_CASE("network change: direct mode says so; 0s turns the monitor off", "[netchange]") {
  if (netnsMissing()) return;
  InNetns ns;
  REQUIRE(ns.error() == "");
  H2gate::Options on;
  on.binary = H2GATE_BINARY;
  on.yaml = directModeYaml();
  on.args = {"--log-level", "debug"};
  H2gate direct(on);
  H2gate::Options off = on;
  off.yaml = directModeYaml("  network_change_timeout: 0s\n");
  H2gate disabled(off);
  REQUIRE(disabled.process().waitForLog("network monitor off", milliseconds(3000)));

  REQUIRE(ns.ip({"addr", "add", "10.203.0.7/24", "dev", "lo"}));
  INFO(direct.process().logTail(20));
  CHECK(direct.process().waitForLog(
      "network change: address 10\\.203\\.0\\.7/24 added on lo \\(direct mode",
      milliseconds(3000)));
  std::this_thread::sleep_for(milliseconds(1000));
  CHECK(disabled.stderrText().find("network change") == std::string::npos);
}
