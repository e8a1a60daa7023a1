// The response-shape server (tests/support/shape_server.py): an origin and
// an HTTP/1.1 proxy at once that answers each request in the shape its path
// names (Content-Length: 0, chunked, close-delimited, 1xx first, 407 without
// a body...), where nginx and squid cannot produce that shape. Its log has
// one JSON line per request with the client's ip:port (one per TCP
// connection).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/peer_logs.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace h2gate::test {

class ShapeServer {
 public:
  ShapeServer();
  ~ShapeServer();
  ShapeServer(const ShapeServer&) = delete;
  ShapeServer& operator=(const ShapeServer&) = delete;

  uint16_t port() const { return port_; }
  // "http://127.0.0.1:PORT/s/<shape>"
  std::string url(const std::string& shape) const;
  // Logged requests, parsed (field -> value, as strings).
  std::vector<std::map<std::string, std::string>> requests() const;
  std::string logText() const;
  Process& process() { return *process_; }

 private:
  TempDir dir_;
  PeerLog requests_log_{"shape_server requests.log", dir_.file("requests.log")};
  PeerLog stderr_log_{"shape_server stderr", dir_.file("shape_server.stderr")};
  std::unique_ptr<Process> process_;
  uint16_t port_ = 0;
};

}  // namespace h2gate::test
