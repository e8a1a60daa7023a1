// stream_idle_timeout: an absolute-form request whose body stalls (the app
// announced 100 bytes and sends fewer), or whose response body stalls (the
// origin announced 100 bytes and sends 10), is ended once nothing has moved
// either way for the listener's stream_idle_timeout, instead of holding the
// app and origin connections (and a max_connections slot) for ever. Bodies
// that keep moving, however slowly, are not cut.
#include <catch2/catch.hpp>

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "tests/support/h2_env.h"
#include "tests/support/h2gate.h"
#include "tests/support/net.h"
#include "tests/support/origin.h"
#include "tests/support/scrape.h"
#include "tests/support/upstream_proxies.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

H2gate::Options idleGateOptions(const std::string& listener_fields) {
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  o.yaml = directModeYaml("", listener_fields);
  o.args = {"--log-level", "debug"};
  return o;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The last access log line with this status (empty when none within the timeout).
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

// An origin that answers every request with a head announcing 100 body
// bytes (or, with `close_delimited`, no length at all), sends `sent` of them
// and then nothing, until the peer closes. Counts the peers that closed.
struct StallingOrigin {
  explicit StallingOrigin(size_t sent, bool close_delimited = false)
      : server([this, sent, close_delimited](int fd) {
          std::string head;
          char c;
          while (head.find("\r\n\r\n") == std::string::npos && ::recv(fd, &c, 1, 0) == 1) head += c;
          TcpServer::writeAll(fd, std::string("HTTP/1.1 200 OK\r\n") +
                                      (close_delimited ? "" : "Content-Length: 100\r\n") +
                                      "Content-Type: text/plain\r\n\r\n" + std::string(sent, 'x'));
          TcpServer::readUntilEof(fd, milliseconds(60000));
          ++closed_by_peer;
        }) {}
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server.port()) + "/"; }
  std::atomic<int> closed_by_peer{0};
  TcpServer server;
};

}  // namespace

TEST_CASE("stream_idle_timeout: a request body that stalls gets 408", "[limits][stream_idle]") {
  Nginx nginx;
  H2gate gate(idleGateOptions("    stream_idle_timeout: 1s\n    max_connections: 1\n"));
  const std::string origin = "127.0.0.1:" + std::to_string(nginx.httpPort());
  const std::string head = "POST http://" + origin + "/upload HTTP/1.1\r\nHost: " + origin +
                           "\r\nContent-Length: 100\r\n\r\n";
  const std::string sent = GENERATE(as<std::string>{}, "", "0123456789");
  INFO("body bytes sent of 100: " << sent.size());

  RawConnection app(gate.port());
  REQUIRE(app.send(head + sent));
  const auto start = Clock::now();
  const HttpResponse r = app.readResponse(milliseconds(5000));
  const double secs = secondsSince(start);
  INFO(r.raw << "\n" << gate.process().logTail(20));
  CHECK(r.status == 408);
  CHECK(secs >= 0.9);
  CHECK(secs < 2.5);
  CHECK(contains(r.body, "request body stalled"));
  CHECK(contains(r.body, "stream_idle_timeout"));
  CHECK(r.header("Connection") == "close");
  CHECK(app.waitForClose(milliseconds(3000)));

  const AccessLogEntry e = lastWithStatus(gate, 408);
  INFO(e.line);
  CHECK(e.get("result") == "stream_idle_timeout");
  // The origin's side was closed too: nginx logs the POST when its
  // connection ends (else only after its own 60 s client_body_timeout).
  bool origin_done = false;
  for (int i = 0; i < 60 && !origin_done; ++i) {
    origin_done = contains(nginx.accessLog(), "POST /upload");
    if (!origin_done) std::this_thread::sleep_for(milliseconds(50));
  }
  CHECK(origin_done);

  // The max_connections slot came back: a new app is served.
  std::string status;
  for (int i = 0; i < 60 && status != "200"; ++i) {
    status = runCurl({"-sS", "-x", gate.proxyUrl(), "-o", "/dev/null", "-w", "%{http_code}",
                      nginx.httpUrl("/1k")},
                     milliseconds(5000))
                 .out;
    if (status != "200") std::this_thread::sleep_for(milliseconds(100));
  }
  CHECK(status == "200");

  const Scrape s = scrapeMetrics(gate.adminPort());
  CHECK(s.sum("h2gate_requests_finished_total", {{"result", "stream_idle_timeout"}}) == 1);
  CHECK(s.sum("h2gate_downstream_errors_total", {{"status", "408"}}) == 1);
}

