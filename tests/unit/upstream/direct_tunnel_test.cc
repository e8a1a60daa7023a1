// DIRECT (gateway/upstream/direct_tunnel.h): h2gate connects to the
// destination itself. Against an origin on loopback: the request arrives in
// origin form on a fresh connection, what the app sent while h2gate was
// still connecting arrives after it, and every way of not getting there is a
// status and a reason the user can read.
#include "gateway/upstream/direct_tunnel.h"

#include <chrono>
#include <memory>
#include <optional>

#include <asio.hpp>
#include <catch2/catch.hpp>

#include "gateway/net/ip_address.h"
#include "gateway/upstream/router.h"
#include "tests/unit/upstream/io_util.h"
#include "tests/unit/upstream/recording_app.h"

using namespace h2gate;
using namespace h2gate::upstream;
using namespace std::chrono_literals;
using asio::ip::tcp;

namespace {

using AppEnd = test::RecordingApp;

// The destination, and one request to it.
struct Direct {
  Direct() { origin.non_blocking(true); }
  ~Direct() {
    if (tunnel) tunnel->abort();
    tunnel.reset();
    io.restart();
    io.poll();
  }
  uint16_t port() const { return origin.local_endpoint().port(); }
  void start(const std::string& method, const std::string& host, uint16_t to_port,
             const AddressPolicy* policy = nullptr) {
    head.method = method;
    head.is_connect = method == "CONNECT";
    head.host = host;
    head.port = to_port;
    head.path = "/x?y";
    head.target = head.is_connect ? head.authority() : "http://" + head.authority() + "/x?y";
    head.headers.push_back({"Host", head.authority()});
    if (method == "POST") {
      head.framing = BodyFraming::ContentLength;
      head.content_length = 5;
      head.headers.push_back({"Content-Length", "5"});
    }
    tunnel = std::make_shared<DirectTunnel>(io, 5s, 1, 1, net::SendBufferConfig{}, policy);
    tunnel->open(head, info, app);
  }
  // Accepts the tunnel's connection, when it comes.
  bool accept() {
    return test::runUntil(
        io,
        [&] {
          asio::error_code ec;
          conn = origin.accept(ec);
          if (ec) return false;
          conn.non_blocking(true);
          return true;
        },
        5000ms);
  }
  bool originReads(const std::string& want) {
    return test::runUntil(
        io,
        [&] {
          test::readAvailable(conn, received);
          return received.find(want) != std::string::npos;
        },
        5000ms);
  }
  bool waitFor(const std::function<bool()>& cond) { return test::runUntil(io, cond, 5000ms); }

  asio::io_context io;
  tcp::acceptor origin{io, tcp::endpoint(asio::ip::address_v4::loopback(), 0)};
  tcp::socket conn{io};
  std::string received;
  RequestHead head;
  StreamInfo info;
  AppEnd app;
  std::shared_ptr<DirectTunnel> tunnel;
};

// Refuses 127.0.0.0/8 as the acl filter refuses a denied range.
struct NoLoopback : AddressPolicy {
  std::optional<Refusal> checkAddress(const RequestHead& head, const StreamInfo&,
                                      const net::IpAddress& ip) const override {
    ++asked;
    if (!ip.v6 && ip.bytes[0] == 127)
      return Refusal{403, "destination " + head.authority() + " denied by policy"};
    return std::nullopt;
  }
  mutable int asked = 0;
};

}  // namespace

TEST_CASE("direct: a request goes in origin form on its own connection, the body after it",
          "[upstream][direct_tunnel]") {
  Direct d;
  d.start("POST", "127.0.0.1", d.port());
  // The app's body, sent while the connection is still being made.
  bool sent = false;
  d.tunnel->send("hello", [&] { sent = true; });
  d.tunnel->endOfRequest();
  CHECK(d.info.protocol == "direct");
  REQUIRE(d.accept());
  REQUIRE(d.originReads("\r\n\r\nhello"));
  CHECK(d.waitFor([&] { return sent; }));  // acknowledged once written
  CHECK_THAT(d.received, Catch::StartsWith("POST /x?y HTTP/1.1\r\n"));
  CHECK_THAT(d.received, Catch::Contains("Connection: close\r\n"));
  CHECK(d.info.upstream == "127.0.0.1:" + std::to_string(d.port()));
  asio::write(d.conn,
              asio::buffer(std::string("HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok")));
  REQUIRE(d.waitFor([&] { return d.app.ended; }));
  CHECK(d.app.status == 201);
  CHECK(d.app.body == "ok");
}

