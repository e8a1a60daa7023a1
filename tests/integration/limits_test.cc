// App-side limits and timeouts: a head that trickles in (slowloris), idle
// keep-alive connections and tunnels, a proxy that never answers a CONNECT,
// max_connections, many idle app connections at once, and an app that never
// reads what it asked for.
#include <catch2/catch.hpp>

#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/h2gate.h"
#include "tests/support/net.h"
#include "tests/support/origin.h"
#include "tests/support/scrape.h"
#include "tests/support/upstream_proxies.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

// Direct mode with `listener_fields` (indented 4) on listener "local_proxy".
H2gate::Options limitsGateOptions(const std::string& listener_fields = "") {
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  o.yaml = directModeYaml("", listener_fields);
  o.args = {"--log-level", "debug"};
  return o;
}

std::string port(uint16_t p) {
  return std::to_string(p);
}

std::string get(uint16_t origin_port, const std::string& path) {
  const std::string origin = "127.0.0.1:" + port(origin_port);
  return "GET http://" + origin + path + " HTTP/1.1\r\nHost: " + origin + "\r\n\r\n";
}

std::string connectRequest(const std::string& target) {
  return "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n";
}

// CONNECTs to 127.0.0.1:port through h2gate; REQUIREs a 200.
std::unique_ptr<RawConnection> openTunnel(H2gate& gate, uint16_t to) {
  auto c = std::make_unique<RawConnection>(gate.port());
  REQUIRE(c->send(connectRequest("127.0.0.1:" + port(to))));
  auto r = c->readResponse(milliseconds(5000), /*head_only=*/true);
  REQUIRE(r.status == 200);
  return c;
}

// Sends `text` one byte a second until h2gate closes the connection (or the
// text runs out). Returns when the connection was closed, or nullopt.
std::optional<Clock::time_point> trickle(RawConnection& c, const std::string& text) {
  for (char ch : text) {
    c.send(std::string(1, ch), milliseconds(1000));  // fails once h2gate closed
    if (c.waitForClose(milliseconds(1000))) return Clock::now();
  }
  return std::nullopt;
}

// The last access log line with this status (empty when none).
AccessLogEntry lastWithStatus(H2gate& gate, int status, milliseconds timeout = milliseconds(3000)) {
  const auto deadline = Clock::now() + timeout;
  do {
    const auto lines = gate.accessLog();
    for (auto it = lines.rbegin(); it != lines.rend(); ++it)
      if (it->num("status") == status) return *it;
    std::this_thread::sleep_for(milliseconds(50));
  } while (Clock::now() < deadline);
  return {};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Raises this process's open-file soft limit to at least `want` (up to the
// hard limit). Returns the soft limit now in force.
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

}  // namespace

TEST_CASE("request_headers_timeout: a head trickling in one byte a second gets 408",
          "[limits][request]") {
  Nginx nginx;
  H2gate gate(limitsGateOptions("    request_headers_timeout: 2s\n    idle_timeout: 4s\n"));
  TcpServer origin(TcpServer::replyAfterEof(""));  // never asked: the head never completes
  const std::string head = "GET http://127.0.0.1:" + port(origin.port()) +
                           "/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + std::string(30, 'a');

  SECTION("the first request: timed from the accept, although bytes keep coming") {
    RawConnection c(gate.port());
    const auto start = Clock::now();
    auto closed = trickle(c, head);
    REQUIRE(closed);
    const double secs = std::chrono::duration<double>(*closed - start).count();
    CHECK(secs >= 1.9);
    CHECK(secs <= 3.0);
    auto r = c.readResponse(milliseconds(100));
    INFO(r.raw);
    CHECK(r.status == 408);
    CHECK(contains(r.body, "request_headers_timeout"));
    CHECK(contains(lower(r.header("Connection").value_or("")), "close"));
    const AccessLogEntry e = lastWithStatus(gate, 408);
    CHECK(e.get("result") == "bad_request");
  }

  SECTION("a later request: idle_timeout between requests, then 2 s from its first byte") {
    RawConnection c(gate.port());
    REQUIRE(c.send(get(nginx.httpPort(), "/1k")));
    auto ok = c.readResponse(milliseconds(5000));
    REQUIRE(ok.status == 200);
    // Idle for longer than request_headers_timeout: still open (idle_timeout 4 s).
    CHECK_FALSE(c.waitForClose(milliseconds(3000)));
    const auto first_byte = Clock::now();
    auto closed = trickle(c, head);
    REQUIRE(closed);
    const double secs = std::chrono::duration<double>(*closed - first_byte).count();
    CHECK(secs >= 1.9);
    CHECK(secs <= 3.0);
    CHECK(c.readResponse(milliseconds(100)).status == 408);
  }

  SECTION("an idle keep-alive connection is closed at idle_timeout, without a reply") {
    RawConnection c(gate.port());
    REQUIRE(c.send(get(nginx.httpPort(), "/1k")));
    REQUIRE(c.readResponse(milliseconds(5000)).status == 200);
    const auto idle_since = Clock::now();
    REQUIRE(c.waitForClose(milliseconds(6000)));
    const double secs = secondsSince(idle_since);
    CHECK(secs >= 3.9);
    CHECK(secs <= 5.0);
    CHECK(c.readUntilClose(milliseconds(100)).empty());
  }

  SECTION("a connection that sends nothing is closed at request_headers_timeout, silently") {
    RawConnection c(gate.port());
    const auto start = Clock::now();
    REQUIRE(c.waitForClose(milliseconds(4000)));
    const double secs = secondsSince(start);
    CHECK(secs >= 1.9);
    CHECK(secs <= 3.0);
    CHECK(c.readUntilClose(milliseconds(100)).empty());
  }

  // h2gate still serves.
  RawConnection fresh(gate.port());
  REQUIRE(fresh.send(get(nginx.httpPort(), "/1k")));
  const auto r = fresh.readResponse(milliseconds(5000));
  INFO(r.raw.substr(0, 400) << "\n--- h2gate's log:\n" << gate.stderrText());
  CHECK(r.status == 200);
}