TEST_CASE("stream_idle_timeout: a response body that stalls ends the app connection",
          "[limits][stream_idle]") {
  H2gate gate(idleGateOptions("    stream_idle_timeout: 1s\n"));

  SECTION("Content-Length 100, 10 sent: curl sees an incomplete transfer, the origin a close") {
    StallingOrigin origin(10);
    // The origin as curl sees it without h2gate: 10 bytes, then nothing.
    const auto direct = runCurl(
        {"-sS", "--max-time", "1", "-o", "/dev/null", "-w", "%{size_download}", origin.url()},
        milliseconds(5000));
    REQUIRE(direct.exit_code == 28);  // timed out
    REQUIRE(direct.out == "10");

    const auto start = Clock::now();
    const auto r = runCurl({"-sS", "-x", gate.proxyUrl(), "--max-time", "10", "-o", "/dev/null",
                            "-w", "%{http_code} %{size_download}", origin.url()},
                           milliseconds(15000));
    const double secs = secondsSince(start);
    INFO(r.out << " " << r.err << "\n" << gate.process().logTail(20));
    CHECK(r.exit_code != 0);
    CHECK(r.exit_code != 28);  // h2gate ended it, not curl's --max-time
    CHECK(r.out == "200 10");
    CHECK(secs >= 0.9);
    CHECK(secs < 2.5);
    for (int i = 0; i < 100 && origin.closed_by_peer < 2; ++i)
      std::this_thread::sleep_for(milliseconds(20));
    CHECK(origin.closed_by_peer == 2);  // curl's direct try, and h2gate's

    const AccessLogEntry e = lastWithStatus(gate, 200);
    INFO(e.line);
    CHECK(e.get("result") == "stream_idle_timeout");
    CHECK(contains(e.get("reason"), "stalled"));
    CHECK(e.num("bytes_down") == 10);
    const Scrape s = scrapeMetrics(gate.adminPort());
    CHECK(s.sum("h2gate_requests_finished_total", {{"result", "stream_idle_timeout"}}) == 1);
  }

  SECTION("no length (close-delimited) to an HTTP/1.0 app: a reset, not a clean end") {
    // A FIN would tell an HTTP/1.0 app the body is complete: h2gate resets.
    StallingOrigin origin(10, /*close_delimited=*/true);
    const auto r = runCurl({"-sS", "--http1.0", "-x", gate.proxyUrl(), "--max-time", "10", "-o",
                            "/dev/null", "-w", "%{http_code} %{size_download}", origin.url()},
                           milliseconds(15000));
    INFO(r.out << " " << r.err << "\n" << gate.process().logTail(20));
    CHECK(r.exit_code == 56);  // failure receiving: connection reset
    CHECK(r.out == "200 10");
  }

  SECTION("no response head at all, stream_idle_timeout shorter than connect_response_timeout") {
    TcpServer silent([](int fd) { TcpServer::readUntilEof(fd, milliseconds(30000)); });
    RawConnection app(gate.port());
    const std::string target = "127.0.0.1:" + std::to_string(silent.port());
    REQUIRE(app.send("GET http://" + target + "/ HTTP/1.1\r\nHost: " + target + "\r\n\r\n"));
    const auto start = Clock::now();
    const HttpResponse r = app.readResponse(milliseconds(5000));
    INFO(r.raw);
    CHECK(r.status == 504);
    CHECK(secondsSince(start) < 2.5);
    CHECK(contains(r.body, "stream_idle_timeout"));
  }
}

