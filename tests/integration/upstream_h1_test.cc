// h2gate in front of an HTTPS proxy that speaks only HTTP/1.1 (squid's
// https_port offers no ALPN): one TLS connection per CONNECT tunnel,
// keep-alive reuse for absolute-form requests. What is the same through an
// h2 proxy is in upstream_test.cc.
#include <catch2/catch.hpp>

#include <algorithm>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/upstream_env.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

TEST_CASE("h1: ALPN falls back to HTTP/1.1; CONNECT and absolute-form are byte-identical",
          "[upstream][h1]") {
  H1Env env;
  H2gate& gate = env.startGate();
  CHECK(gate.stderrText().find("negotiated h2") == std::string::npos);
  const TestFile& f = testFile("1m");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"GET", env.nginx.httpUrl("/1m")},
      {"CONNECT", env.nginx.httpsUrl("/1m")},
  };
  for (const auto& [method, url] : cases) {
    INFO(method << " " << url);
    auto r = env.curl({"-o", env.out.file("dl"), "-w", "%{http_code} %{size_download}", url});
    INFO(r.err << "\n" << gate.process().logTail(20));
    REQUIRE(r.exit_code == 0);
    CHECK(r.out == "200 " + str(f.size));
    CHECK(sha256File(env.out.file("dl")) == f.sha256);
  }
  // The GET's line (the CONNECT's comes when its tunnel ends: see the
  // "tunnel ends when the app closes" test).
  auto log = gate.waitForAccessLog(1);
  REQUIRE(!log.empty());
  INFO(log[0].line);
  CHECK(log[0].get("method") == "GET");
  CHECK(log[0].num("status") == 200);
  CHECK(log[0].get("protocol") == "http1");
  CHECK(log[0].get("upstream") == "127.0.0.1:" + str(env.squid.httpsPort()));
  CHECK(env.squid.waitForAccessLines(1, "GET", milliseconds(5000)).size() == 1);
}

TEST_CASE("h1: 5 parallel CONNECT tunnels use 5 TLS connections", "[upstream][h1]") {
  H1Env env;
  H2gate& gate = env.startGate();
  const TestFile& f = testFile("1m");
  // /slow/ serves at 512 KiB/s: each tunnel lasts ~2 s.
  std::vector<std::string> args{"--parallel",           "--parallel-max", "5",
                                "--parallel-immediate", "--http1.1",      "-w",
                                "%{http_code}\\n"};
  for (int i = 0; i < 5; ++i)
    args.insert(args.end(),
                {"-o", env.out.file("p" + str(i)), env.nginx.httpsUrl("/slow/1m?" + str(i))});
  const auto start = Clock::now();
  CommandResult r;
  std::thread t([&] { r = env.curl(args); });
  // Midway, count h2gate's established connections to squid's https_port.
  int peak = 0;
  while (secondsSince(start) < 1.8) {
    peak = std::max(peak, establishedTo(env.squid.httpsPort()));
    std::this_thread::sleep_for(milliseconds(100));
  }
  t.join();
  const double secs = secondsSince(start);
  std::cout << "[figures] h1: 5 parallel 2 s tunnels took " << secs << " s; peak " << peak
            << " connections to squid's https_port\n";
  INFO(r.err << "\n" << gate.process().logTail(20));
  REQUIRE(r.exit_code == 0);
  CHECK(countOccurrences(r.out, "200\n") == 5);
  for (int i = 0; i < 5; ++i) CHECK(sha256File(env.out.file("p" + str(i))) == f.sha256);
  CHECK(secs < 6.0);  // in parallel, not one after the other (~10 s)
  CHECK(peak >= 5);

  auto lines = env.squid.waitForAccessLines(5, "CONNECT", milliseconds(5000));
  CHECK(lines.size() == 5);
  const auto clients = env.squid.clients("CONNECT");
  INFO("squid CONNECT clients: " << join(clients));
  CHECK(clients.size() == 5);
  auto log = gate.waitForAccessLog(5);
  CHECK(log.size() == 5);
  for (const auto& e : log) CHECK(e.get("protocol") == "http1");
}

TEST_CASE("h1: sequential absolute-form requests reuse one keep-alive TLS connection",
          "[upstream][h1]") {
  H1Env env;
  H2gate& gate = env.startGate();
  const TestFile& f = testFile("1k");
  // Separate curl runs: separate app connections, one upstream connection.
  for (int i = 0; i < 4; ++i) {
    auto r = env.curl(
        {"-o", env.out.file("k"), "-w", "%{http_code}", env.nginx.httpUrl("/1k?" + str(i))});
    INFO(r.err << "\n" << gate.process().logTail(20));
    REQUIRE(r.exit_code == 0);
    CHECK(r.out == "200");
    CHECK(sha256File(env.out.file("k")) == f.sha256);
  }
  auto lines = env.squid.waitForAccessLines(4, "GET", milliseconds(5000));
  CHECK(lines.size() == 4);
  const auto clients = env.squid.clients("GET");
  INFO("squid GET clients: " << join(clients));
  CHECK(clients.size() == 1);
  CHECK(establishedTo(env.squid.httpsPort()) == 1);
}
