// What an idle direct tunnel costs h2gate: 2,000 CONNECT tunnels to nginx,
// each used for one request and then left open and silent. Neither side of
// a tunnel may hold a read buffer while nothing is readable (the app side
// waits for readability without one, and so does the destination side), so
// h2gate's resident memory grows by a few KiB per tunnel, not by the 64 KiB
// of a read buffer. Prints the per-tunnel figure.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/h2gate.h"
#include "tests/support/net.h"
#include "tests/support/origin.h"
#include "tests/support/upstream_proxies.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

// Raises this process's open-file soft limit to at least `want` (up to the
// hard limit); nginx and h2gate, started later, inherit it. Returns the
// soft limit now in force.
rlim_t ensureFdLimit(rlim_t want) {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < want) {
    rl.rlim_cur = std::min(want, rl.rlim_max);
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  return rl.rlim_cur;
}

// CONNECTs to nginx's plain port and fetches /1k through the tunnel
// (keep-alive: nginx keeps the connection, and so the tunnel, open).
std::unique_ptr<RawConnection> usedTunnel(uint16_t gate_port, uint16_t nginx_port) {
  auto c = std::make_unique<RawConnection>(gate_port);
  const std::string target = "127.0.0.1:" + std::to_string(nginx_port);
  REQUIRE(c->send("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n" +
                  "GET /1k HTTP/1.1\r\nHost: " + target + "\r\n\r\n"));
  const HttpResponse established = c->readResponse(milliseconds(5000), /*head_only=*/true);
  REQUIRE(established.status == 200);
  const HttpResponse r = c->readResponse(milliseconds(5000));
  REQUIRE(r.status == 200);
  REQUIRE(r.body.size() == 1024);
  return c;
}

}  // namespace

TEST_CASE("2,000 idle direct tunnels cost a few KiB each, no read buffer",
          "[limits][tunnel][memory]") {
  constexpr int kTunnels = 2000;
  const rlim_t limit = ensureFdLimit(3 * kTunnels + 256);
  if (limit < rlim_t{3 * kTunnels + 100}) {
    WARN("open-file limit " << limit << " too low for " << kTunnels << " tunnels: skipped");
    return;
  }
  Nginx nginx;  // keepalive_timeout 120 s: the tunnels stay open for the test
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  o.yaml = directModeYaml();
  o.args = {"--log-level", "info"};
  H2gate gate(o);
  const pid_t pid = gate.process().pid();

  // A first tunnel that stays open: the one-off allocations of the first
  // tunnel (the access log, asio's reactor, malloc's arenas) come before
  // the baseline.
  std::vector<std::unique_ptr<RawConnection>> tunnels;
  tunnels.reserve(kTunnels + 1);
  tunnels.push_back(usedTunnel(gate.port(), nginx.httpPort()));
  std::this_thread::sleep_for(milliseconds(200));
  const long rss_before = procStatusKiB(pid, "VmRSS");

  for (int i = 0; i < kTunnels; ++i) tunnels.push_back(usedTunnel(gate.port(), nginx.httpPort()));
  std::this_thread::sleep_for(milliseconds(500));  // idle: every read has drained
  const long rss_after = procStatusKiB(pid, "VmRSS");
  const double per_tunnel = static_cast<double>(rss_after - rss_before) / kTunnels;
  std::cout << "[figures] idle direct tunnels: " << kTunnels << " tunnels, h2gate VmRSS "
            << rss_before / 1024.0 << " -> " << rss_after / 1024.0 << " MiB, " << per_tunnel
            << " KiB per idle tunnel (app side and destination side together)\n";
  INFO("h2gate VmRSS " << rss_before << " KiB -> " << rss_after << " KiB; " << per_tunnel
                       << " KiB per idle tunnel");
  CHECK(rss_before > 0);
  if (gate.sanitized()) {
    WARN("memory bound not checked under AddressSanitizer");
  } else {
    // A 64 KiB read buffer on either side would show as > 64 KiB per tunnel.
    CHECK(per_tunnel < 16.0);
  }

  // The tunnels are alive and work: the last and the first carry another request.
  for (RawConnection* c : {tunnels.back().get(), tunnels.front().get()}) {
    REQUIRE(c->send("GET /1k HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    const HttpResponse r = c->readResponse(milliseconds(5000));
    CHECK(r.status == 200);
    CHECK(r.body.size() == 1024);
  }
}
