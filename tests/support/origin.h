// Origin servers for tests: nginx (HTTPS with h2 + plain HTTP, serving the
// shared random test files) and the Python upload sink behind it.
//
// Locations on both nginx ports:
//   /1k /1m /10m /64m   the files from testFile() (1k and 1m exist at start;
//                       call testFile("64m") before fetching the big ones)
//   /slow/<file>        the same files at 512 KiB/s (limit_rate)
//   /upload...          proxied to the upload sink (request buffering off, so
//                       Content-Length and chunked bodies stream through):
//                       POST/PUT answer "<sha256> <length>\n", GET echoes the
//                       request line and headers as nginx forwarded them
//   /headers            nginx's own view of selected request headers,
//                       "name=value" per line (see kEchoedHeaders)
// The sink is also reachable directly (sinkPort()) for checks that must not
// pass through nginx (e.g. exactly which headers a proxy forwarded).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/peer_logs.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_ca.h"

namespace h2gate::test {

// Request headers nginx's /headers location reports, in this order.
inline constexpr const char* kEchoedHeaders[] = {"host",
                                                 "via",
                                                 "connection",
                                                 "proxy-connection",
                                                 "proxy-authorization",
                                                 "keep-alive",
                                                 "te",
                                                 "upgrade",
                                                 "x-foo",
                                                 "x-bar",
                                                 "x-keep"};

class UploadSink {
 public:
  // Starts python3 tests/support/upload_sink.py on an ephemeral port, logs in `dir`.
  explicit UploadSink(const std::string& dir);
  uint16_t port() const { return port_; }
  Process& process() { return *process_; }

 private:
  std::unique_ptr<Process> process_;
  std::unique_ptr<PeerLog> log_;
  uint16_t port_ = 0;
};

class Nginx {
 public:
  struct Options {
    TestCA* ca = nullptr;                // null: the fixture makes its own CA
    std::vector<std::string> dns_names;  // extra subjectAltNames, e.g. "origin.test"
    bool http2 = true;                   // offer h2 (ALPN) on the TLS port
    bool with_sink = true;               // start an UploadSink for /upload
    std::string extra_server_config;     // appended inside both server blocks
    // Name-based virtual hosts on the plain HTTP port, after the default
    // server: a request whose Host is one of these names gets 200 with the
    // body "virtual host NAME\n" for any path (whatever Host the default
    // server gets, it serves the locations above).
    std::vector<std::string> virtual_hosts;
    // The plain HTTP port; 0: a free ephemeral one. A fixed one (80 for
    // WPAD) only where nothing else can hold it: in a network namespace.
    uint16_t http_port = 0;
    // Further addresses the plain HTTP port listens on besides 127.0.0.1
    // (e.g. a veth address in a network namespace the test made).
    std::vector<std::string> http_addresses;
  };

  Nginx();  // default Options
  explicit Nginx(Options options);
  ~Nginx();

  uint16_t tlsPort() const { return tls_port_; }
  uint16_t httpPort() const { return http_port_; }
  uint16_t sinkPort() const { return sink_ ? sink_->port() : 0; }
  // "https://127.0.0.1:PORT" / "http://127.0.0.1:PORT"
  std::string httpsUrl(const std::string& path = "/") const;
  std::string httpUrl(const std::string& path = "/") const;
  const std::string& caCertPath() const { return ca_path_; }
  const TempDir& dir() const { return dir_; }
  Process& process() { return *process_; }
  // nginx's access log (one line per request, "$request $status $body_bytes_sent").
  // nginx writes a request's line after its response has gone out: a client can
  // have the response before the line is there.
  std::string accessLog() const;
  // Polls until `needle` occurs at least `n` times in the access log (or
  // `timeout` passes); how many times it occurs then.
  size_t waitForAccessCount(const std::string& needle, size_t n,
                            std::chrono::milliseconds timeout = std::chrono::seconds(5)) const;

 private:
  void start();

  // Declaration order is destruction order reversed: nginx stops before the
  // sink, and the directory goes last.
  Options options_;
  TempDir dir_;
  PeerLog error_log_{"nginx error.log", dir_.file("error.log")};
  std::unique_ptr<TestCA> own_ca_;
  std::string ca_path_;
  CertFiles cert_;
  std::unique_ptr<UploadSink> sink_;
  std::unique_ptr<Process> process_;
  uint16_t tls_port_ = 0;
  uint16_t http_port_ = 0;
};

// Directory of this file (tests/support), for scripts next to it. Overridable
// with $H2GATE_TEST_SUPPORT_DIR.
std::string supportDir();

}  // namespace h2gate::test