TEST_CASE("tunnel_idle_timeout: a silent tunnel is closed, a busy one stays open",
          "[limits][tunnel]") {
  H2gate gate(limitsGateOptions("    tunnel_idle_timeout: 1s\n"));

  SECTION("no traffic either way: closed after ~1 s, both sides, as a normal end") {
    std::atomic<bool> server_saw_eof{false};
    TcpServer server([&](int fd) {
      TcpServer::readUntilEof(fd, milliseconds(10000));
      server_saw_eof = true;
    });
    auto c = openTunnel(gate, server.port());
    const auto start = Clock::now();
    REQUIRE(c->waitForClose(milliseconds(4000)));
    const double secs = secondsSince(start);
    CHECK(secs >= 0.9);
    CHECK(secs <= 2.0);
    for (int i = 0; i < 100 && !server_saw_eof; ++i) std::this_thread::sleep_for(milliseconds(20));
    CHECK(server_saw_eof);  // the destination side was closed too

    const AccessLogEntry e = lastWithStatus(gate, 200);
    INFO(e.line);
    CHECK(e.get("result") == "ok");
    CHECK(contains(e.get("reason"), "tunnel_idle_timeout"));
    CHECK(gate.process().waitForLog("info .*tunnel to 127\\.0\\.0\\.1:[0-9]+ idle for [0-9.]+s",
                                    milliseconds(2000)));
  }

  SECTION("the app sends every 300 ms: open for 3 s") {
    std::atomic<size_t> received{0};
    TcpServer server([&](int fd) {
      char buf[256];
      ssize_t n;
      while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) received += static_cast<size_t>(n);
    });
    auto c = openTunnel(gate, server.port());
    for (int i = 0; i < 10; ++i) {
      REQUIRE(c->send("ping"));
      CHECK_FALSE(c->waitForClose(milliseconds(300)));
    }
    for (int i = 0; i < 100 && received < 40; ++i) std::this_thread::sleep_for(milliseconds(10));
    CHECK(received == 40);
    // Then silence closes it.
    CHECK(c->waitForClose(milliseconds(3000)));
  }

  SECTION("the destination sends every 300 ms: open for 3 s") {
    TcpServer server([](int fd) {
      for (int i = 0; i < 10; ++i) {
        if (!TcpServer::writeAll(fd, "tick")) return;
        std::this_thread::sleep_for(milliseconds(300));
      }
      TcpServer::readUntilEof(fd, milliseconds(10000));
    });
    auto c = openTunnel(gate, server.port());
    std::string got, want;
    for (int i = 0; i < 10; ++i) {
      got += c->readExactly(4, milliseconds(1000));
      want += "tick";
    }
    CHECK(got == want);
    CHECK_FALSE(c->eof());
    CHECK(c->waitForClose(milliseconds(3000)));
  }
}

