// What is the same through an HTTP/1.1 and an h2 upstream proxy, run once
// for each (UpstreamEnv: squid's https_port, or nghttpx in front of squid).
// What differs by protocol is in upstream_h1_test.cc and upstream_h2_test.cc.
#include <catch2/catch.hpp>

#include <openssl/evp.h>

#include <iostream>
#include <string>
#include <vector>

#include "tests/support/upstream_env.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

std::string base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace

TEST_CASE("upstream: the proxy's 407 reaches the app; credentials in --upstream are sent",
          "[upstream][h1][h2][auth]") {
  const std::string protocol = GENERATE(as<std::string>{}, "http1", "h2");
  const std::string password = "Sq1d-" + protocol + "-Pa55word";
  UpstreamEnv env(protocol, /*auth=*/true, password);
  INFO("upstream protocol " << protocol);
  const std::string target = "127.0.0.1:" + str(env.nginx().tlsPort());
  {
    H2gate& gate = env.startGate();
    RawConnection c(gate.port());
    REQUIRE(c.send("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"));
    auto r = c.readResponse(milliseconds(10000));
    INFO(r.raw << "\n" << gate.process().logTail(20));
    CHECK(r.status == 407);
    REQUIRE(r.header("Proxy-Authenticate"));
    CHECK(r.header("Proxy-Authenticate")->find("Basic realm=\"h2gate-test\"") != std::string::npos);

    RawConnection g(gate.port());
    REQUIRE(g.send("GET " + env.nginx().httpUrl("/1k") +
                   " HTTP/1.1\r\nHost: 127.0.0.1:" + str(env.nginx().httpPort()) + "\r\n\r\n"));
    auto a = g.readResponse(milliseconds(10000));
    INFO(a.raw);
    CHECK(a.status == 407);
    CHECK(a.hasHeader("Proxy-Authenticate"));
    env.stopGate();
  }
  H2gate& gate = env.startGate("alice:" + password);
  const TestFile& f = testFile("1m");
  for (const std::string& url : {env.nginx().httpsUrl("/1m"), env.nginx().httpUrl("/1m")}) {
    INFO(url);
    auto r = env.curl({"-o", env.out().file("dl"), "-w", "%{http_code}", url});
    INFO(r.err << "\n" << gate.process().logTail(20));
    CHECK(r.exit_code == 0);
    CHECK(r.out == "200");
    CHECK(sha256File(env.out().file("dl")) == f.sha256);
  }
  // Neither the password nor the Basic token carrying it appears in any log.
  const std::string token = base64("alice:" + password);
  for (const std::string& text : {gate.stderrText(), gate.process().stdoutText()}) {
    CHECK(text.find(password) == std::string::npos);
    CHECK(text.find(token) == std::string::npos);
  }
}

TEST_CASE("upstream: a tunnel ends when the app closes its connection",
          "[upstream][h1][h2][close]") {
  const std::string protocol = GENERATE(as<std::string>{}, "http1", "h2");
  UpstreamEnv env(protocol);
  INFO("upstream protocol " << protocol);
  H2gate& gate = env.startGate();
  const TestFile& f = testFile("1m");
  // One transfer per curl run: curl closes its socket without a TLS
  // close_notify, and nginx keeps the inner connection alive (120 s), so only
  // h2gate's reaction to the app's close can end the tunnel.
  auto r =
      env.curl({"-o", env.out().file("dl"), "-w", "%{http_code}", env.nginx().httpsUrl("/1m")});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "200");
  CHECK(sha256File(env.out().file("dl")) == f.sha256);
  {
    // The access log line is written when the tunnel ends.
    auto log = gate.waitForAccessLog(1, milliseconds(3000));
    INFO(gate.process().logTail(10));
    CHECK(log.size() == 1);
    for (const auto& e : log) {
      CHECK(e.get("method") == "CONNECT");
      CHECK(e.get("result") == "ok");
      CHECK(e.get("protocol") == protocol);
    }
    CHECK(env.proxyAccessLines(1, "CONNECT", milliseconds(3000)).size() == 1);
  }
  // What users notice when tunnels outlive their apps. HTTP/1.1: each holds
  // one of max_connections (8) TLS connections, so the 8th app in a row
  // waits (and gets 503 after the queue timeout). h2: streams pile up
  // against the proxy's SETTINGS_MAX_CONCURRENT_STREAMS (100 for nghttpx),
  // h2gate opens more connections, and at max_connections apps get 503. So
  // tunnels one after the other must all succeed, and leave one connection
  // (h2: the shared one; HTTP/1.1: at most the idle pre-connected one). curl
  // is killed after 3 s.
  const int tunnels = protocol == "h2" ? 120 : 8;
  const auto start = Clock::now();
  int ok = 0;
  std::string failures;
  for (int i = 0; i < tunnels; ++i) {
    auto k = runCurl({"-sS", "-x", gate.proxyUrl(), "-p", "-o", "/dev/null", "-w", "%{http_code}",
                      env.nginx().httpUrl("/1k?" + str(i))},
                     milliseconds(3000));
    if (k.exit_code == 0 && k.out == "200")
      ++ok;
    else
      failures += "tunnel " + str(i) + ": " +
                  (k.timed_out ? "no answer within 3 s" : k.out + " " + k.err) + "\n";
  }
  std::cout << "[figures] " << protocol << ": " << tunnels
            << " sequential single-transfer tunnels: " << secondsSince(start) << " s\n";
  INFO(failures);
  CHECK(ok == tunnels);
  CHECK(gate.waitForAccessLog(tunnels + 1, milliseconds(3000)).size() ==
        static_cast<size_t>(tunnels + 1));
  if (protocol == "h2") {
    CHECK(countOccurrences(gate.stderrText(), ") established") == 1);
    CHECK(establishedTo(env.proxyPort()) == 1);
  } else {
    CHECK(establishedTo(env.proxyPort()) <= 1);
  }
}
