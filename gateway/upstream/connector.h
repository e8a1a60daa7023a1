// Opens one connection to an upstream proxy endpoint: resolve, TCP connect
// (every address, one deadline), TLS handshake with SNI, verification and
// ALPN. Reports a Transport and the negotiated protocol, or why it failed in
// words a user can act on ("certificate verify failed: …").
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio.hpp>

#include "config/config.h"
#include "gateway/base/http_types.h"
#include "gateway/net/send_buffer.h"
#include "gateway/net/tls_context.h"
#include "gateway/upstream/transport.h"

namespace h2gate::upstream {

struct ConnectOutcome {
  std::unique_ptr<Transport> transport;  // null on failure
  std::string alpn;                      // "h2", "http/1.1" or "" (no ALPN / plain TCP)
  std::string peer;                      // "ip:port" connected to
  int status = 0;                        // on failure: 502 or 504 for the app
  Result result = Result::Ok;
  std::string reason;
  bool tls_failed = false;  // the TLS handshake failed (not a timeout)
  // For metrics: DNS + TCP connect, and the TLS handshake (zero if none).
  std::chrono::nanoseconds connect_time{0};
  std::chrono::nanoseconds tls_time{0};
};

class Connector : public std::enable_shared_from_this<Connector> {
 public:
  using Done = std::function<void(ConnectOutcome)>;
  Connector(asio::io_context& io, const config::SocketAddress& endpoint,
            std::shared_ptr<net::TlsContext> tls, config::Duration timeout, uint64_t conn_id,
            net::SendBufferConfig tuning = {},
            std::optional<config::Http2ProtocolOptions::Keepalive> keepalive = std::nullopt);
  // `done` runs exactly once, unless cancel() is called first.
  void start(Done done);
  void cancel();
  // Which of its cluster's endpoints this connects to (the pool's index).
  void setEndpointIndex(size_t index) { endpoint_index_ = index; }
  size_t endpointIndex() const { return endpoint_index_; }
  // Offer only http/1.1 in ALPN (a proxy that wants NTLM, which HTTP/2
  // cannot carry), whatever the cluster's TLS context offers.
  void setHttp1Only() { http1_only_ = true; }

 private:
  void connectNext();
  void handshake();
  void finish(ConnectOutcome outcome);
  void failWith(int status, Result result, std::string reason);

  asio::io_context& io_;
  config::SocketAddress endpoint_;
  size_t endpoint_index_ = 0;
  bool http1_only_ = false;
  std::shared_ptr<net::TlsContext> tls_;
  config::Duration timeout_;
  uint64_t conn_id_;
  net::SendBufferConfig tuning_;
  // TCP keepalive on the socket (idle = interval, probes every timeout, 3 of them).
  std::optional<config::Http2ProtocolOptions::Keepalive> keepalive_;
  std::unique_ptr<net::SendBufferTuner> tuner_;  // from TCP connect on; goes to the Transport
  asio::ip::tcp::resolver resolver_;
  asio::steady_timer timer_;
  std::unique_ptr<asio::ip::tcp::socket> socket_;
  std::unique_ptr<Transport> transport_;  // TLS: from the handshake on
  std::vector<asio::ip::tcp::endpoint> addresses_;
  size_t next_ = 0;
  std::string last_error_;
  std::string peer_;
  std::chrono::steady_clock::time_point started_{};
  std::chrono::steady_clock::time_point tls_started_{};
  std::chrono::nanoseconds connect_time_{0};
  bool in_tls_ = false;
  Done done_;
};

}  // namespace h2gate::upstream
