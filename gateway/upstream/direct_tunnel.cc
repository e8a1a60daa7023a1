#include "gateway/upstream/direct_tunnel.h"

#include <cstdio>

#include "gateway/http1/codec.h"
#include "gateway/log.h"

namespace h2gate::upstream {
namespace {

constexpr size_t kReadSize = 64 * 1024;

std::string endpointText(const asio::ip::tcp::endpoint& ep) {
  const asio::ip::address a = ep.address();
  return a.is_v6() ? "[" + a.to_string() + "]:" + std::to_string(ep.port())
                   : a.to_string() + ":" + std::to_string(ep.port());
}

// RFC 6761: "localhost" and "*.localhost" are loopback, without asking DNS.
bool isLocalhostName(std::string_view host) {
  auto lower_eq = [](std::string_view a, std::string_view b) { return iequals(a, b); };
  if (lower_eq(host, "localhost") || lower_eq(host, "localhost.")) return true;
  for (std::string_view suffix : {std::string_view(".localhost"), std::string_view(".localhost.")})
    if (host.size() > suffix.size() && lower_eq(host.substr(host.size() - suffix.size()), suffix))
      return true;
  return false;
}

}  // namespace

DirectTunnel::DirectTunnel(asio::io_context& io, config::Duration connect_timeout, uint64_t conn_id,
                           uint64_t stream_id)
    : io_(io),
      connect_timeout_(connect_timeout),
      conn_id_(conn_id),
      stream_id_(stream_id),
      resolver_(io),
      socket_(io),
      connect_timer_(io) {}

DirectTunnel::~DirectTunnel() = default;

void DirectTunnel::setState(State s) {
  static constexpr const char* kNames[] = {"idle", "resolving", "connecting", "open", "closed"};
  H2G_LOG(Trace, conn_id_, stream_id_,
          "direct: " << kNames[static_cast<int>(state_)] << " -> " << kNames[static_cast<int>(s)]);
  state_ = s;
}

void DirectTunnel::open(const RequestHead& head, StreamInfo& info, TunnelCallbacks& callbacks) {
  head_ = &head;
  info_ = &info;
  callbacks_ = &callbacks;
  info.protocol = "direct";
  if (!head.is_connect) {
    parser_ = std::make_unique<http1::Parser>(http1::Parser::Kind::Response, http1::Limits{});
    parser_->expectNoBody(head.method == "HEAD");
    // A fresh connection per request, closed after the response: the app
    // connection is kept alive, the origin connection is not reused.
    http1::appendOriginRequest(head_bytes_, head, /*close_after=*/true);
  }
  read_buf_.resize(kReadSize);

  asio::error_code ec;
  const asio::ip::address literal = asio::ip::make_address(head.host, ec);
  if (!ec) {
    endpoints_.emplace_back(literal, head.port);
  } else if (isLocalhostName(head.host)) {
    endpoints_.emplace_back(asio::ip::address_v4::loopback(), head.port);
    endpoints_.emplace_back(asio::ip::address_v6::loopback(), head.port);
  }
  // One deadline for name resolution and every connect attempt.
  connect_timer_.expires_after(connect_timeout_);
  connect_timer_.async_wait([self = shared_from_this()](const asio::error_code& e) {
    if (e || (self->state_ != State::Resolving && self->state_ != State::Connecting)) return;
    H2G_LOG(Info, self->conn_id_, self->stream_id_,
            "direct: connect to " << self->head_->authority() << " timed out");
    self->fail(504, Result::ConnectTimeout,
               "connecting to " + self->head_->authority() + " timed out");
  });
  if (!endpoints_.empty()) {
    setState(State::Connecting);
    connectNext();
    return;
  }
  setState(State::Resolving);
  resolver_.async_resolve(head.host, std::to_string(head.port),
                          [self = shared_from_this()](const asio::error_code& e,
                                                      asio::ip::tcp::resolver::results_type r) {
                            self->onResolved(e, std::move(r));
                          });
}

void DirectTunnel::onResolved(const asio::error_code& ec,
                              asio::ip::tcp::resolver::results_type results) {
  if (state_ != State::Resolving) return;
  if (ec) {
    H2G_LOG(Info, conn_id_, stream_id_,
            "direct: DNS lookup of " << head_->host << " failed: " << ec.message());
    fail(502, Result::DnsFailed, "DNS lookup of " + head_->host + " failed: " + ec.message());
    return;
  }
  for (const auto& r : results) endpoints_.push_back(r.endpoint());
  setState(State::Connecting);
  connectNext();
}

void DirectTunnel::connectNext() {
  if (next_endpoint_ >= endpoints_.size()) {
    const std::string reason = "connecting to " + head_->authority() + " failed: " +
                               (last_connect_error_.empty() ? "no address" : last_connect_error_);
    H2G_LOG(Info, conn_id_, stream_id_, "direct: " << reason);
    fail(502, Result::ConnectFailed, reason);
    return;
  }
  const asio::ip::tcp::endpoint ep = endpoints_[next_endpoint_++];
  asio::error_code ignored;
  socket_.close(ignored);
  H2G_LOG(Debug, conn_id_, stream_id_, "direct: connecting to " << endpointText(ep));
  socket_.async_connect(ep, [self = shared_from_this(), ep](const asio::error_code& e) {
    if (self->state_ != State::Connecting) return;
    if (e) {
      H2G_LOG(Debug, self->conn_id_, self->stream_id_,
              "direct: connect to " << endpointText(ep) << " failed: " << e.message());
      self->last_connect_error_ = endpointText(ep) + ": " + e.message();
      self->connectNext();
      return;
    }
    self->onConnected();
  });
}

void DirectTunnel::onConnected() {
  connect_timer_.cancel();
  setState(State::Open);
  asio::error_code ec;
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  const auto remote = socket_.remote_endpoint(ec);
  if (!ec) info_->upstream = endpointText(remote);
  H2G_LOG(Debug, conn_id_, stream_id_, "direct: connected to " << info_->upstream);
  if (head_->is_connect) {
    ResponseHead ok;
    ok.status = 200;
    ok.reason = "Connection established";
    callbacks_->onResponseHead(std::move(ok));
    if (!callbacks_) return;
  }
  flush();
  readMore();
}

void DirectTunnel::send(std::string_view data, Done done) {
  pending_ = data;
  pending_done_ = std::move(done);
  if (state_ == State::Open) flush();
}

void DirectTunnel::endOfRequest() {
  end_pending_ = true;
  if (state_ == State::Open) flush();
}

// Writes, in order: the request head, the pending buffer (chunk-framed when
// the request body is chunked), the end of the request. One write in flight.
void DirectTunnel::flush() {
  if (writing_ || state_ != State::Open) return;
  std::vector<asio::const_buffer> bufs;
  const bool chunked = !head_->is_connect && head_->framing == BodyFraming::Chunked;
  bool with_data = false;
  bool with_end = false;
  if (!head_bytes_.empty()) bufs.push_back(asio::buffer(head_bytes_));
  if (pending_done_) {
    with_data = true;
    if (chunked && !pending_.empty()) {
      const int n =
          std::snprintf(chunk_header_.data(), chunk_header_.size(), "%zx\r\n", pending_.size());
      bufs.push_back(asio::buffer(chunk_header_.data(), static_cast<size_t>(n)));
      bufs.push_back(asio::buffer(pending_));
      bufs.push_back(asio::buffer("\r\n", 2));
    } else if (!pending_.empty()) {
      bufs.push_back(asio::buffer(pending_));
    }
  } else if (end_pending_ && !end_sent_) {
    with_end = true;
    if (chunked) bufs.push_back(asio::buffer("0\r\n\r\n", 5));
  }
  if (bufs.empty()) {
    if (with_end) {
      end_sent_ = true;
      // CONNECT: pass the app's FIN on; the other direction stays open.
      if (head_->is_connect) {
        asio::error_code ec;
        socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
      }
    }
    if (with_data) {
      Done d = std::move(pending_done_);
      pending_done_ = nullptr;
      pending_ = {};
      d();
    }
    return;
  }
  writing_ = true;
  asio::async_write(
      socket_, bufs,
      [self = shared_from_this(), with_data, with_end](const asio::error_code& ec, size_t) {
        self->writing_ = false;
        if (self->state_ != State::Open) return;
        if (ec) {
          self->reset(Result::UpstreamReset,
                      "writing to " + self->info_->upstream + " failed: " + ec.message());
          return;
        }
        self->head_bytes_.clear();
        if (with_end) self->end_sent_ = true;
        if (with_data) {
          Done d = std::move(self->pending_done_);
          self->pending_done_ = nullptr;
          self->pending_ = {};
          d();  // may call send()/endOfRequest() again
        }
        self->flush();
      });
}

void DirectTunnel::readMore() {
  if (state_ != State::Open) return;
  socket_.async_read_some(
      asio::buffer(read_buf_), [self = shared_from_this()](const asio::error_code& ec, size_t n) {
        if (self->state_ != State::Open) return;
        if (ec == asio::error::eof) return self->onEof();
        if (ec) {
          self->reset(Result::UpstreamReset,
                      "reading from " + self->info_->upstream + " failed: " + ec.message());
          return;
        }
        self->onRead(n);
      });
}

void DirectTunnel::onRead(size_t n) {
  if (head_->is_connect) {
    callbacks_->onResponseData(std::string_view(read_buf_.data(), n),
                               [self = shared_from_this()] { self->readMore(); });
    return;
  }
  body_.clear();
  size_t off = 0;
  bool message_done = false;
  while (off < n || !message_done) {
    size_t used = 0;
    const http1::Event ev = parser_->feed(read_buf_.data() + off, n - off, &used, &body_);
    off += used;
    if (ev == http1::Event::HeadComplete) {
      const ResponseHead& r = parser_->response();
      if (r.status >= 100 && r.status < 200) {
        // Interim responses (100 Continue…) are ours to swallow: the app got
        // its own 100 Continue from h2gate.
        skipping_interim_ = true;
        continue;
      }
      response_started_ = true;
      callbacks_->onResponseHead(r);
      if (!callbacks_) return;
    } else if (ev == http1::Event::MessageComplete) {
      if (skipping_interim_) {
        skipping_interim_ = false;
        continue;
      }
      message_done = true;
      break;
    } else if (ev == http1::Event::Error) {
      const std::string reason =
          "bad response from " + info_->upstream + ": " + parser_->errorReason();
      if (!response_started_)
        fail(502, Result::UpstreamReset, reason);
      else
        reset(Result::UpstreamReset, reason);
      return;
    } else if (ev == http1::Event::NeedMore || ev == http1::Event::Body) {
      if (off >= n) break;
    }
  }
  deliverBody(message_done);
}

void DirectTunnel::deliverBody(bool message_done) {
  auto after = [self = shared_from_this(), message_done] {
    if (self->state_ != State::Open || !self->callbacks_) return;
    if (message_done) {
      self->setState(State::Closed);
      asio::error_code ec;
      self->socket_.close(ec);
      TunnelCallbacks* cb = self->callbacks_;
      self->callbacks_ = nullptr;
      cb->onResponseEnd();
    } else {
      self->readMore();
    }
  };
  if (body_.empty()) {
    after();
    return;
  }
  callbacks_->onResponseData(body_, std::move(after));
}

void DirectTunnel::onEof() {
  if (head_->is_connect) {
    // The destination finished sending; the app's direction may go on.
    TunnelCallbacks* cb = callbacks_;
    cb->onResponseEnd();
    return;
  }
  body_.clear();
  const http1::Event ev = parser_->finish();
  if (ev == http1::Event::MessageComplete && response_started_) {
    deliverBody(true);
    return;
  }
  const std::string reason =
      info_->upstream + " closed the connection " +
      (response_started_ ? "before the response was complete" : "without sending a response");
  if (!response_started_)
    fail(502, Result::UpstreamReset, reason);
  else
    reset(Result::UpstreamReset, reason);
}

void DirectTunnel::fail(int status, Result result, std::string reason) {
  TunnelCallbacks* cb = callbacks_;
  abort();
  if (cb) cb->onFailed(status, result, std::move(reason));
}

void DirectTunnel::reset(Result result, std::string reason) {
  TunnelCallbacks* cb = callbacks_;
  abort();
  if (cb) cb->onReset(result, std::move(reason));
}

void DirectTunnel::abort() {
  callbacks_ = nullptr;
  if (state_ == State::Closed) return;
  setState(State::Closed);
  asio::error_code ec;
  connect_timer_.cancel();
  resolver_.cancel();
  socket_.close(ec);
  pending_done_ = nullptr;
}

}  // namespace h2gate::upstream
