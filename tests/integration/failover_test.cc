// Failure behaviour with real peers: two nghttpx proxies (endpoints A and B
// of one cluster) in front of one squid and nginx. A proxy is frozen
// (SIGSTOP), killed (SIGKILL) or shut down gracefully (SIGQUIT, which sends
// GOAWAY) in the middle of a transfer.
#include <catch2/catch.hpp>

#include <csignal>
#include <memory>
#include <string>
#include <thread>

#include "tests/support/background_downloads.h"
#include "tests/support/h2_env.h"
#include "tests/support/net.h"
#include "tests/support/scrape.h"
#include "tests/support/tcp_relay.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

struct TwoProxies {
  TwoProxies()
      : nginx(H2Env::nginxOptions(ca)),
        squid(Squid::Options{}),
        a(proxyOptions(ca, squid.httpPort())),
        b(proxyOptions(ca, squid.httpPort())) {}

  static Nghttpx::Options proxyOptions(TestCA& ca, uint16_t backend) {
    Nghttpx::Options n;
    n.ca = &ca;
    n.backend_port = backend;
    return n;
  }

  // Keepalive 1 s / 1 s so a frozen proxy is found within ~2.2 s.
  H2gate& start() {
    testFile("10m");  // made on first use: the origin serves them
    testFile("1m");
    H2gate::Options o;
    o.binary = H2GATE_BINARY;
    o.yaml = upstreamModeYaml(a.port(), ca.caCertPath(),
                              {"connection_keepalive: {interval: 1s, timeout: 1s}"},
                              {"connect_timeout: 2s"}, {b.port()});
    o.args = {"--log-level", "debug"};
    gate = std::make_unique<H2gate>(std::move(o));
    INFO(gate->process().logTail());
    REQUIRE(gate->process().waitForLog("proxy 127\\.0\\.0\\.1:" + str(a.port()) + " negotiated h2",
                                       milliseconds(10000)));
    return *gate;
  }

  std::vector<std::string> curlArgs(const std::vector<std::string>& args) const {
    std::vector<std::string> all{"-sS", "-x", gate->proxyUrl(), "--cacert", ca.caCertPath()};
    all.insert(all.end(), args.begin(), args.end());
    return all;
  }
  CommandResult curl(const std::vector<std::string>& args) {
    auto all = curlArgs(args);
    all.insert(all.end(), {"--max-time", "30"});
    return runCurl(all, milliseconds(40000));
  }
  // A 10 MiB download at 1 MiB/s through h2gate, in the background.
  std::unique_ptr<Process> slowDownload(const std::string& name) {
    return startCurl(
        curlArgs({"--limit-rate", "1M", "-o", out.file(name), nginx.httpsUrl("/10m?" + name)}),
        out.path().string(), name);
  }
  // One 1 MiB download; true when it arrived whole.
  bool fetch(const std::string& name) {
    auto r = curl({"-o", out.file(name), "-w", "%{http_code}", nginx.httpsUrl("/1m?" + name)});
    return r.exit_code == 0 && r.out == "200" &&
           sha256File(out.file(name)) == testFile("1m").sha256;
  }
  bool endpointState(const Nghttpx& p, const std::string& state,
                     milliseconds timeout = milliseconds(15000)) {
    return waitForEndpointState(gate->adminPort(), p.port(), state, timeout);
  }

  TempDir work{"failover"};
  TestCA ca{work.path().string()};
  Nginx nginx;
  Squid squid;
  Nghttpx a;
  Nghttpx b;
  TempDir out{"out"};
  std::unique_ptr<H2gate> gate;  // stops first
};

// n downloads of the 10 MiB file (4 MB/s each) for a drain test; curl
// writes each status code.
BackgroundDownloads tenMiB(const std::string& prefix, int n) {
  BackgroundDownloads d;
  d.count = n;
  d.prefix = prefix;
  d.path = "/10m";
  d.sha256 = testFile("10m").sha256;
  d.curl_flags = {"-w", "%{http_code}\\n"};
  return d;
}

// Waits for a background curl; its exit status (-1: still running after `timeout`).
int exitCode(Process& p, milliseconds timeout) {
  auto st = p.wait(timeout);
  if (!st) return -1;
  return st->exited ? st->code : 128 + st->signal;
}

}  // namespace

