// h2gate in front of an HTTPS proxy that speaks only HTTP/1.1 (squid's
// https_port offers no ALPN): one TLS connection per CONNECT tunnel,
// keep-alive reuse for absolute-form requests.
#include <catch2/catch.hpp>

#include <openssl/evp.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/h2gate.h"
#include "tests/support/net.h"
#include "tests/support/origin.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_ca.h"
#include "tests/support/upstream_proxies.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

std::string str(uint64_t n) {
  return std::to_string(n);
}

std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// squid as an HTTPS proxy (HTTP/1.1 only) → nginx, h2gate started by the test.
struct H1Env {
  explicit H1Env(bool auth = false, std::string password = "s3cret")
      : nginx(nginxOptions(ca)), squid(squidOptions(ca, auth, std::move(password))) {}

  static Nginx::Options nginxOptions(TestCA& ca) {
    Nginx::Options n;
    n.ca = &ca;
    return n;
  }
  static Squid::Options squidOptions(TestCA& ca, bool auth, std::string password) {
    Squid::Options s;
    s.ca = &ca;
    s.https = true;
    s.auth = auth;
    s.password = std::move(password);
    return s;
  }

  std::string proxyUrl(const std::string& userinfo = "") const {
    return "https://" + (userinfo.empty() ? "" : userinfo + "@") +
           "127.0.0.1:" + str(squid.httpsPort());
  }

  // h2gate --upstream https://[userinfo@]127.0.0.1:<squid https_port>;
  // waits for the pre-connected connection's ALPN result.
  H2gate& startGate(const std::string& userinfo = "") {
    H2gate::Options o;
    o.binary = H2GATE_BINARY;
    o.args = {"--listen", "127.0.0.1:0", "--admin",          "127.0.0.1:0", "--log-level",
              "debug",    "--upstream",  proxyUrl(userinfo), "--cacert",    ca.caCertPath()};
    gate = std::make_unique<H2gate>(std::move(o));
    INFO(gate->process().logTail());
    REQUIRE(gate->process().waitForLog(
        "proxy 127\\.0\\.0\\.1:" + str(squid.httpsPort()) + " negotiated (http/1\\.1|no ALPN)",
        milliseconds(10000)));
    return *gate;
  }

  CommandResult curl(std::vector<std::string> args, milliseconds timeout = milliseconds(60000)) {
    std::vector<std::string> all{
        "-sS",           "-x",         gate->proxyUrl(),           "--cacert",
        ca.caCertPath(), "--max-time", str(timeout.count() / 1000)};
    all.insert(all.end(), args.begin(), args.end());
    return runCurl(all, timeout + milliseconds(5000));
  }

  // Destruction runs backwards: h2gate, squid, nginx, then the files.
  TempDir work{"upstream-h1"};
  TestCA ca{work.path().string()};
  Nginx nginx;
  Squid squid;
  TempDir out{"out"};
  std::unique_ptr<H2gate> gate;
};

}  // namespace

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

TEST_CASE("h1: squid's 407 reaches the app; credentials in --upstream are sent",
          "[upstream][h1][auth]") {
  const std::string password = "Sq1d-h1-Pa55word";
  H1Env env(/*auth=*/true, password);
  {
    H2gate& gate = env.startGate();
    const std::string target = "127.0.0.1:" + str(env.nginx.tlsPort());
    RawConnection c(gate.port());
    REQUIRE(c.send("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"));
    auto r = c.readResponse(milliseconds(10000));
    INFO(r.raw << "\n" << gate.process().logTail(20));
    CHECK(r.status == 407);
    REQUIRE(r.header("Proxy-Authenticate"));
    CHECK(r.header("Proxy-Authenticate")->find("Basic realm=\"h2gate-test\"") != std::string::npos);

    RawConnection g(gate.port());
    REQUIRE(g.send("GET " + env.nginx.httpUrl("/1k") +
                   " HTTP/1.1\r\nHost: 127.0.0.1:" + str(env.nginx.httpPort()) + "\r\n\r\n"));
    auto a = g.readResponse(milliseconds(10000));
    INFO(a.raw);
    CHECK(a.status == 407);
    CHECK(a.hasHeader("Proxy-Authenticate"));
    env.gate.reset();
  }
  H2gate& gate = env.startGate("alice:" + password);
  const TestFile& f = testFile("1m");
  for (const std::string& url : {env.nginx.httpsUrl("/1m"), env.nginx.httpUrl("/1m")}) {
    INFO(url);
    auto r = env.curl({"-o", env.out.file("dl"), "-w", "%{http_code}", url});
    INFO(r.err << "\n" << gate.process().logTail(20));
    CHECK(r.exit_code == 0);
    CHECK(r.out == "200");
    CHECK(sha256File(env.out.file("dl")) == f.sha256);
  }
  std::string token(64, '\0');
  const std::string creds = "alice:" + password;
  token.resize(static_cast<size_t>(EVP_EncodeBlock(
      reinterpret_cast<unsigned char*>(token.data()),
      reinterpret_cast<const unsigned char*>(creds.data()), static_cast<int>(creds.size()))));
  for (const std::string& text : {gate.stderrText(), gate.process().stdoutText()}) {
    CHECK(text.find(password) == std::string::npos);
    CHECK(text.find(token) == std::string::npos);
  }
}

TEST_CASE("h1: a tunnel ends when the app closes its connection", "[upstream][h1][close]") {
  H1Env env;
  H2gate& gate = env.startGate();
  const TestFile& f = testFile("1m");
  // One transfer per curl run: curl closes its socket without a TLS
  // close_notify, and nginx keeps the inner connection alive (120 s), so only
  // h2gate's reaction to the app's close can end the tunnel.
  auto r = env.curl({"-o", env.out.file("dl"), "-w", "%{http_code}", env.nginx.httpsUrl("/1m")});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "200");
  CHECK(sha256File(env.out.file("dl")) == f.sha256);
  {
    auto log = gate.waitForAccessLog(1, milliseconds(3000));
    INFO(gate.process().logTail(10));
    CHECK(log.size() == 1);
    for (const auto& e : log) {
      CHECK(e.get("method") == "CONNECT");
      CHECK(e.get("result") == "ok");
    }
    CHECK(env.squid.waitForAccessLines(1, "CONNECT", milliseconds(3000)).size() == 1);
  }
  // What users notice when tunnels outlive their apps: each holds one of
  // max_connections (8) TLS connections, so the 8th app in a row waits (and
  // gets 503 after the queue timeout). curl is killed after 3 s here.
  const auto start = Clock::now();
  int ok = 0;
  std::string failures;
  for (int i = 0; i < 8; ++i) {
    auto k = runCurl({"-sS", "-x", gate.proxyUrl(), "-p", "-o", "/dev/null", "-w", "%{http_code}",
                      env.nginx.httpUrl("/1k?" + str(i))},
                     milliseconds(3000));
    if (k.exit_code == 0 && k.out == "200")
      ++ok;
    else
      failures += "tunnel " + str(i) + ": " +
                  (k.timed_out ? "no answer within 3 s" : k.out + " " + k.err) + "\n";
  }
  const double secs = secondsSince(start);
  std::cout << "[figures] h1: 8 sequential single-transfer tunnels: " << secs << " s\n";
  INFO(failures);
  CHECK(ok == 8);
  CHECK(gate.waitForAccessLog(9, milliseconds(3000)).size() == 9);
  CHECK(establishedTo(env.squid.httpsPort()) <= 1);  // at most the idle pre-connected one
}