TEST_CASE("timeouts near the largest duration mean never, not an overflow into the past",
          "[limits][tunnel]") {
  const std::string huge = "9223372035s";  // ~292 years: now + it overflows steady_clock
  H2gate gate(limitsGateOptions("    request_headers_timeout: " + huge +
                                "\n    tunnel_idle_timeout: " + huge +
                                "\n    connect_response_timeout: " + huge + "\n"));
  TcpServer server(TcpServer::echo());
  RawConnection silent(gate.port());
  auto tunnel = openTunnel(gate, server.port());
  CHECK_FALSE(tunnel->waitForClose(milliseconds(1500)));
  CHECK_FALSE(silent.waitForClose(milliseconds(100)));
  REQUIRE(tunnel->send("still here"));
  CHECK(tunnel->readExactly(10, milliseconds(3000)) == "still here");
}

TEST_CASE("connect_response_timeout: no answer in time gives 504 and aborts the tunnel",
          "[limits]") {
  SECTION("an upstream proxy that accepts and never answers the CONNECT") {
    std::atomic<int> closed_by_gate{0};
    TcpServer proxy([&](int fd) {
      TcpServer::readUntilEof(fd, milliseconds(30000));  // reads the CONNECT, never answers
      ++closed_by_gate;
    });
    const std::string yaml =
        "admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}\n"
        "static_resources:\n"
        "  listeners:\n"
        "  - name: local_proxy\n"
        "    address: {socket_address: {address: 127.0.0.1, port_value: 0}}\n"
        "    connect_response_timeout: 1s\n"
        "    filter_chains:\n"
        "    - filters:\n"
        "      - name: h2gate.filters.access_log\n"
        "      - name: h2gate.filters.forward_proxy\n"
        "        typed_config: {cluster: proxy}\n"
        "  clusters:\n"
        "  - name: proxy\n"
        "    connect_timeout: 5s\n"
        "    load_assignment:\n"
        "      endpoints:\n"
        "      - lb_endpoints:\n"
        "        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: " +
        port(proxy.port()) + "}}}\n";
    H2gate::Options o;
    o.binary = H2GATE_BINARY;
    o.yaml = yaml;
    o.args = {"--log-level", "debug"};
    H2gate gate(o);

    for (const bool connect : {true, false}) {
      INFO((connect ? "CONNECT" : "absolute-form GET"));
      RawConnection c(gate.port());
      const auto start = Clock::now();
      REQUIRE(c.send(connect ? connectRequest("origin.test:443")
                             : std::string("GET http://origin.test/ HTTP/1.1\r\n"
                                           "Host: origin.test\r\n\r\n")));
      auto r = c.readResponse(milliseconds(5000));
      const double secs = secondsSince(start);
      INFO(r.raw);
      CHECK(r.status == 504);
      CHECK(secs >= 0.9);
      CHECK(secs <= 2.0);
      CHECK(contains(r.body, "connect_response_timeout"));
      CHECK(contains(r.body, "cluster 'proxy'"));
      CHECK(contains(r.body, connect ? "no answer to CONNECT origin.test:443"
                                     : "no response from origin.test:80"));
      CHECK(c.waitForClose(milliseconds(3000)));
      const AccessLogEntry e = lastWithStatus(gate, 504);
      INFO(e.line);
      CHECK(e.get("result") == "connect_timeout");
    }
    // Aborted: h2gate dropped its connections to the silent proxy.
    for (int i = 0; i < 150 && closed_by_gate < 2; ++i)
      std::this_thread::sleep_for(milliseconds(20));
    CHECK(closed_by_gate >= 2);
  }

  SECTION("direct mode: a destination that never completes the TCP handshake") {
    BlackholeListener hole;
    if (!hole.verify()) {
      WARN("SYN blackhole does not work on this kernel: skipped");
      return;
    }
    // direct_connect_timeout (10 s) would answer later; this one is first.
    H2gate gate(limitsGateOptions("    connect_response_timeout: 1s\n"));
    RawConnection c(gate.port());
    const auto start = Clock::now();
    REQUIRE(c.send(connectRequest("127.0.0.1:" + port(hole.port()))));
    auto r = c.readResponse(milliseconds(5000));
    const double secs = secondsSince(start);
    INFO(r.raw);
    CHECK(r.status == 504);
    CHECK(secs <= 2.0);
    CHECK(contains(r.body, "could not connect to 127.0.0.1:" + port(hole.port()) + " within 1s"));
  }
}