TEST_CASE("failover: a frozen proxy is found by PING, its tunnels end, new ones use the other",
          "[failover][upstream]") {
  TwoProxies env;
  H2gate& gate = env.start();
  auto dl = env.slowDownload("frozen");
  std::this_thread::sleep_for(milliseconds(1500));
  INFO(dl->logTail());
  REQUIRE(dl->running());

  env.a.process().kill(SIGSTOP);
  const auto stopped = Clock::now();
  // interval (+15%) + timeout, plus slack: the app is told, not left hanging.
  const int code = exitCode(*dl, milliseconds(8000));
  const double secs = secondsSince(stopped);
  INFO(gate.process().logTail(30));
  CHECK(code > 0);  // curl reports the broken transfer
  CHECK(secs < 5.0);
  CHECK(gate.process().waitForLog("did not answer a PING", milliseconds(1000)));
  CHECK(env.endpointState(env.a, "down", milliseconds(3000)));

  // New tunnels go to B at once.
  const size_t b_before = env.b.accessLines("CONNECT").size();
  CHECK(env.fetch("via-b"));
  CHECK(env.b.waitForAccessLines(b_before + 1, "CONNECT", milliseconds(5000)).size() ==
        b_before + 1);
  CHECK(adminGet(gate.adminPort(), "/ready").status == 200);  // B is up

  env.a.process().kill(SIGCONT);
  CHECK(env.endpointState(env.a, "up", milliseconds(20000)));
  CHECK(gate.process().running());
}

TEST_CASE("failover: a killed proxy breaks its transfers cleanly; restarted, it is used again",
          "[failover][upstream]") {
  TwoProxies env;
  H2gate& gate = env.start();
  auto dl = env.slowDownload("killed");
  std::this_thread::sleep_for(milliseconds(1500));
  INFO(dl->logTail());
  REQUIRE(dl->running());
  env.a.process().kill(SIGKILL);
  const auto killed = Clock::now();
  // The app sees a closed connection, and curl does not call the partial file complete.
  CHECK(exitCode(*dl, milliseconds(5000)) > 0);
  CHECK(gate.process().running());
  CHECK(env.fetch("after-kill"));
  CHECK(env.endpointState(env.a, "down", milliseconds(5000)));

  env.a.restart();
  // A down proxy is retried after a back-off that doubles from 0.5 s up to
  // 30 s (config/README.md): the longer A was away (seconds on a loaded
  // machine), the later the first attempt after its return, at most 30 s
  // plus the connect timeout (2 s).
  INFO("proxy A was away for " << secondsSince(killed) << " s");
  CHECK(env.endpointState(env.a, "up", milliseconds(36000)));
  // Both idle: the earlier endpoint (A) takes the next tunnel.
  const size_t a_before = env.a.accessLines("CONNECT").size();
  CHECK(env.fetch("back-on-a"));
  CHECK(env.a.waitForAccessLines(a_before + 1, "CONNECT", milliseconds(5000)).size() ==
        a_before + 1);
}

TEST_CASE("failover: GOAWAY from a proxy shutting down lets transfers finish; new ones move on",
          "[failover][upstream][goaway]") {
  TwoProxies env;
  H2gate& gate = env.start();
  const TestFile& f = testFile("10m");
  auto transfer = startCurl(env.curlArgs({"--limit-rate", "4M", "-o", env.out.file("drained"),
                                          env.nginx.httpsUrl("/10m?drained")}),
                            env.out.path().string(), "drained");
  std::this_thread::sleep_for(milliseconds(700));
  env.a.process().signalMain(SIGQUIT);  // nghttpx: graceful shutdown, GOAWAY to clients
  INFO(gate.process().logTail(30));
  REQUIRE(gate.process().waitForLog("GOAWAY from proxy", milliseconds(5000)));
  // A tunnel opened after the GOAWAY goes elsewhere and works.
  CHECK(env.fetch("after-goaway"));
  // The one in flight completes, byte for byte.
  CHECK(exitCode(*transfer, milliseconds(20000)) == 0);
  CHECK(sha256File(env.out.file("drained")) == f.sha256);
}

TEST_CASE("failover: a connection silently dropped on the path is replaced within the PING timeout",
          "[failover][upstream][keepalive]") {
  H2Env env;
  TcpRelay relay(env.nghttpx.port());
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  o.yaml = upstreamModeYaml(relay.port(), env.ca.caCertPath(),
                            {"connection_keepalive: {interval: 2s, timeout: 1s}"});
  o.args = {"--log-level", "debug"};
  env.gate = std::make_unique<H2gate>(std::move(o));
  H2gate& gate = *env.gate;
  const TestFile& f = testFile("1m");
  auto fetch = [&](const std::string& name) {
    auto r = env.curl({"-o", env.out.file(name), "-w", "%{http_code}", env.nginx.httpsUrl("/1m")},
                      milliseconds(20000));
    return r.out == "200" && sha256File(env.out.file(name)) == f.sha256;
  };
  REQUIRE(fetch("before"));
  REQUIRE(relay.accepted() == 1);

  // The path forgets the connection: nothing arrives any more, nothing closes.
  relay.blackholeExisting();
  std::this_thread::sleep_for(milliseconds(2500));  // idle past the interval
  const auto start = Clock::now();
  INFO(gate.process().logTail(30));
  CHECK(fetch("after"));
  // PING timeout (1 s) plus one connect, with slack; never a hang.
  CHECK(secondsSince(start) < 4.0);
  CHECK(relay.accepted() >= 2);  // a fresh connection carried it
}

