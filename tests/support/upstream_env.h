// The upstream chains for integration tests, one per protocol h2gate speaks
// to a proxy: HTTP/1.1 (squid's https_port, which offers no ALPN, in front of
// nginx) and h2 (H2Env: nghttpx in front of squid in front of nginx); and
// UpstreamEnv, either of them behind one interface for tests that differ by
// protocol only. Header-only: it uses H2GATE_BINARY, which only the
// integration test binary defines.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/h2_env.h"
#include "tests/support/net.h"

namespace h2gate::test {

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
        std::chrono::milliseconds(10000)));
    return *gate;
  }

  CommandResult curl(std::vector<std::string> args,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(60000)) {
    std::vector<std::string> all{
        "-sS",           "-x",         gate->proxyUrl(),           "--cacert",
        ca.caCertPath(), "--max-time", str(timeout.count() / 1000)};
    all.insert(all.end(), args.begin(), args.end());
    return runCurl(all, timeout + std::chrono::milliseconds(5000));
  }

  // Destruction runs backwards: h2gate, squid, nginx, then the files.
  TempDir work{"upstream-h1"};
  TestCA ca{work.path().string()};
  Nginx nginx;
  Squid squid;
  TempDir out{"out"};
  std::unique_ptr<H2gate> gate;
};

// H1Env or H2Env by protocol ("http1" or "h2", as h2gate's access log names
// them), for the tests that are the same for both.
class UpstreamEnv {
 public:
  explicit UpstreamEnv(const std::string& protocol, bool auth = false,
                       const std::string& password = "s3cret")
      : protocol_(protocol) {
    if (protocol == "h2") {
      H2Env::Options o;
      o.squid_auth = auth;
      o.password = password;
      h2_ = std::make_unique<H2Env>(o);
    } else {
      REQUIRE(protocol == "http1");
      h1_ = std::make_unique<H1Env>(auth, password);
    }
  }

  const std::string& protocol() const { return protocol_; }
  // h2gate with --upstream https://[userinfo@]<the proxy>, once connected.
  H2gate& startGate(const std::string& userinfo = "") {
    if (h1_) return h1_->startGate(userinfo);
    return h2_->startGate(
        userinfo.empty() ? "" : "https://" + userinfo + "@127.0.0.1:" + str(h2_->nghttpx.port()));
  }
  void stopGate() { (h1_ ? h1_->gate : h2_->gate).reset(); }
  H2gate& gate() { return h1_ ? *h1_->gate : *h2_->gate; }
  Nginx& nginx() { return h1_ ? h1_->nginx : h2_->nginx; }
  TempDir& out() { return h1_ ? h1_->out : h2_->out; }
  // The proxy h2gate talks to (squid's https_port, or nghttpx).
  uint16_t proxyPort() const { return h1_ ? h1_->squid.httpsPort() : h2_->nghttpx.port(); }
  // That proxy's access-log lines for `method`, once `n` are there.
  std::vector<std::string> proxyAccessLines(size_t n, const std::string& method,
                                            std::chrono::milliseconds wait) {
    return h1_ ? h1_->squid.waitForAccessLines(n, method, wait)
               : h2_->nghttpx.waitForAccessLines(n, method, wait);
  }
  CommandResult curl(std::vector<std::string> args) {
    return h1_ ? h1_->curl(std::move(args)) : h2_->curl(std::move(args));
  }

 private:
  std::string protocol_;
  std::unique_ptr<H1Env> h1_;
  std::unique_ptr<H2Env> h2_;
};

}  // namespace h2gate::test
