#include "gateway/upstream/connector.h"
#include "gateway/net/address.h"

#include "gateway/base/log.h"
#include "gateway/net/socket_tuning.h"
#include "gateway/net/tcp_keepalive.h"

namespace h2gate::upstream {
Connector::Connector(asio::io_context& io, const config::SocketAddress& endpoint,
                     std::shared_ptr<net::TlsContext> tls, config::Duration timeout,
                     uint64_t conn_id, net::SendBufferConfig tuning,
                     std::optional<config::Http2ProtocolOptions::Keepalive> keepalive)
    : io_(io),
      endpoint_(endpoint),
      tls_(std::move(tls)),
      timeout_(timeout),
      conn_id_(conn_id),
      tuning_(tuning),
      keepalive_(keepalive),
      resolver_(io),
      timer_(io) {}

void Connector::start(Done done) {
  done_ = std::move(done);
  started_ = std::chrono::steady_clock::now();
  timer_.expires_after(timeout_);
  timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
    if (ec || !self->done_) return;
    self->failWith(504, Result::ConnectTimeout,
                   "connecting to proxy " + self->endpoint_.address + ":" +
                       std::to_string(self->endpoint_.port_value) + " timed out" +
                       (self->last_error_.empty() ? "" : " (" + self->last_error_ + ")"));
  });
  asio::error_code ec;
  const asio::ip::address ip = asio::ip::make_address(endpoint_.address, ec);
  if (!ec) {
    addresses_.emplace_back(ip, endpoint_.port_value);
    connectNext();
    return;
  }
  resolver_.async_resolve(
      endpoint_.address, std::to_string(endpoint_.port_value),
      [self = shared_from_this()](const asio::error_code& e,
                                  asio::ip::tcp::resolver::results_type r) {
        if (!self->done_) return;
        if (e)
          return self->failWith(
              502, Result::DnsFailed,
              "DNS lookup of proxy " + self->endpoint_.address + " failed: " + e.message());
        for (const auto& x : r) self->addresses_.push_back(x.endpoint());
        self->connectNext();
      });
}

void Connector::connectNext() {
  if (next_ >= addresses_.size())
    return failWith(502, Result::ConnectFailed,
                    "connecting to proxy " + endpoint_.address + ":" +
                        std::to_string(endpoint_.port_value) + " failed: " + last_error_);
  const asio::ip::tcp::endpoint ep = addresses_[next_++];
  socket_ = std::make_unique<asio::ip::tcp::socket>(io_);
  socket_->async_connect(ep, [self = shared_from_this(), ep](const asio::error_code& e) {
    if (!self->done_) return;
    if (e) {
      self->last_error_ = net::endpointText(ep) + ": " + e.message();
      H2G_LOG(Debug, self->conn_id_, 0, "upstream connect to " << self->last_error_);
      return self->connectNext();
    }
    asio::error_code ignored;
    self->socket_->set_option(asio::ip::tcp::no_delay(true), ignored);
    self->tuner_ = net::tuneSocket(*self->socket_, self->tuning_, self->conn_id_);
    // HTTP/1.1 connections have no PING: the kernel watches them instead.
    if (self->keepalive_)
      net::enableTcpKeepalive(*self->socket_, self->keepalive_->interval, self->keepalive_->timeout,
                              3);
    self->peer_ = net::endpointText(ep);
    self->tls_started_ = std::chrono::steady_clock::now();
    self->connect_time_ = self->tls_started_ - self->started_;
    if (!self->tls_) {
      ConnectOutcome out;
      out.transport =
          std::make_unique<Transport>(std::move(*self->socket_), std::move(self->tuner_));
      out.transport->setLogId(self->conn_id_);
      out.peer = self->peer_;
      return self->finish(std::move(out));
    }
    self->handshake();
  });
}

void Connector::handshake() {
  in_tls_ = true;
  SSL* ssl = SSL_new(tls_->native());
  if (!ssl) return failWith(502, Result::ConnectFailed, "TLS setup: SSL_new failed");
  transport_ = std::make_unique<Transport>(std::move(*socket_), ssl, std::move(tuner_));
  transport_->setLogId(conn_id_);
  if (std::string err = tls_->prepare(
          ssl, endpoint_.address, endpoint_.address + ":" + std::to_string(endpoint_.port_value));
      !err.empty())
    return failWith(502, Result::ConnectFailed, "TLS setup: " + err);
  if (http1_only_) {
    static constexpr unsigned char kHttp1[] = "\x08http/1.1";
    SSL_set_alpn_protos(ssl, kHttp1, sizeof kHttp1 - 1);
  }
  transport_->asyncHandshake([self = shared_from_this()](const asio::error_code& e) {
    if (!self->done_) return;
    SSL* ssl = self->transport_->ssl();
    if (e) {
      std::string why = net::TlsContext::verifyError(ssl);
      if (why.empty()) why = e.message();
      return self->failWith(502, Result::ConnectFailed,
                            "TLS handshake with proxy " + self->peer_ + " failed: " + why);
    }
    ConnectOutcome out;
    out.alpn = net::TlsContext::selectedAlpn(ssl);
    H2G_LOG(
        Debug, self->conn_id_, 0,
        "TLS with proxy " << self->peer_ << ": " << SSL_get_version(ssl)
                          << (SSL_session_reused(ssl) ? ", session resumed" : ", full handshake")
                          << ", ALPN " << (out.alpn.empty() ? "none" : out.alpn));
    out.peer = self->peer_;
    out.tls_time = std::chrono::steady_clock::now() - self->tls_started_;
    out.transport = std::move(self->transport_);
    self->finish(std::move(out));
  });
}

void Connector::failWith(int status, Result result, std::string reason) {
  ConnectOutcome out;
  out.status = status;
  out.result = result;
  out.reason = std::move(reason);
  out.tls_failed = in_tls_ && result != Result::ConnectTimeout;
  finish(std::move(out));
}

void Connector::finish(ConnectOutcome outcome) {
  Done d = std::move(done_);
  done_ = nullptr;
  outcome.connect_time = connect_time_;
  timer_.cancel();
  if (!outcome.transport) {
    asio::error_code ec;
    if (socket_) socket_->close(ec);
    if (transport_) transport_->close();
  }
  if (d) d(std::move(outcome));
}

void Connector::cancel() {
  done_ = nullptr;
  timer_.cancel();
  resolver_.cancel();
  asio::error_code ec;
  if (socket_) socket_->close(ec);
  if (transport_) transport_->close();
}

}  // namespace h2gate::upstream