TEST_CASE("direct: CONNECT to localhost, without DNS, relays both ways",
          "[upstream][direct_tunnel]") {
  for (const char* name : {"localhost", "LocalHost.", "app.localhost"}) {
    INFO(name);
    Direct d;
    d.start("CONNECT", name, d.port());
    d.tunnel->send("ping", [] {});
    REQUIRE(d.accept());
    REQUIRE(d.waitFor([&] { return d.app.status == 200; }));
    REQUIRE(d.originReads("ping"));
    CHECK(d.received == "ping");
    asio::write(d.conn, asio::buffer(std::string("pong")));
    REQUIRE(d.waitFor([&] { return d.app.body == "pong"; }));
  }
  CHECK(isLocalhostName("localhost"));
  CHECK(isLocalhostName("a.b.LOCALHOST."));
  CHECK_FALSE(isLocalhostName("localhost.example"));
  CHECK_FALSE(isLocalhostName("notlocalhost"));
  CHECK_FALSE(isLocalhostName(".localhost"));
  CHECK_FALSE(isLocalhostName(""));
}

TEST_CASE("direct: a port nobody listens on: 502 with the address tried",
          "[upstream][direct_tunnel]") {
  Direct d;
  const uint16_t port = d.port();
  d.origin.close();
  d.start("GET", "127.0.0.1", port);
  d.tunnel->endOfRequest();
  REQUIRE(d.waitFor([&] { return d.app.failures > 0; }));
  CHECK(d.app.failures == 1);
  CHECK(d.app.status == 502);
  CHECK(d.app.result == Result::ConnectFailed);
  const std::string where = "127.0.0.1:" + std::to_string(port);
  CHECK_THAT(d.app.reason,
             Catch::StartsWith("connecting to " + where + " failed: " + where + ": "));
}

TEST_CASE("direct: the unspecified address is no destination", "[upstream][direct_tunnel]") {
  Direct d;
  d.start("CONNECT", "0.0.0.0", d.port());
  REQUIRE(d.waitFor([&] { return d.app.failures > 0; }));
  CHECK(d.app.status == 502);
  CHECK(d.app.reason == "connecting to 0.0.0.0:" + std::to_string(d.port()) +
                            " failed: 0.0.0.0 resolves only to the unspecified address 0.0.0.0, "
                            "which means this host and is not a destination");
  asio::error_code ec;
  d.origin.accept(ec);
  CHECK(ec);  // nothing connected (the acceptor is non-blocking: would_block)
}

TEST_CASE("direct: the address policy refuses before any connect", "[upstream][direct_tunnel]") {
  Direct d;
  NoLoopback policy;
  d.start("CONNECT", "localhost", d.port(), &policy);
  REQUIRE(d.waitFor([&] { return d.app.failures > 0; }));
  CHECK(policy.asked == 1);  // the first refusal refuses the request
  CHECK(d.app.status == 403);
  CHECK(d.app.result == Result::Rejected);
  CHECK(d.app.reason == "destination localhost:" + std::to_string(d.port()) + " denied by policy");
  d.io.restart();
  d.io.poll();
  asio::error_code ec;
  d.origin.accept(ec);
  CHECK(ec);  // never connected
}

TEST_CASE("direct: aborted while connecting, the app hears nothing more",
          "[upstream][direct_tunnel]") {
  Direct d;
  d.start("CONNECT", "127.0.0.1", d.port());
  d.tunnel->abort();
  test::runUntil(
      d.io, [] { return false; }, 200ms);
  CHECK(d.app.status == 0);
  CHECK(d.app.failures == 0);
}
