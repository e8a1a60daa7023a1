// How h2gate (direct mode) answers requests it cannot or must not pass on,
// what it forwards of the rest, and the errors it gives when the destination
// fails. Requests are written by hand (RawConnection) where curl would not
// send them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <string>

#include "tests/support/h2gate.h"
#include "tests/support/net.h"
#include "tests/support/origin.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

H2gate::Options requestGateOptions() {
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  return o;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string get(const Nginx& nginx, const std::string& path, const std::string& headers = "") {
  std::string origin = "127.0.0.1:" + std::to_string(nginx.httpPort());
  return "GET http://" + origin + path + " HTTP/1.1\r\nHost: " + origin + "\r\n" + headers + "\r\n";
}

// A fresh connection through h2gate still works.
void checkStillServing(H2gate& gate, const Nginx& nginx) {
  RawConnection c(gate.port());
  REQUIRE(c.send(get(nginx, "/1k")));
  auto r = c.readResponse(milliseconds(5000));
  CHECK(r.status == 200);
  CHECK(r.body.size() == 1024);
}

// An error h2gate made itself: a short text body, and when the connection
// cannot continue, "Connection: close" and an actual close.
void checkErrorResponse(RawConnection& c, const HttpResponse& r, bool must_close) {
  INFO("response: " << r.raw.substr(0, 2000));
  CHECK(r.body_complete);
  CHECK_FALSE(r.body.empty());
  CHECK(r.body.size() < 1024);
  if (auto ct = r.header("Content-Type")) CHECK(lower(*ct).find("text/") == 0);
  if (must_close) {
    CHECK(lower(r.header("Connection").value_or("")) == "close");
    CHECK(c.waitForClose(milliseconds(3000)));
  }
}

}  // namespace

