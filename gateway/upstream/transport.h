// A connection to an upstream proxy: TLS over TCP (the normal case) or plain
// TCP (an http:// proxy). Upstream code reads and writes through this and
// does not care which.
#pragma once

#include <memory>
#include <string>

#include <asio.hpp>
#include <asio/ssl.hpp>

#include "gateway/net/send_buffer.h"

namespace h2gate::upstream {

class Transport {
 public:
  using TlsStream = asio::ssl::stream<asio::ip::tcp::socket>;
  // `tuner` (may be null) follows the socket's send buffer after writes.
  explicit Transport(asio::ip::tcp::socket socket,
                     std::unique_ptr<net::SendBufferTuner> tuner = nullptr)
      : plain_(std::make_unique<asio::ip::tcp::socket>(std::move(socket))),
        tuner_(std::move(tuner)) {}
  explicit Transport(std::unique_ptr<TlsStream> tls,
                     std::unique_ptr<net::SendBufferTuner> tuner = nullptr)
      : tls_(std::move(tls)), tuner_(std::move(tuner)) {}

  asio::ip::tcp::socket& socket() { return tls_ ? tls_->next_layer() : *plain_; }
  bool isTls() const { return tls_ != nullptr; }
  SSL* ssl() { return tls_ ? tls_->native_handle() : nullptr; }

  template <typename Buffers, typename Handler>
  void asyncReadSome(const Buffers& b, Handler&& h) {
    if (tls_)
      tls_->async_read_some(b, std::forward<Handler>(h));
    else
      plain_->async_read_some(b, std::forward<Handler>(h));
  }
  // Reads what has already arrived, without waiting: returns 0 with
  // asio::error::would_block when no application data is there (TLS
  // records such as a TLS 1.3 session ticket are processed and give none).
  // EOF (TLS: close_notify, or a TCP FIN without one) is an error as with
  // any read. MUST NOT be called while an asynchronous read is pending. For
  // idle pooled connections: see UpstreamPool.
  template <typename Buffers>
  size_t readAvailable(const Buffers& b, asio::error_code& ec) {
    asio::ip::tcp::socket& s = socket();
    const bool was_non_blocking = s.non_blocking();
    s.non_blocking(true, ec);
    if (ec) return 0;
    const size_t n = readSomeNow(b, ec);
    asio::error_code ignored;
    s.non_blocking(was_non_blocking, ignored);
    return n;
  }
  // A read on a socket set non-blocking by its owner: returns 0 with
  // asio::error::would_block when nothing (no whole TLS record) is there.
  template <typename Buffers>
  size_t readSomeNow(const Buffers& b, asio::error_code& ec) {
    return tls_ ? tls_->read_some(b, ec) : plain_->read_some(b, ec);
  }
  // The Transport MUST stay at its address until the handler ran (it is
  // always held by unique_ptr).
  template <typename Buffers, typename Handler>
  void asyncWrite(const Buffers& b, Handler&& h) {
    auto done = [this, h = std::forward<Handler>(h)](const asio::error_code& ec, size_t n) mutable {
      if (!ec && tuner_) tuner_->afterSend();
      h(ec, n);
    };
    if (tls_)
      asio::async_write(*tls_, b, std::move(done));
    else
      asio::async_write(*plain_, b, std::move(done));
  }
  // Half-close our direction with a TCP FIN, under TLS too. (A close_notify
  // would need asio's shutdown operation, which also waits to read the
  // peer's, clashing with the read that is always pending.) HTTP/1.1 proxies
  // such as squid end the tunnel on it, which is what an app's FIN means.
  void shutdownSend() {
    asio::error_code ec;
    socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  }
  void close() {
    asio::error_code ec;
    socket().close(ec);
  }

 private:
  std::unique_ptr<TlsStream> tls_;
  std::unique_ptr<asio::ip::tcp::socket> plain_;
  std::unique_ptr<net::SendBufferTuner> tuner_;
};

}  // namespace h2gate::upstream