TEST_CASE("drain: SIGTERM during 20 transfers through the h2 proxy lets all of them finish",
          "[drain][upstream]") {
  H2Env env;
  H2gate& gate = env.startGate();  // default drain_timeout: 30 s
  const BackgroundDownloads d = tenMiB("d", 20);
  // Once all 20 tunnels are open, ask h2gate to stop.
  auto transfers = startDownloads(env, gate.proxyUrl(), gate.adminPort(), d);
  gate.process().signalMain(SIGTERM);
  INFO(gate.process().logTail(20));
  CHECK(adminGet(gate.adminPort(), "/healthz").status == 503);  // draining
  checkDownloads(env, *transfers, d);
  const auto exit = gate.process().wait(milliseconds(15000));
  REQUIRE(exit);
  CHECK(exit->exited);
  CHECK(exit->code == 0);
}

TEST_CASE("failover: a CONNECT one proxy answers with 502 is tried once on the other",
          "[failover][upstream]") {
  // Proxy A cannot reach its backend (nothing listens there), so it answers
  // every CONNECT with 502; proxy B works.
  TempDir work{"answer-retry"};
  TestCA ca{work.path().string()};
  Nginx nginx(H2Env::nginxOptions(ca));
  Squid squid(Squid::Options{});
  Nghttpx a(TwoProxies::proxyOptions(ca, freePort()));
  Nghttpx b(TwoProxies::proxyOptions(ca, squid.httpPort()));
  testFile("1m");
  TempDir out{"out"};
  auto start = [&](std::vector<uint16_t> more) {
    H2gate::Options o;
    o.binary = H2GATE_BINARY;
    o.yaml = upstreamModeYaml(a.port(), ca.caCertPath(), {}, {"connect_timeout: 2s"}, more);
    o.args = {"--log-level", "debug"};
    auto gate = std::make_unique<H2gate>(std::move(o));
    INFO(gate->process().logTail());
    REQUIRE(gate->process().waitForLog("proxy 127\\.0\\.0\\.1:" + str(a.port()) + " negotiated h2",
                                       milliseconds(10000)));
    return gate;
  };
  auto fetch = [&](H2gate& gate, const std::string& name) {
    return runCurl(
        {"-sS", "-x", gate.proxyUrl(), "--cacert", ca.caCertPath(), "--max-time", "30", "-o",
         out.file(name), "-w", "%{http_connect} %{http_code}", nginx.httpsUrl("/1m?" + name)},
        milliseconds(40000));
  };

  SECTION("two proxies: the app never sees A's 502") {
    auto gate = start({b.port()});
    for (int i = 0; i < 3; ++i) {
      auto r = fetch(*gate, "r" + str(i));
      INFO(r.err << "\n" << gate->process().logTail(20));
      CHECK(r.exit_code == 0);
      CHECK(r.out == "200 200");
      CHECK(sha256File(out.file("r" + str(i))) == testFile("1m").sha256);
    }
    CHECK(gate->process().waitForLog("answered CONNECT .* with 502; trying another proxy",
                                     milliseconds(1000)));
    // Every tunnel ended up on B; A saw the first try (at least).
    CHECK(b.waitForAccessLines(3, "CONNECT", milliseconds(5000)).size() == 3);
    CHECK(!a.waitForAccessLines(1, "CONNECT", milliseconds(5000)).empty());
  }
  SECTION("one proxy: its 502 reaches the app, once") {
    auto gate = start({});
    auto r = fetch(*gate, "only");
    INFO(r.err);
    CHECK(r.exit_code != 0);
    CHECK(r.out.rfind("502", 0) == 0);
    CHECK(a.waitForAccessLines(1, "CONNECT", milliseconds(5000)).size() == 1);
    CHECK(gate->process().stderrText().find("trying another proxy") == std::string::npos);
  }
}

TEST_CASE("drain: POST /quitquitquit during 10 transfers lets all of them finish, exit 0",
          "[drain][upstream][admin]") {
  H2Env env;
  H2gate& gate = env.startGate();
  // A web page's cross-site POST (no X-H2gate-Admin header) does not stop it.
  AdminReply r = adminRequest(
      "POST", gate.adminPort(), "/quitquitquit",
      {"Content-Type: text/plain", "Origin: http://evil.example", "Sec-Fetch-Site: cross-site"});
  CHECK(r.status == 403);
  r = adminRequest("POST", gate.adminPort(), "/quitquitquit", {"Content-Type: text/plain"});
  CHECK(r.status == 403);
  CHECK(r.body.find("POST needs the header X-H2gate-Admin: 1") != std::string::npos);
  CHECK(adminGet(gate.adminPort(), "/quitquitquit").status == 405);  // GET changes nothing
  CHECK(adminGet(gate.adminPort(), "/healthz").status == 200);

  quitDuringDownloads(env, gate, tenMiB("q", 10), milliseconds(15000), [&] {
    CHECK(gate.process().waitForLog("POST /quitquitquit: no longer accepting", milliseconds(5000)));
    CHECK(adminGet(gate.adminPort(), "/healthz").status == 503);  // draining
  });
}
