// The client TLS of a cluster (gateway/net/tls_context.h), through real
// handshakes with a TLS server on loopback: verification is on unless the
// config says otherwise, a certificate of another CA or for another name is
// refused with a reason a user can act on, and a broken setting is a clear
// error at start.
#include "gateway/net/tls_context.h"

#include <chrono>
#include <memory>

#include <asio.hpp>
#include <catch2/catch.hpp>

#include "gateway/upstream/transport.h"
#include "tests/unit/upstream/io_util.h"
#include "tests/unit/upstream/tls_server.h"

using namespace h2gate;
using namespace std::chrono_literals;

namespace {

std::shared_ptr<net::TlsContext> make(const config::TlsContext& cfg, std::string* error) {
  return net::TlsContext::create(cfg, "corp", error);
}

struct Handshake {
  bool ok = false;
  std::string why;  // TlsContext::verifyError, else the handshake's error
  std::string alpn;
};

// One handshake to a fresh server, verifying `host` with `tls`.
Handshake handshake(const test::TlsCerts& certs, const net::TlsContext& tls,
                    const std::string& host) {
  asio::io_context io;
  test::TlsServer server(
      io, certs, [](SSL*, int) {}, "http/1.1");
  SSL* ssl = SSL_new(tls.native());
  REQUIRE(ssl);
  asio::ip::tcp::socket s(io);
  s.connect({asio::ip::make_address("127.0.0.1"), server.port()});
  upstream::Transport t(std::move(s), ssl);
  REQUIRE(tls.prepare(ssl, host, host + ":" + std::to_string(server.port())).empty());
  bool done = false;
  asio::error_code ec;
  t.asyncHandshake([&](const asio::error_code& e) {
    ec = e;
    done = true;
  });
  REQUIRE(test::runUntil(
      io, [&] { return done; }, 10000ms));
  Handshake h;
  h.ok = !ec;
  h.why = net::TlsContext::verifyError(ssl);
  if (h.why.empty() && ec) h.why = ec.message();
  h.alpn = net::TlsContext::selectedAlpn(ssl);
  t.close();
  return h;
}

}  // namespace

TEST_CASE("tls context: verification is on by default", "[net][tls_context]") {
  std::string error;
  const auto tls = make(config::TlsContext{}, &error);  // the system bundle
  INFO(error);
  REQUIRE(tls);
  CHECK(tls->verifies());
  CHECK(SSL_CTX_get_verify_mode(tls->native()) == SSL_VERIFY_PEER);
  CHECK(SSL_CTX_get_min_proto_version(tls->native()) == TLS1_2_VERSION);

  // A test CA is not in the system bundle: its server is refused.
  test::TlsCerts certs;
  const Handshake h = handshake(certs, *tls, "localhost");
  CHECK_FALSE(h.ok);
  CHECK_THAT(h.why, Catch::StartsWith("certificate verify failed: self-signed certificate in "));
}

TEST_CASE("tls context: the trusted CA's server by name and by IP; ALPN as offered",
          "[net][tls_context]") {
  test::TlsCerts certs;
  config::TlsContext cfg;
  cfg.trusted_ca = certs.ca.caCertPath();
  std::string error;
  const auto tls = make(cfg, &error);
  INFO(error);
  REQUIRE(tls);
  for (const char* host : {"localhost", "127.0.0.1"}) {
    INFO(host);
    const Handshake h = handshake(certs, *tls, host);
    CHECK(h.ok);
    CHECK(h.why.empty());
    CHECK(h.alpn == "http/1.1");
  }
}

TEST_CASE("tls context: a wrong CA or a wrong name is refused", "[net][tls_context]") {
  test::TlsCerts certs;
  std::string error;
  config::TlsContext other;
  other.trusted_ca = certs.other_ca.caCertPath();
  const auto wrong_ca = make(other, &error);
  REQUIRE(wrong_ca);
  Handshake h = handshake(certs, *wrong_ca, "localhost");
  CHECK_FALSE(h.ok);
  CHECK_THAT(h.why, Catch::StartsWith("certificate verify failed: self-signed certificate in "));

  config::TlsContext right;
  right.trusted_ca = certs.ca.caCertPath();
  const auto tls = make(right, &error);
  REQUIRE(tls);
  h = handshake(certs, *tls, "proxy.other.test");  // not among the certificate's names
  CHECK_FALSE(h.ok);
  CHECK_THAT(h.why, Catch::Contains("hostname mismatch"));
  h = handshake(certs, *tls, "127.0.0.2");
  CHECK_FALSE(h.ok);
  CHECK_THAT(h.why, Catch::Contains("IP address mismatch"));

  // The configured SNI is the name verified, whatever the endpoint is called.
  right.sni = "localhost";
  const auto with_sni = make(right, &error);
  REQUIRE(with_sni);
  CHECK(handshake(certs, *with_sni, "127.0.0.2").ok);
}

TEST_CASE("tls context: insecure_skip_verify takes any certificate", "[net][tls_context]") {
  test::TlsCerts certs;
  config::TlsContext cfg;
  cfg.trusted_ca = certs.other_ca.caCertPath();
  cfg.insecure_skip_verify = true;
  std::string error;
  const auto tls = make(cfg, &error);
  REQUIRE(tls);
  CHECK_FALSE(tls->verifies());
  CHECK(handshake(certs, *tls, "proxy.other.test").ok);
}

TEST_CASE("tls context: broken settings are errors naming what is wrong", "[net][tls_context]") {
  std::string error;
  config::TlsContext missing;
  missing.trusted_ca = "/nonexistent/ca.pem";
  CHECK_FALSE(make(missing, &error));
  CHECK_THAT(error, Catch::StartsWith("cluster corp: cannot load trusted CA /nonexistent/ca.pem"));

  config::TlsContext version;
  version.tls_minimum_protocol_version = "TLSv1_0";
  CHECK_FALSE(make(version, &error));
  CHECK(error == "cluster corp: unsupported TLS version (TLSv1_2, TLSv1_3)");

  test::TlsCerts certs;
  config::TlsContext client;
  client.trusted_ca = certs.ca.caCertPath();
  client.certificate_chain = certs.server.cert;
  client.private_key = certs.other_ca.caCertPath();  // not a key
  CHECK_FALSE(make(client, &error));
  CHECK_THAT(error,
             Catch::StartsWith("cluster corp: cannot use client certificate " + certs.server.cert));
}
