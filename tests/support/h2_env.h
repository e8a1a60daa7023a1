// The h2 upstream chain for integration tests: nginx (origin) <- squid
// (plain HTTP proxy) <- nghttpx (HTTPS proxy speaking h2) <- h2gate <- curl,
// all on loopback with ephemeral ports and a CA made at test time.
// Header-only: it uses H2GATE_BINARY, which only the integration test
// binary defines.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/h2gate.h"
#include "tests/support/origin.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_ca.h"
#include "tests/support/upstream_proxies.h"
#include "tests/support/util.h"

namespace h2gate::test {

struct H2EnvOptions {
  uint32_t nghttpx_streams = 100;
  uint32_t window_size = 0;
  uint32_t connection_window_size = 0;
  bool squid_auth = false;
  std::string password = "s3cret";
};

// The nghttpx → squid → nginx chain, with h2gate started by the test.
struct H2Env {
  using Options = H2EnvOptions;

  explicit H2Env(Options o = {})
      : options(std::move(o)),
        nginx(nginxOptions(ca)),
        squid(squidOptions(options)),
        nghttpx(nghttpxOptions(options, ca, squid.httpPort())) {}

  static Nginx::Options nginxOptions(TestCA& ca) {
    Nginx::Options n;
    n.ca = &ca;
    return n;
  }
  static Squid::Options squidOptions(const Options& o) {
    Squid::Options s;
    s.auth = o.squid_auth;
    s.password = o.password;
    return s;
  }
  static Nghttpx::Options nghttpxOptions(const Options& o, TestCA& ca, uint16_t backend) {
    Nghttpx::Options n;
    n.ca = &ca;
    n.backend_port = backend;
    n.max_concurrent_streams = o.nghttpx_streams;
    n.window_size = o.window_size;
    n.connection_window_size = o.connection_window_size;
    return n;
  }

  // h2gate with --upstream (flags only). Waits for the pre-connected h2
  // connection unless `wait_connected` is false.
  H2gate& startGate(const std::string& upstream_url = "", const std::string& cacert = "",
                    bool wait_connected = true) {
    H2gate::Options o;
    o.binary = H2GATE_BINARY;
    o.args = {"--listen",    "127.0.0.1:0",
              "--admin",     "127.0.0.1:0",
              "--log-level", "debug",
              "--upstream",  upstream_url.empty() ? nghttpx.url() : upstream_url,
              "--cacert",    cacert.empty() ? ca.caCertPath() : cacert};
    gate = std::make_unique<H2gate>(std::move(o));
    if (wait_connected) waitConnected();
    return *gate;
  }

  // h2gate with a YAML config (cluster "proxy" → nghttpx).
  H2gate& startGateYaml(const std::vector<std::string>& http2_options) {
    H2gate::Options o;
    o.binary = H2GATE_BINARY;
    o.yaml = upstreamModeYaml(nghttpx.port(), ca.caCertPath(), http2_options);
    o.args = {"--log-level", "debug"};
    gate = std::make_unique<H2gate>(std::move(o));
    waitConnected();
    return *gate;
  }

  void waitConnected() {
    INFO(gate->process().logTail());
    REQUIRE(gate->process().waitForLog(
        "proxy 127\\.0\\.0\\.1:" + str(nghttpx.port()) + " negotiated h2", milliseconds(10000)));
  }

  // curl through h2gate: -sS -x h2gate --cacert <origin CA> --max-time.
  CommandResult curl(std::vector<std::string> args, milliseconds timeout = milliseconds(120000)) {
    std::vector<std::string> all{
        "-sS",           "-x",         gate->proxyUrl(),           "--cacert",
        ca.caCertPath(), "--max-time", str(timeout.count() / 1000)};
    all.insert(all.end(), args.begin(), args.end());
    return runCurl(all, timeout + milliseconds(5000));
  }

  // Parallel downloads of `path` over CONNECT (https) into out/<tag><i>;
  // REQUIREs success, CHECKs every file. Returns the wall time in seconds.
  double parallelDownloads(int n, const std::string& path, const std::string& sha256, uint64_t size,
                           const std::string& tag) {
    std::vector<std::string> args{"--parallel",
                                  "--parallel-max",
                                  str(n),
                                  "--http1.1",
                                  "--parallel-immediate",
                                  "-w",
                                  "%{http_code} %{size_download}\\n"};
    for (int i = 0; i < n; ++i) {
      args.insert(args.end(),
                  {"-o", out.file(tag + str(i)), nginx.httpsUrl(path + "?" + tag + str(i))});
    }
    const auto start = Clock::now();
    auto r = curl(args, milliseconds(180000));
    const double elapsed = secondsSince(start);
    INFO("curl stderr: " << r.err << "\n" << gate->process().logTail(20));
    REQUIRE(r.exit_code == 0);
    CHECK(countOccurrences(r.out, "200 " + str(size) + "\n") == static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      INFO("transfer " << tag << i);
      CHECK(sha256File(out.file(tag + str(i))) == sha256);
    }
    return elapsed;
  }

  size_t gateConnections() const { return countOccurrences(gate->stderrText(), ") established"); }

  // Declaration order is construction order; destruction runs backwards:
  // h2gate stops first, then the proxies, then the origin and the files.
  Options options;
  TempDir work{"upstream-h2"};
  TestCA ca{work.path().string()};
  Nginx nginx;
  Squid squid;
  Nghttpx nghttpx;
  TempDir out{"out"};
  std::unique_ptr<H2gate> gate;
};

}  // namespace h2gate::test
