// An absolute-form request offering a protocol upgrade (curl --http2's h2c
// offer, a WebSocket handshake sent to the proxy as GET http://…): h2gate
// declines it (Upgrade is hop-by-hop and goes no further), the origin
// answers a plain request, and the app's keep-alive connection carries its
// next request at once. Before, the next request waited 10 s for a 408.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/h2gate.h"
#include "tests/support/net.h"
#include "tests/support/origin.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

H2gate::Options upgradeGateOptions() {
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  return o;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("curl --http2 -x h2gate http://a http://b: the h2c offer is declined, both answered",
          "[direct][upgrade]") {
  Nginx nginx;
  H2gate gate(upgradeGateOptions());
  const std::string headers_url = nginx.httpUrl("/headers");
  const std::string file_url = nginx.httpUrl("/1k");

  // The same two URLs straight to nginx: curl offers h2c on the first (the
  // Upgrade header below proves it), nginx declines, both are answered on
  // one connection.
  const auto direct = runCurl({"-sS", "--http2", "-o", "/dev/null", "-o", "/dev/null", "-w",
                               "%{http_code} %{num_connects}\\n", headers_url, file_url},
                              milliseconds(10000));
  INFO("direct: " << direct.out << direct.err);
  REQUIRE(direct.exit_code == 0);
  REQUIRE(lines(direct.out) == std::vector<std::string>{"200 1", "200 0"});

  TempDir out("upgrade");
  const auto start = Clock::now();
  const auto r =
      runCurl({"-sS", "--http2", "-x", gate.proxyUrl(), "-v", "-o", out.file("headers"), "-o",
               out.file("1k"), "-w", "%{http_code} %{num_connects}\\n", headers_url, file_url},
              milliseconds(20000));
  const double secs = secondsSince(start);
  INFO("curl: " << r.out << "\n" << r.err << "\nh2gate:\n" << gate.process().logTail(20));
  CHECK(r.exit_code == 0);
  // Both answered, the second on the same app connection, without a wait.
  CHECK(lines(r.out) == std::vector<std::string>{"200 1", "200 0"});
  CHECK(secs < 3.0);
  // curl did offer the upgrade to h2gate.
  CHECK(lower(r.err).find("> upgrade: h2c") != std::string::npos);
  // The origin got no trace of it.
  const std::string seen = readFile(out.file("headers"));
  INFO("nginx saw:\n" << seen);
  CHECK(seen.find("upgrade=\n") != std::string::npos);
  for (const std::string& l : lines(seen))
    if (l.rfind("connection=", 0) == 0) CHECK(lower(l).find("upgrade") == std::string::npos);
  CHECK(readFile(out.file("1k")).size() == 1024);

  const auto log = gate.waitForAccessLog(2);
  REQUIRE(log.size() == 2);
  CHECK(log[0].num("status") == 200);
  CHECK(log[1].num("status") == 200);
}

TEST_CASE("raw requests offering Upgrade keep the connection usable: plain, with a body, pipelined",
          "[direct][upgrade]") {
  Nginx nginx;
  H2gate gate(upgradeGateOptions());
  const std::string origin = "127.0.0.1:" + std::to_string(nginx.httpPort());
  const std::string websocket =
      "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
  const std::string h2c =
      "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
      "HTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n";
  auto get = [&](const std::string& path, const std::string& extra) {
    return "GET http://" + origin + path + " HTTP/1.1\r\nHost: " + origin + "\r\n" + extra + "\r\n";
  };
  const std::string post = "POST http://" + origin + "/upload HTTP/1.1\r\nHost: " + origin +
                           "\r\nContent-Length: 5\r\n" + h2c + "\r\nhello";

  SECTION("one after the other") {
    RawConnection c(gate.port());
    const auto start = Clock::now();
    REQUIRE(c.send(get("/headers", websocket)));
    auto first = c.readResponse(milliseconds(5000));
    INFO(first.raw);
    REQUIRE(first.status == 200);
    CHECK(first.body.find("upgrade=\n") != std::string::npos);
    REQUIRE(c.send(post));
    auto second = c.readResponse(milliseconds(5000));
    INFO(second.raw);
    CHECK(second.status == 200);
    CHECK(second.body.find(" 5\n") != std::string::npos);  // "<sha256> 5": the body arrived
    REQUIRE(c.send(get("/1k", "")));
    auto third = c.readResponse(milliseconds(5000));
    CHECK(third.status == 200);
    CHECK(third.body.size() == 1024);
    CHECK(secondsSince(start) < 3.0);
    CHECK_FALSE(c.waitForClose(milliseconds(200)));  // still open for more
  }

  SECTION("pipelined in one write") {
    RawConnection c(gate.port());
    REQUIRE(c.send(get("/1k", h2c) + post + get("/headers", websocket)));
    for (int i = 0; i < 3; ++i) {
      auto r = c.readResponse(milliseconds(5000));
      INFO("response " << i << ": " << r.raw.substr(0, 300));
      CHECK(r.status == 200);
    }
  }
}
