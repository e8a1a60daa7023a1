// TLS to the upstream proxy, configured with Envoy's UpstreamTlsContext: a
// client certificate for a proxy that demands one, ALPN restricted to
// http/1.1, and the pool's queue timeout (503) when max_connections and
// max_concurrent_streams leave no room. The chain is h2gate -> nghttpx
// (http2-proxy) -> squid -> nginx, everything on loopback.
#include <catch2/catch.hpp>

#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
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

namespace {

// The cluster's TLS and protocol settings; the listener is upstreamModeYaml's.
struct TlsCluster {
  std::vector<std::string> alpn{"h2", "http/1.1"};
  std::string tls_max;                     // tls_maximum_protocol_version, "" = unset
  CertFiles* client_cert = nullptr;        // tls_certificates
  std::vector<std::string> cluster_extra;  // lines under the cluster
  std::vector<std::string> http2_options;  // lines under http2_protocol_options
};

std::string tlsYaml(uint16_t proxy_port, const std::string& ca_path, const TlsCluster& c) {
  std::ostringstream y;
  y << "admin:\n"
       "  address: {socket_address: {address: 127.0.0.1, port_value: 0}}\n"
       "static_resources:\n"
       "  listeners:\n"
       "  - name: local_proxy\n"
       "    address: {socket_address: {address: 127.0.0.1, port_value: 0}}\n"
       "    filter_chains:\n"
       "    - filters:\n"
       "      - name: h2gate.filters.access_log\n"
       "      - name: h2gate.filters.forward_proxy\n"
       "        typed_config: {cluster: proxy}\n"
       "  clusters:\n"
       "  - name: proxy\n";
  for (const auto& line : c.cluster_extra) y << "    " << line << "\n";
  y << "    load_assignment:\n"
       "      endpoints:\n"
       "      - lb_endpoints:\n"
       "        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: "
    << proxy_port << "}}}\n";
  y << "    transport_socket:\n"
       "      name: envoy.transport_sockets.tls\n"
       "      typed_config:\n"
       "        sni: localhost\n"
       "        common_tls_context:\n"
       "          alpn_protocols: [";
  for (size_t i = 0; i < c.alpn.size(); ++i) y << (i ? ", " : "") << c.alpn[i];
  y << "]\n"
       "          tls_params:\n"
       "            tls_minimum_protocol_version: TLSv1_2\n";
  if (!c.tls_max.empty()) y << "            tls_maximum_protocol_version: " << c.tls_max << "\n";
  y << "          validation_context:\n"
       "            trusted_ca: {filename: "
    << ca_path << "}\n";
  if (c.client_cert) {
    y << "          tls_certificates:\n"
         "          - certificate_chain: {filename: "
      << c.client_cert->cert
      << "}\n"
         "            private_key: {filename: "
      << c.client_cert->key << "}\n";
  }
  if (!c.http2_options.empty()) {
    y << "    typed_extension_protocol_options:\n"
         "      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:\n"
         "        auto_config:\n"
         "          http2_protocol_options:\n";
    for (const auto& line : c.http2_options) y << "            " << line << "\n";
  }
  return y.str();
}

// nghttpx -> squid -> nginx; h2gate started by the test with a TlsCluster.
struct TlsEnv {
  // verify_client: nghttpx demands a client certificate signed by the TestCA.
  explicit TlsEnv(bool verify_client = false)
      : nginx(nginxOptions(ca)),
        nghttpx(nghttpxOptions(
            ca, squid.httpPort(),
            verify_client ? "verify-client=yes\nverify-client-cacert=" + ca.caCertPath() + "\n"
                          : "")) {}

  static Nginx::Options nginxOptions(TestCA& ca) {
    Nginx::Options n;
    n.ca = &ca;
    return n;
  }
  static Nghttpx::Options nghttpxOptions(TestCA& ca, uint16_t backend, const std::string& extra) {
    Nghttpx::Options n;
    n.ca = &ca;
    n.backend_port = backend;
    n.extra_config = extra;
    return n;
  }