TEST_CASE("stream_idle_timeout: bodies that keep moving are not cut", "[limits][stream_idle]") {
  H2gate gate(idleGateOptions("    stream_idle_timeout: 1s\n"));

  SECTION("a request body trickling in every 300 ms for 3 s") {
    Nginx nginx;
    const std::string origin = "127.0.0.1:" + std::to_string(nginx.httpPort());
    RawConnection app(gate.port());
    REQUIRE(app.send("POST http://" + origin + "/upload HTTP/1.1\r\nHost: " + origin +
                     "\r\nContent-Length: 10\r\n\r\n"));
    for (int i = 0; i < 10; ++i) {
      std::this_thread::sleep_for(milliseconds(300));
      REQUIRE(app.send(std::string(1, static_cast<char>('0' + i))));
    }
    const HttpResponse r = app.readResponse(milliseconds(5000));
    INFO(r.raw << "\n" << gate.process().logTail(20));
    CHECK(r.status == 200);
    CHECK(contains(r.body, " 10\n"));  // the sink got all 10 bytes
  }

  SECTION("a response body arriving every 300 ms for 3 s") {
    TcpServer slow([](int fd) {
      std::string head;
      char c;
      while (head.find("\r\n\r\n") == std::string::npos && ::recv(fd, &c, 1, 0) == 1) head += c;
      if (!TcpServer::writeAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n")) return;
      for (int i = 0; i < 10; ++i) {
        std::this_thread::sleep_for(milliseconds(300));
        if (!TcpServer::writeAll(fd, "y")) return;
      }
      TcpServer::readUntilEof(fd, milliseconds(10000));
    });
    const auto r = runCurl({"-sS", "-x", gate.proxyUrl(), "-w", "\n%{http_code}",
                            "http://127.0.0.1:" + std::to_string(slow.port()) + "/"},
                           milliseconds(10000));
    INFO(r.err << "\n" << gate.process().logTail(20));
    CHECK(r.exit_code == 0);
    CHECK(r.out == "yyyyyyyyyy\n200");
  }
}

TEST_CASE("stream_idle_timeout through an h2 upstream proxy: a stalled request body gets 408",
          "[limits][stream_idle][upstream]") {
  H2Env env;
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  o.yaml = upstreamModeYaml(env.nghttpx.port(), env.ca.caCertPath());
  o.yaml.replace(o.yaml.find("    filter_chains:"), 0, "    stream_idle_timeout: 1s\n");
  o.args = {"--log-level", "debug"};
  env.gate = std::make_unique<H2gate>(std::move(o));
  env.waitConnected();
  H2gate& gate = *env.gate;
  const std::string origin = "127.0.0.1:" + std::to_string(env.nginx.httpPort());

  RawConnection app(gate.port());
  REQUIRE(app.send("POST http://" + origin + "/upload HTTP/1.1\r\nHost: " + origin +
                   "\r\nContent-Length: 100\r\n\r\n0123456789"));
  const auto start = Clock::now();
  const HttpResponse r = app.readResponse(milliseconds(5000));
  const double secs = secondsSince(start);
  INFO(r.raw << "\n" << gate.process().logTail(20));
  CHECK(r.status == 408);
  CHECK(secs >= 0.9);
  CHECK(secs < 2.5);
  CHECK(contains(r.body, "stream_idle_timeout"));
  const AccessLogEntry e = lastWithStatus(gate, 408);
  INFO(e.line);
  CHECK(e.get("result") == "stream_idle_timeout");
  CHECK(e.get("protocol") == "h2");
  // The h2 stream was reset, and the abort went down the chain (nghttpx,
  // squid): nginx logs the POST when its connection ends.
  bool origin_done = false;
  for (int i = 0; i < 100 && !origin_done; ++i) {
    origin_done = contains(env.nginx.accessLog(), "POST /upload");
    if (!origin_done) std::this_thread::sleep_for(milliseconds(50));
  }
  CHECK(origin_done);
  // The h2 connection itself goes on serving.
  const auto next = env.curl({"-o", "/dev/null", "-w", "%{http_code}", env.nginx.httpUrl("/1k")},
                             milliseconds(10000));
  CHECK(next.out == "200");
}
