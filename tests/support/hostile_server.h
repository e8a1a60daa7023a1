// A hostile HTTP/1.1 server or proxy (tests/support/hostile_server.py):
// every request gets the answer its mode says — a status line whose reason
// carries ESC sequences, CR or LF; a head without end; a head sent one byte
// every few seconds; a 407 with a fresh huge scheme name each time. Plain
// TCP, or TLS with a certificate the test chooses (e.g. one whose subject
// carries ESC sequences: TestCA::issueServerWithName).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace h2gate::test {

class HostileServer {
 public:
  enum class Mode { Status, Endless, Slow, Auth407 };
  struct Options {
    Mode mode = Mode::Status;
    int status = 403;                 // Status: the status code
    std::string reason;               // Status: the reason phrase's bytes, as they go
    double interval_seconds = 1.0;    // Slow: one byte every so many seconds
    size_t scheme_bytes = 30 * 1024;  // Auth407: the length of each scheme name
    std::string tls_cert, tls_key;    // TLS with this certificate; empty: plain TCP
  };
  explicit HostileServer(Options options);
  ~HostileServer();
  HostileServer(const HostileServer&) = delete;
  HostileServer& operator=(const HostileServer&) = delete;

  uint16_t port() const { return port_; }
  // "http://127.0.0.1:PORT" or, with TLS, "https://127.0.0.1:PORT".
  std::string url(const std::string& path = "") const;
  // How many request heads it has read so far.
  size_t requests() const;

 private:
  Options options_;
  TempDir dir_;
  std::unique_ptr<Process> process_;
  uint16_t port_ = 0;
};

}  // namespace h2gate::test