  // Validates the YAML with --validate, then starts h2gate with it.
  H2gate& startGate(const TlsCluster& c) {
    const std::string yaml = tlsYaml(nghttpx.port(), ca.caCertPath(), c);
    const std::string path = work.write("h2gate-validate.yaml", yaml);
    auto v = runCommand({H2gate::binaryPath(H2GATE_BINARY), "--validate", "-c", path},
                        milliseconds(10000));
    INFO(yaml << "\n--validate: " << v.out << v.err);
    REQUIRE(v.exit_code == 0);
    H2gate::Options o;
    o.binary = H2GATE_BINARY;
    o.yaml = yaml;
    o.args = {"--log-level", "debug"};
    gate = std::make_unique<H2gate>(std::move(o));
    return *gate;
  }

  // curl through h2gate; -w prints "<http_connect> <http_code> <size>".
  CommandResult curl(std::vector<std::string> args, milliseconds timeout = milliseconds(30000)) {
    std::vector<std::string> all{"-sS",
                                 "-x",
                                 gate->proxyUrl(),
                                 "--cacert",
                                 ca.caCertPath(),
                                 "--max-time",
                                 str(timeout.count() / 1000),
                                 "-w",
                                 "%{http_connect} %{http_code} %{size_download}"};
    all.insert(all.end(), args.begin(), args.end());
    return runCurl(all, timeout + milliseconds(5000));
  }

  // A CONNECT download of /10m, byte-identical; returns the gate's log entry.
  AccessLogEntry download10m() {
    const TestFile& f = testFile("10m");
    auto r = curl({"-o", out.file("10m"), nginx.httpsUrl("/10m")});
    INFO("curl: " << r.out << " " << r.err << "\n" << gate->process().logTail(30));
    REQUIRE(r.exit_code == 0);
    CHECK(r.out == "200 200 " + str(f.size));
    CHECK(sha256File(out.file("10m")) == f.sha256);
    auto log = gate->waitForAccessLog(1);
    REQUIRE(log.size() == 1);
    CHECK(log[0].get("method") == "CONNECT");
    CHECK(log[0].num("status") == 200);
    return log[0];
  }

  std::string negotiatedRe(const std::string& alpn) const {
    return "proxy 127\\.0\\.0\\.1:" + str(nghttpx.port()) + " negotiated " + regexEscape(alpn);
  }

  // Destruction runs backwards: h2gate stops first, the files go last.
  TempDir work{"upstream-tls"};
  TestCA ca{work.path().string()};
  Nginx nginx;
  Squid squid{Squid::Options{}};
  Nghttpx nghttpx;
  TempDir out{"out"};
  std::unique_ptr<H2gate> gate;
};

}  // namespace

TEST_CASE("tls: client certificate for a proxy with verify-client", "[upstream][tls]") {
  TlsEnv env(/*verify_client=*/true);
  CertFiles client = env.ca.issueClient("client", "h2gate-client");

  SECTION("with tls_certificates: the handshake and a CONNECT download succeed") {
    TlsCluster c;
    c.client_cert = &client;
    env.startGate(c);
    {
      INFO(env.gate->process().logTail());
      REQUIRE(env.gate->process().waitForLog(env.negotiatedRe("h2"), milliseconds(10000)));
    }
    const AccessLogEntry e = env.download10m();
    CHECK(e.get("protocol") == "h2");
    auto lines = env.nghttpx.waitForAccessLines(1, "CONNECT", milliseconds(5000));
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find(" h2 \"CONNECT ") != std::string::npos);
  }

  SECTION("without tls_certificates: 502 and the TLS failure in stderr") {
    // nghttpx rejects the handshake. With TLS 1.3 the client learns that only
    // after its own handshake finished (the server's alert comes later), so
    // both versions are tried.
    const std::string tls_max = GENERATE(as<std::string>{}, "TLSv1_2", "");
    INFO("tls_maximum_protocol_version: " << (tls_max.empty() ? "(unset, TLSv1_3)" : tls_max));
    TlsCluster c;
    c.tls_max = tls_max;
    env.startGate(c);
    auto r = env.curl({"-o", env.out.file("none"), env.nginx.httpsUrl("/1k")});
    const std::string err = env.gate->stderrText();
    INFO("curl: " << r.out << " " << r.err << "\n" << env.gate->process().logTail(30));
    CHECK(r.exit_code == 56);
    // 503 when the start-up connection had already failed (proxy known down).
    CHECK((r.out.rfind("502 ", 0) == 0 || r.out.rfind("503 ", 0) == 0));
    // TLS 1.2: the handshake itself fails. TLS 1.3: the handshake completes,
    // then the proxy's alert arrives on the first read. Either way the log
    // and the access log must name the TLS failure, not blame a stream reset.
    const bool handshake_failed = err.find("TLS handshake with proxy 127.0.0.1:" +
                                           str(env.nghttpx.port())) != std::string::npos;
    const bool alert_after_handshake =
        err.find("TLS error from proxy: tlsv13 alert certificate required") != std::string::npos;
    CHECK((tls_max == "TLSv1_2" ? handshake_failed : alert_after_handshake));
    auto log = env.gate->waitForAccessLog(1);
    REQUIRE(log.size() == 1);
    CHECK((log[0].num("status") == 502 || log[0].num("status") == 503));
    CHECK(log[0].get("result") == "connect_failed");
    // TLS 1.2 peers answer "handshake failure", TLS 1.3 "certificate required".
    CHECK(log[0].get("reason").find("alert") != std::string::npos);
    CHECK(env.nghttpx.accessLines("CONNECT").empty());
  }
}