TEST_CASE("bad requests get their status and h2gate keeps serving", "[direct][bad]") {
  Nginx nginx;
  H2gate gate(requestGateOptions());
  RawConnection c(gate.port());

  SECTION("request head over 64 KiB -> 431") {
    REQUIRE(c.send(get(nginx, "/1k", "X-Big: " + std::string(70 * 1024, 'a') + "\r\n")));
    auto r = c.readResponse(milliseconds(5000));
    CHECK(r.status == 431);
    checkErrorResponse(c, r, true);
  }
  SECTION("head over 64 KiB in many small headers -> 431") {
    std::string h;
    for (int i = 0; i < 90; ++i)
      h += "X-H" + std::to_string(i) + ": " + std::string(800, 'v') + "\r\n";
    REQUIRE(c.send(get(nginx, "/1k", h)));
    auto r = c.readResponse(milliseconds(5000));
    CHECK(r.status == 431);
    checkErrorResponse(c, r, true);
  }
  SECTION("a 32 KiB header is fine (the sink accepts long lines)") {
    std::string origin = "127.0.0.1:" + std::to_string(nginx.sinkPort());
    REQUIRE(c.send("GET http://" + origin + "/ HTTP/1.1\r\nHost: " + origin +
                   "\r\nX-Big: " + std::string(32 * 1024, 'a') + "\r\n\r\n"));
    auto r = c.readResponse(milliseconds(5000));
    CHECK(r.status == 200);
    CHECK(r.body.find(std::string(32 * 1024, 'a')) != std::string::npos);
  }
  SECTION("101 headers -> 431") {
    std::string h;
    for (int i = 0; i < 100; ++i) h += "X-H" + std::to_string(i) + ": v\r\n";
    REQUIRE(c.send(get(nginx, "/1k", h)));  // + Host = 101
    auto r = c.readResponse(milliseconds(5000));
    CHECK(r.status == 431);
    checkErrorResponse(c, r, true);
  }
  SECTION("exactly 100 headers are accepted") {
    std::string h;
    for (int i = 0; i < 99; ++i) h += "X-H" + std::to_string(i) + ": v\r\n";
    REQUIRE(c.send(get(nginx, "/1k", h)));  // + Host = 100
    auto r = c.readResponse(milliseconds(5000));
    CHECK(r.status == 200);
  }
  SECTION("garbage -> 400") {
    REQUIRE(c.send("\x01\x02\x03 garbage \xff\r\n\r\n"));
    auto r = c.readResponse(milliseconds(5000));
    CHECK(r.status == 400);
    checkErrorResponse(c, r, true);
  }
  SECTION("a header line without a colon -> 400") {
    REQUIRE(c.send(get(nginx, "/1k", "This is not a header\r\n")));
    auto r = c.readResponse(milliseconds(5000));
    CHECK(r.status == 400);
    checkErrorResponse(c, r, true);
  }
  SECTION("origin-form request -> 400 saying this is a proxy") {
    REQUIRE(c.send("GET /path HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(nginx.httpPort()) +
                   "\r\n\r\n"));
    auto r = c.readResponse(milliseconds(5000));
    CHECK(r.status == 400);
    CHECK(lower(r.body).find("proxy") != std::string::npos);
    checkErrorResponse(c, r, false);
  }
  SECTION("Expect: something-unsupported -> 417") {
    REQUIRE(c.send(get(nginx, "/1k", "Expect: something-unsupported\r\n")));
    auto r = c.readResponse(milliseconds(5000));
    CHECK(r.status == 417);
    checkErrorResponse(c, r, false);
  }
  SECTION("CONNECT without a port -> 400") {
    REQUIRE(c.send("CONNECT 127.0.0.1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    auto r = c.readResponse(milliseconds(5000));
    CHECK(r.status == 400);
    checkErrorResponse(c, r, false);
  }
  checkStillServing(gate, nginx);
  auto log = gate.waitForAccessLog(2, milliseconds(2000));
  CHECK_FALSE(log.empty());
}

TEST_CASE("hop-by-hop headers are not forwarded; Via is added", "[direct]") {
  Nginx nginx;
  H2gate gate(requestGateOptions());
  RawConnection c(gate.port());
  std::string origin = "127.0.0.1:" + std::to_string(nginx.sinkPort());
  REQUIRE(c.send("GET http://" + origin +
                 "/headers?q=1 HTTP/1.1\r\n"
                 "Host: " +
                 origin +
                 "\r\n"
                 "Proxy-Connection: keep-alive\r\n"
                 "Proxy-Authorization: Basic dXNlcjpzZWNyZXQ=\r\n"
                 "Connection: X-Foo, Keep-Alive\r\n"
                 "Keep-Alive: timeout=5\r\n"
                 "X-Foo: must-not-pass\r\n"
                 "X-Keep: yes\r\n"
                 "\r\n"));
  auto r = c.readResponse(milliseconds(5000));
  REQUIRE(r.status == 200);
  const std::string seen = r.body;  // request line + headers as the origin got them
  INFO("origin saw:\n" << seen);
  CHECK(seen.rfind("GET /headers?q=1 HTTP/1.1\n", 0) == 0);  // origin-form upstream
  const std::string l = lower(seen);
  CHECK(l.find("\nhost: " + origin + "\n") != std::string::npos);
  CHECK(l.find("\nx-keep: yes\n") != std::string::npos);
  CHECK(l.find("\nvia: ") != std::string::npos);
  CHECK(l.find("proxy-connection") == std::string::npos);
  CHECK(l.find("proxy-authorization") == std::string::npos);
  CHECK(l.find("x-foo") == std::string::npos);
  CHECK(l.find("\nkeep-alive:") == std::string::npos);
  CHECK(l.find("must-not-pass") == std::string::npos);

  // The same through nginx's own view (another origin implementation).
  REQUIRE(c.send(get(nginx, "/headers",
                     "Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eDp5\r\n"
                     "Connection: X-Foo\r\nX-Foo: must-not-pass\r\nX-Keep: yes\r\n")));
  auto n = c.readResponse(milliseconds(5000));
  REQUIRE(n.status == 200);
  INFO("nginx saw:\n" << n.body);
  CHECK(n.body.find("proxy-connection=\n") != std::string::npos);
  CHECK(n.body.find("proxy-authorization=\n") != std::string::npos);
  CHECK(n.body.find("x-foo=\n") != std::string::npos);
  CHECK(n.body.find("x-keep=yes\n") != std::string::npos);
  CHECK(n.body.find("via=\n") == std::string::npos);
}

TEST_CASE("destination failures: 502 and 504 with a reason", "[direct][failure]") {
  Nginx nginx;
  H2gate gate(requestGateOptions());

  SECTION("closed port, absolute-form -> 502") {
    uint16_t closed = freePort();
    auto r = runCurl({"-sS", "-x", gate.proxyUrl(), "-w", "\n%{http_code}",
                      "http://127.0.0.1:" + std::to_string(closed) + "/"});
    CHECK(r.exit_code == 0);
    CHECK(r.out.size() > 4);
    CHECK(r.out.substr(r.out.size() - 4) == "\n502");
    auto log = gate.waitForAccessLog(1);
    REQUIRE(log.size() == 1);
    CHECK(log[0].num("status") == 502);
    CHECK(log[0].get("result") == "connect_failed");
  }
  SECTION("closed port, CONNECT -> 502") {
    uint16_t closed = freePort();
    auto r = runCurl({"-sS", "-x", gate.proxyUrl(), "-w", "%{http_connect}", "-o", "/dev/null",
                      "https://127.0.0.1:" + std::to_string(closed) + "/"});
    CHECK(r.exit_code == 56);  // CONNECT tunnel failed
    CHECK(r.out == "502");
  }
  SECTION("DNS failure -> 502 with a reason in the body") {
    RawConnection c(gate.port());
    REQUIRE(
        c.send("GET http://no-such-host.invalid/ HTTP/1.1\r\nHost: no-such-host.invalid\r\n\r\n"));
    auto r = c.readResponse(milliseconds(15000));
    CHECK(r.status == 502);
    INFO("body: " << r.body);
    CHECK(r.body.find("no-such-host.invalid") != std::string::npos);
    auto log = gate.waitForAccessLog(1);
    REQUIRE(log.size() == 1);
    CHECK(log[0].get("result") == "dns_failed");
    CHECK_FALSE(log[0].get("reason").empty());
  }
  SECTION("connect timeout -> 504") {
    BlackholeListener hole;
    if (!hole.verify()) {
      WARN("SKIPPED: cannot make connects hang on this kernel");
      return;
    }
    // A gate of its own with a short listener direct_connect_timeout.
    H2gate::Options o = requestGateOptions();
    o.yaml = directModeYaml();
    o.yaml.replace(o.yaml.find("    filter_chains:"), 0, "    direct_connect_timeout: 1s\n");
    H2gate quick(o);
    RawConnection c(quick.port());
    std::string origin = "127.0.0.1:" + std::to_string(hole.port());
    const auto start = std::chrono::steady_clock::now();
    REQUIRE(c.send("GET http://" + origin + "/ HTTP/1.1\r\nHost: " + origin + "\r\n\r\n"));
    auto r = c.readResponse(milliseconds(10000));
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK(r.status == 504);
    CHECK_FALSE(r.body.empty());
    CHECK(took >= milliseconds(900));
    CHECK(took < milliseconds(5000));
    auto log = quick.waitForAccessLog(1);
    REQUIRE(log.size() == 1);
    CHECK(log[0].get("result") == "connect_timeout");
  }
  // Whatever failed, the next request works.
  RawConnection c(gate.port());
  REQUIRE(c.send(get(nginx, "/1k")));
  CHECK(c.readResponse(milliseconds(5000)).status == 200);
}