TEST_CASE("max_connections: beyond it 503 and close; served again once some close", "[limits]") {
  Nginx nginx;
  H2gate gate(limitsGateOptions("    max_connections: 5\n"));
  std::vector<std::unique_ptr<RawConnection>> open;
  for (int i = 0; i < 5; ++i) {
    open.push_back(std::make_unique<RawConnection>(gate.port()));
    REQUIRE(open.back()->send(get(nginx.httpPort(), "/1k")));
    REQUIRE(open.back()->readResponse(milliseconds(5000)).status == 200);  // kept alive
  }

  for (int i = 0; i < 3; ++i) {
    RawConnection sixth(gate.port());
    REQUIRE(sixth.send(get(nginx.httpPort(), "/1k")));
    auto r = sixth.readResponse(milliseconds(5000));
    INFO(r.raw);
    CHECK(r.status == 503);
    CHECK(lower(r.header("Connection").value_or("")) == "close");
    CHECK(contains(r.body, "max_connections 5"));
    CHECK(std::count(r.body.begin(), r.body.end(), '\n') == 1);  // one line
    CHECK(sixth.waitForClose(milliseconds(3000)));
  }
  // The five are untouched.
  REQUIRE(open[0]->send(get(nginx.httpPort(), "/1k")));
  CHECK(open[0]->readResponse(milliseconds(5000)).status == 200);

  // Two close: two new ones are served (the slot comes back when h2gate
  // sees the close).
  open[1].reset();
  open[2].reset();
  for (int n = 0; n < 2; ++n) {
    int status = 0;
    const auto deadline = Clock::now() + milliseconds(3000);
    while (Clock::now() < deadline) {
      auto c = std::make_unique<RawConnection>(gate.port());
      REQUIRE(c->send(get(nginx.httpPort(), "/1k")));
      status = c->readResponse(milliseconds(5000)).status;
      if (status == 200) {
        open.push_back(std::move(c));
        break;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    CHECK(status == 200);
  }

  const Scrape s = scrapeMetrics(gate.adminPort());
  CHECK(s.sum("h2gate_downstream_errors_total", {{"listener", "local_proxy"}, {"status", "503"}}) >=
        3);
  CHECK(gate.process().waitForLog("warn .*listener local_proxy is at max_connections \\(5\\)",
                                  milliseconds(1000)));
}

TEST_CASE("max_connections across a reload: open connections still count, the new limit applies",
          "[limits][reload]") {
  Nginx nginx;
  H2gate gate(limitsGateOptions("    max_connections: 3\n"));
  auto served = [&](RawConnection& c) {
    REQUIRE(c.send(get(nginx.httpPort(), "/1k")));
    return c.readResponse(milliseconds(5000)).status;
  };
  std::vector<std::unique_ptr<RawConnection>> open;
  for (int i = 0; i < 3; ++i) {
    open.push_back(std::make_unique<RawConnection>(gate.port()));
    REQUIRE(served(*open.back()) == 200);
  }
  {
    RawConnection fourth(gate.port());
    CHECK(served(fourth) == 503);
  }
  gate.writeFile("h2gate.yaml", directModeYaml("", "    max_connections: 4\n"));
  const AdminReply post = adminPost(gate.adminPort(), "/reload");
  INFO(post.body << gate.process().logTail(20));
  REQUIRE(post.status == 200);
  // The three from before count against the new limit: one more fits.
  open.push_back(std::make_unique<RawConnection>(gate.port()));
  CHECK(served(*open.back()) == 200);
  RawConnection fifth(gate.port());
  CHECK(served(fifth) == 503);
}

TEST_CASE("1,000 idle app connections do not keep a new app from being served", "[limits][many]") {
  constexpr int kIdle = 1000;
  const rlim_t limit = ensureFdLimit(2 * kIdle + 256);
  if (limit < rlim_t{kIdle} + 100) {
    WARN("open-file limit " << limit << " too low for " << kIdle << " connections: skipped");
    return;
  }
  Nginx nginx;
  // A long head timeout keeps the idle ones open for the whole test.
  H2gate gate(limitsGateOptions("    request_headers_timeout: 60s\n"));
  // h2gate raised its own limit at start.
  CHECK(gate.process().waitForLog("open-file limit \\(RLIMIT_NOFILE\\) (is|raised)",
                                  milliseconds(1000)));

  const long rss_before = procStatusKiB(gate.process().pid(), "VmRSS");
  std::vector<std::unique_ptr<RawConnection>> idle;
  idle.reserve(kIdle);
  for (int i = 0; i < kIdle; ++i) idle.push_back(std::make_unique<RawConnection>(gate.port()));
  // All accepted (and still open: well within request_headers_timeout).
  size_t active = 0;
  for (int i = 0; i < 100 && active < static_cast<size_t>(kIdle); ++i) {
    const AdminReply info = adminGet(gate.adminPort(), "/server_info");
    if (auto m = regexSearch(info.body, "\"active_connections\":([0-9]+)"))
      active = std::stoul((*m)[1]);
    if (active < static_cast<size_t>(kIdle)) std::this_thread::sleep_for(milliseconds(20));
  }
  CHECK(active >= static_cast<size_t>(kIdle));
  // An idle connection holds no read buffer: 1,000 of them cost a few MiB,
  // not 1,000 x 64 KiB.
  const long rss_idle = procStatusKiB(gate.process().pid(), "VmRSS");
  INFO("h2gate VmRSS " << rss_before << " KiB -> " << rss_idle << " KiB with " << kIdle
                       << " idle connections");
  CHECK(rss_idle - rss_before < 16 * 1024);

  const TestFile& f = testFile("1m");
  auto r = runCurl({"-sS", "-x", gate.proxyUrl(), "-o", "/dev/null", "-w",
                    "%{http_code} %{size_download}", nginx.httpUrl("/1m")},
                   milliseconds(8000));
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "200 " + std::to_string(f.size));
  // The same with a CONNECT tunnel (TLS to nginx).
  auto t = runCurl({"-sS", "-x", gate.proxyUrl(), "--cacert", nginx.caCertPath(), "-o", "/dev/null",
                    "-w", "%{http_code} %{size_download}", nginx.httpsUrl("/1m")},
                   milliseconds(8000));
  INFO(t.err);
  CHECK(t.exit_code == 0);
  CHECK(t.out == "200 " + std::to_string(f.size));
  CHECK_FALSE(idle.back()->waitForClose(milliseconds(1)));
}

TEST_CASE("an app that never reads its download: h2gate's memory stays bounded",
          "[limits][direct][slow]") {
  constexpr size_t kFlood = 200u << 20;  // what the destination tries to push
  std::atomic<size_t> pushed{0};
  std::atomic<bool> stalled{false};
  TcpServer flood([&](int fd) {
    const std::string chunk(64 * 1024, 'x');
    while (pushed < kFlood) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 2000) <= 0) {  // no room for 2 s: backpressure reached us
        stalled = true;
        break;
      }
      const ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) pushed += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) break;
    }
    TcpServer::readUntilEof(fd, milliseconds(30000));
  });

  H2gate gate(limitsGateOptions());
  const pid_t pid = gate.process().pid();
  TcpServer echo(TcpServer::echo());
  {
    // One tunnel's worth of allocations (buffers, the access log) before the baseline.
    auto warmup = openTunnel(gate, echo.port());
    const std::string data = patternBytes(1 << 20);
    std::thread writer([&] { warmup->send(data, milliseconds(10000)); });
    CHECK(warmup->readExactly(data.size(), milliseconds(10000)).size() == data.size());
    writer.join();
  }
  std::this_thread::sleep_for(milliseconds(200));
  const long rss_before = procStatusKiB(pid, "VmRSS");

  auto app = openTunnel(gate, flood.port());  // and never read
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline && !stalled && pushed < kFlood)
    std::this_thread::sleep_for(milliseconds(50));
  REQUIRE(stalled);
  const long rss_after = procStatusKiB(pid, "VmRSS");
  std::cout << "[figures] never-reading app: destination pushed " << pushed / (1024.0 * 1024.0)
            << " MiB of " << kFlood / (1024 * 1024) << " MiB; h2gate VmRSS " << rss_before / 1024.0
            << " -> " << rss_after / 1024.0 << " MiB\n";
  CHECK(pushed < kFlood);
  CHECK(rss_before > 0);
  if (gate.sanitized()) {
    WARN("memory bound not checked under AddressSanitizer");
  } else {
    CHECK(rss_after - rss_before < 16 * 1024);
  }
  // The stuck tunnel does not hold up others.
  auto other = openTunnel(gate, echo.port());
  REQUIRE(other->send("still serving"));
  CHECK(other->readExactly(13, milliseconds(3000)) == "still serving");
}
