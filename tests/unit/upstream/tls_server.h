// A TLS server for unit tests on loopback: blocking OpenSSL on a thread of
// its own accepts one connection and runs the test's function on it, while
// the client side runs on the test's io_context. Its certificate comes from
// a CA made at test time (TlsCerts), with a second CA that did not sign it.
#pragma once

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <atomic>
#include <csignal>
#include <functional>
#include <string>
#include <thread>

#include <asio.hpp>
#include <catch2/catch.hpp>

#include "tests/support/temp_dir.h"
#include "tests/support/test_ca.h"

namespace h2gate::test {

struct TlsCerts {
  TempDir dir{"tls-server"};
  TestCA ca{dir.path().string()};
  CertFiles server = ca.issueServer("server");
  TempDir other_dir{"tls-server-other"};
  TestCA other_ca{other_dir.path().string(), "another CA"};
};

class TlsServer {
 public:
  using Fn = std::function<void(SSL*, int fd)>;
  // `alpn`: the protocol the server picks when the client offers it ("":
  // no ALPN on the server's side).
  TlsServer(asio::io_context& io, const TlsCerts& certs, Fn fn, std::string alpn = "")
      : acceptor_(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        alpn_(std::move(alpn)) {
#if !defined(_WIN32)
    // OpenSSL's socket BIO writes with write(): a client that closed first
    // (a refused handshake, a TLS 1.3 ticket sent after the client is done)
    // is EPIPE, not a SIGPIPE that ends the test program (h2gate ignores it
    // too: ServerSignals::prepareProcess).
    std::signal(SIGPIPE, SIG_IGN);
#endif
    ctx_ = SSL_CTX_new(TLS_server_method());
    REQUIRE(SSL_CTX_use_certificate_chain_file(ctx_, certs.server.chain.c_str()) == 1);
    REQUIRE(SSL_CTX_use_PrivateKey_file(ctx_, certs.server.key.c_str(), SSL_FILETYPE_PEM) == 1);
    if (!alpn_.empty()) SSL_CTX_set_alpn_select_cb(ctx_, &TlsServer::selectAlpn, this);
    thread_ = std::thread([this, fn = std::move(fn)] {
      asio::error_code ec;
      asio::ip::tcp::socket s = acceptor_.accept(ec);
      if (ec) return;
      SSL* ssl = SSL_new(ctx_);
      SSL_set_fd(ssl, static_cast<int>(s.native_handle()));
      if (SSL_accept(ssl) == 1) fn(ssl, static_cast<int>(s.native_handle()));
      SSL_free(ssl);
      ERR_clear_error();
      done_ = true;
    });
  }
  ~TlsServer() {
    asio::error_code ec;
    acceptor_.close(ec);
    if (thread_.joinable()) thread_.join();
    SSL_CTX_free(ctx_);
  }
  TlsServer(const TlsServer&) = delete;
  TlsServer& operator=(const TlsServer&) = delete;
  uint16_t port() const {
    return acceptor_.local_endpoint().port();
  }
  bool done() const {
    return done_;
  }
  // The protocols the client offered in ALPN, as "h2,http/1.1" (with `alpn`
  // set; read once done()).
  const std::string& offered() const {
    return offered_;
  }

 private:
  static int selectAlpn(SSL*, const unsigned char** out, unsigned char* outlen,
                        const unsigned char* in, unsigned inlen, void* arg) {
    auto* self = static_cast<TlsServer*>(arg);
    int found = SSL_TLSEXT_ERR_NOACK;
    for (unsigned i = 0; i < inlen;) {
      const unsigned len = in[i];
      const std::string p(reinterpret_cast<const char*>(in + i + 1), len);
      self->offered_ += (self->offered_.empty() ? "" : ",") + p;
      if (p == self->alpn_) {
        *out = in + i + 1;
        *outlen = static_cast<unsigned char>(len);
        found = SSL_TLSEXT_ERR_OK;
      }
      i += 1 + len;
    }
    return found;
  }

  asio::ip::tcp::acceptor acceptor_;
  std::string alpn_;
  std::string offered_;
  SSL_CTX* ctx_ = nullptr;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace h2gate::test