TEST_CASE("tls: a saturated pool answers 503 after the queue timeout", "[upstream][tls]") {
  TlsEnv env;
  TlsCluster c;
  c.cluster_extra = {"connect_timeout: 1s",
                     "circuit_breakers: {thresholds: [{max_connections: 1}]}"};
  c.http2_options = {"max_concurrent_streams: 1"};
  env.startGate(c);
  {
    INFO(env.gate->process().logTail());
    REQUIRE(env.gate->process().waitForLog(env.negotiatedRe("h2"), milliseconds(10000)));
  }
  // 10 MiB at 512 KiB/s: ~20 s, holding the only stream of the only connection.
  testFile("10m");
  auto slow =
      startCurl({"-sS", "-x", env.gate->proxyUrl(), "--cacert", env.ca.caCertPath(), "--max-time",
                 "60", "-o", env.out.file("slow"), env.nginx.httpsUrl("/slow/10m")},
                env.out.path().string(), "slow-curl");
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < until && fileSize(env.out.file("slow")) == 0)
    std::this_thread::sleep_for(milliseconds(50));
  {
    INFO(env.gate->process().logTail());
    REQUIRE(fileSize(env.out.file("slow")) > 0);
  }

  // The second tunnel finds no stream and may not open a connection: it queues.
  RawConnection app(env.gate->port());
  const std::string target = "127.0.0.1:" + str(env.nginx.tlsPort());
  const auto start = Clock::now();
  REQUIRE(app.send("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"));
  HttpResponse resp = app.readResponse(milliseconds(30000));
  const double waited = secondsSince(start);
  std::cout << "[figures] queued CONNECT answered " << resp.status << " after " << waited << " s\n";
  const bool slow_running = slow->running();
  slow->stop();
  INFO(resp.raw << "\n" << env.gate->process().logTail(30));
  CHECK(resp.status == 503);
  CHECK(waited >= 8.0);
  CHECK(waited < 20.0);
  CHECK(resp.body.find("max_connections") != std::string::npos);
  CHECK(slow_running);  // the long tunnel outlasted the wait
  CHECK(countOccurrences(env.gate->stderrText(), ") established") == 1);
}

TEST_CASE("tls: alpn_protocols [http/1.1] makes h2gate speak HTTP/1.1 to an h2 proxy",
          "[upstream][tls]") {
  TlsEnv env;
  TlsCluster c;
  c.alpn = {"http/1.1"};
  env.startGate(c);
  const AccessLogEntry e = env.download10m();
  CHECK(e.get("protocol") == "http1");
  {
    INFO(env.gate->process().logTail());
    CHECK(env.gate->process().waitForLog(env.negotiatedRe("http/1.1"), milliseconds(5000)));
  }
  CHECK(env.gate->stderrText().find("negotiated h2") == std::string::npos);
  auto lines = env.nghttpx.waitForAccessLines(1, "CONNECT", milliseconds(5000));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find(" http/1.1 \"CONNECT ") != std::string::npos);
}
