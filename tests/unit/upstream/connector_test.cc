// Connector (gateway/upstream/connector.h): one connection to an upstream
// proxy endpoint, against peers on loopback: a TLS server of the test's CA, a
// port nobody listens on, a listener that never completes a handshake. What
// is checked is what the pool and the user get: a Transport and the ALPN
// protocol, or a status and a reason to act on.
#include "gateway/upstream/connector.h"

#include <chrono>
#include <optional>

#include <asio.hpp>
#include <catch2/catch.hpp>

#include "gateway/net/tls_context.h"
#include "tests/unit/upstream/io_util.h"
#include "tests/unit/upstream/tls_server.h"

using namespace h2gate;
using namespace h2gate::upstream;
using namespace std::chrono_literals;
using asio::ip::tcp;

namespace {

std::shared_ptr<net::TlsContext> tlsTrusting(const std::string& ca) {
  config::TlsContext cfg;
  cfg.trusted_ca = ca;
  std::string error;
  auto tls = net::TlsContext::create(cfg, "c", &error);
  INFO(error);
  REQUIRE(tls);
  return tls;
}

// Runs one Connector to `address`:`port` until it reports.
struct Attempt {
  Attempt(asio::io_context& io, const std::string& address, uint16_t port,
          std::shared_ptr<net::TlsContext> tls, config::Duration timeout = 5s)
      : connector(std::make_shared<Connector>(io, config::SocketAddress{address, port},
                                              std::move(tls), timeout, 1)) {}
  ConnectOutcome run(asio::io_context& io) {
    std::optional<ConnectOutcome> out;
    connector->start([&](ConnectOutcome o) { out = std::move(o); });
    REQUIRE(test::runUntil(
        io, [&] { return out.has_value(); }, 10000ms));
    return std::move(*out);
  }
  std::shared_ptr<Connector> connector;
};

// Keeps a TLS server's connection open until the client closes it.
void holdOpen(SSL* ssl, int) {
  char b[256];
  size_t n = 0;
  while (SSL_read_ex(ssl, b, sizeof b, &n) == 1) {
  }
}

}  // namespace

TEST_CASE("connector: TLS to a proxy of the trusted CA, with ALPN", "[upstream][connector]") {
  asio::io_context io;
  test::TlsCerts certs;
  test::TlsServer server(io, certs, holdOpen, "h2");
  Attempt a(io, "127.0.0.1", server.port(), tlsTrusting(certs.ca.caCertPath()));
  ConnectOutcome out = a.run(io);
  INFO(out.reason);
  REQUIRE(out.transport);
  CHECK(out.transport->isTls());
  CHECK(out.alpn == "h2");
  CHECK(out.peer == "127.0.0.1:" + std::to_string(server.port()));
  CHECK(out.result == Result::Ok);
  CHECK(out.tls_time > 0ns);
  out.transport->close();
  REQUIRE(test::runUntil(
      io, [&] { return server.done(); }, 10000ms));
  CHECK(server.offered() == "h2,http/1.1");
}

TEST_CASE("connector: setHttp1Only offers only http/1.1", "[upstream][connector]") {
  asio::io_context io;
  test::TlsCerts certs;
  test::TlsServer server(io, certs, holdOpen, "h2");
  Attempt a(io, "localhost", server.port(), tlsTrusting(certs.ca.caCertPath()));
  a.connector->setHttp1Only();
  ConnectOutcome out = a.run(io);
  INFO(out.reason);
  REQUIRE(out.transport);
  CHECK(out.alpn.empty());  // the server wanted h2, which was not offered
  out.transport->close();
  REQUIRE(test::runUntil(
      io, [&] { return server.done(); }, 10000ms));
  CHECK(server.offered() == "http/1.1");
}

TEST_CASE("connector: a proxy certificate from another CA is refused, with the reason",
          "[upstream][connector]") {
  asio::io_context io;
  test::TlsCerts certs;
  test::TlsServer server(io, certs, holdOpen);
  Attempt a(io, "127.0.0.1", server.port(), tlsTrusting(certs.other_ca.caCertPath()));
  const ConnectOutcome out = a.run(io);
  CHECK_FALSE(out.transport);
  CHECK(out.status == 502);
  CHECK(out.result == Result::ConnectFailed);
  CHECK(out.tls_failed);
  CHECK_THAT(out.reason, Catch::StartsWith("TLS handshake with proxy 127.0.0.1:" +
                                           std::to_string(server.port()) + " failed: "));
  CHECK_THAT(out.reason,
             Catch::Contains("failed: certificate verify failed: self-signed certificate in "));
}

TEST_CASE("connector: plain TCP, and a port nobody listens on", "[upstream][connector]") {
  asio::io_context io;
  tcp::acceptor listening(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  const uint16_t port = listening.local_endpoint().port();
  {
    Attempt a(io, "127.0.0.1", port, nullptr);
    ConnectOutcome out = a.run(io);
    REQUIRE(out.transport);
    CHECK_FALSE(out.transport->isTls());
    CHECK(out.alpn.empty());
    CHECK(out.peer == "127.0.0.1:" + std::to_string(port));
  }
  listening.close();  // the port is free now: refused
  Attempt a(io, "127.0.0.1", port, nullptr);
  const ConnectOutcome out = a.run(io);
  CHECK_FALSE(out.transport);
  CHECK(out.status == 502);
  CHECK(out.result == Result::ConnectFailed);
  CHECK_FALSE(out.tls_failed);
  CHECK_THAT(out.reason, Catch::StartsWith("connecting to proxy 127.0.0.1:" + std::to_string(port) +
                                           " failed: 127.0.0.1:"));
}

TEST_CASE("connector: a handshake that never comes times out: 504", "[upstream][connector]") {
  asio::io_context io;
  // Accepts (the kernel does, from its backlog) and never says a word.
  tcp::acceptor mute(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  test::TlsCerts certs;
  Attempt a(io, "127.0.0.1", mute.local_endpoint().port(), tlsTrusting(certs.ca.caCertPath()),
            300ms);
  const auto start = std::chrono::steady_clock::now();
  const ConnectOutcome out = a.run(io);
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  CHECK_FALSE(out.transport);
  CHECK(out.status == 504);
  CHECK(out.result == Result::ConnectTimeout);
  CHECK_FALSE(out.tls_failed);  // a timeout, not a failed handshake
  CHECK(out.reason == "connecting to proxy 127.0.0.1:" +
                          std::to_string(mute.local_endpoint().port()) + " timed out");
}

TEST_CASE("connector: cancel() means no report", "[upstream][connector]") {
  asio::io_context io;
  tcp::acceptor mute(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  test::TlsCerts certs;
  auto c = std::make_shared<Connector>(
      io, config::SocketAddress{"127.0.0.1", mute.local_endpoint().port()},
      tlsTrusting(certs.ca.caCertPath()), 200ms, 1);
  bool reported = false;
  c->start([&](ConnectOutcome) { reported = true; });
  test::runUntil(
      io, [] { return false; }, 50ms);
  c->cancel();
  test::runUntil(
      io, [] { return false; }, 500ms);  // past the timeout
  CHECK_FALSE(reported);
}
