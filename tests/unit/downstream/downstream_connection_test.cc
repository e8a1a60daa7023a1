// DownstreamConnection, the HTTP/1 proxy state machine, on its own, with the
// fake upstream of connection_fixture.h. The last case routes through the
// real WorkerRouter instead, to see a fallback carry a CONNECT. Its timeouts
// (downstream_timers.cc) are downstream_timers_test.cc's.
#include "gateway/downstream/downstream_connection.h"

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <asio.hpp>
#include <catch2/catch.hpp>

#include "gateway/http1/codec.h"
#include "gateway/metrics/registry.h"
#include "gateway/upstream/health.h"
#include "gateway/upstream/pool.h"
#include "tests/unit/downstream/connection_fixture.h"
#include "tests/unit/upstream/io_util.h"

using namespace h2gate;
using namespace h2gate::downstream;
using namespace std::chrono_literals;
using asio::ip::tcp;
using namespace h2gate::downstream::fixture;

TEST_CASE("keep-alive: requests one after another on one connection, each its own tunnel",
          "[downstream]") {
  Fixture f;
  f.connect();
  f.app.send(kGetOne);
  FakeTunnel& one = f.tunnel(0);
  CHECK(one.head->method == "GET");
  CHECK(one.head->target == "http://a.test/one");
  CHECK(one.ended);  // no body: the request is complete at once
  respond(one, "first");
  REQUIRE(f.received("first"));
  CHECK(f.app.received.starts_with("HTTP/1.1 200 OK\r\n"));
  CHECK(f.app.received.find("Connection: close") == std::string::npos);

  f.app.send(kGetTwo);
  FakeTunnel& two = f.tunnel(1);
  CHECK(two.head->target == "http://a.test/two");
  CHECK(two.info->stream_id == 2);
  respond(two, "second");
  REQUIRE(f.received("second"));
  f.settle();
  CHECK_FALSE(f.app.ended());
  CHECK_FALSE(f.closed);
}

TEST_CASE("pipelining: a second request sent at once waits for the first's response",
          "[downstream]") {
  Fixture f;
  f.connect();
  f.app.send(kGetOne + kGetTwo);
  FakeTunnel& one = f.tunnel(0);
  f.settle();
  CHECK(f.router.tunnels.size() == 1);  // the second is not routed yet
  respond(one, "first");
  FakeTunnel& two = f.tunnel(1);
  CHECK(two.head->target == "http://a.test/two");
  respond(two, "second");
  REQUIRE(f.received("second"));
  // In order, each whole.
  const size_t a = f.app.received.find("first");
  const size_t b = f.app.received.find("HTTP/1.1 200", a);
  CHECK(a != std::string::npos);
  CHECK(b != std::string::npos);
  CHECK(f.app.received.find("second", b) != std::string::npos);
}

TEST_CASE("CONNECT: early data waits for the tunnel, then bytes flow both ways", "[downstream]") {
  Fixture f;
  f.connect();
  f.app.send(kConnect + "EARLY-BYTES");
  FakeTunnel& t = f.tunnel();
  CHECK(t.head->is_connect);
  CHECK(t.head->authority() == "dest.test:443");
  f.settle();
  CHECK(t.sent.empty());  // nothing goes up before the tunnel is open
  CHECK(f.app.received.empty());

  t.cb->onResponseHead(responseHead(200));
  REQUIRE(f.received("HTTP/1.1 200 Connection established\r\n\r\n"));
  REQUIRE(f.waitFor([&] { return t.sent == "EARLY-BYTES"; }));

  bool taken = false;
  t.cb->onResponseData("from-destination", [&] { taken = true; });
  CHECK(taken);
  REQUIRE(f.received("from-destination"));
  f.app.send("more");
  REQUIRE(f.waitFor([&] { return t.sent == "EARLY-BYTESmore"; }));
  CHECK(f.conn->id() == 7);
  CHECK(t.info->bytes_up == 15);
  CHECK(t.info->bytes_down == 16);
}

TEST_CASE("a response the app does not read holds the upstream's done until it does",
          "[downstream]") {
  Fixture f;
  f.connect();
  f.app.send(kConnect);
  FakeTunnel& t = f.tunnel();
  t.cb->onResponseHead(responseHead(200));
  REQUIRE(f.received("established"));
  // Stop reading; hand over more than the socket buffers hold.
  f.app.socket.cancel();
  f.settle();
  const std::string big(32 << 20, 'x');
  bool taken = false;
  t.cb->onResponseData(big, [&] { taken = true; });
  f.settle(200ms);
  CHECK_FALSE(taken);  // flow control: the producer waits for the app
  f.app.received.clear();
  f.app.error = {};
  f.app.startReading();
  REQUIRE(f.waitFor([&] { return taken; }, 20000ms));
  REQUIRE(f.waitFor([&] { return f.app.received.size() == big.size(); }, 20000ms));
}

TEST_CASE("error replies: bad head 400, no route 502, upstream failure, bad Expect 417",
          "[downstream]") {
  SECTION("a head that is not HTTP gets 400 and the connection closes") {
    Fixture f;
    f.connect();
    f.app.send("NOT HTTP AT ALL\r\n\r\n");
    REQUIRE(f.waitFor([&] { return f.app.ended(); }));
    CHECK(f.app.received.starts_with("HTTP/1.1 400 "));
    CHECK(f.app.received.find("Connection: close\r\n") != std::string::npos);
    CHECK(f.router.tunnels.empty());
    CHECK(f.errorReplies(400) == 1);
  }
  SECTION("a route the router cannot open gets 502 with its reason") {
    Fixture f;
    f.router.refuse = "no upstream cluster 'gone'";
    f.connect();
    f.app.send(kGetOne);
    REQUIRE(f.waitFor([&] { return f.app.ended(); }));
    CHECK(f.app.received.starts_with("HTTP/1.1 502 "));
    CHECK(f.app.received.ends_with("\r\n\r\nno upstream cluster 'gone'\n"));
  }
  SECTION("a tunnel that fails before any answer: its status and reason") {
    Fixture f;
    f.connect();
    f.app.send(kConnect);
    FakeTunnel& t = f.tunnel();
    t.cb->onFailed(503, Result::ConnectFailed, "all proxies are down");
    REQUIRE(f.waitFor([&] { return f.app.ended(); }));
    CHECK(f.app.received.starts_with("HTTP/1.1 503 "));
    CHECK(f.app.received.ends_with("\r\n\r\nall proxies are down\n"));
    CHECK(f.errorReplies(503) == 1);
  }
  SECTION("an Expect other than 100-continue gets 417, nothing is routed") {
    Fixture f;
    f.connect();
    f.app.send(
        "PUT http://a.test/x HTTP/1.1\r\nHost: a.test\r\nExpect: magic\r\n"
        "Content-Length: 1\r\n\r\nx");
    REQUIRE(f.waitFor([&] { return f.app.ended(); }));
    CHECK(f.app.received.starts_with("HTTP/1.1 417 "));
    CHECK(f.router.tunnels.empty());
  }
  SECTION("a proxy's refusal of a CONNECT is relayed and ends the connection") {
    Fixture f;
    f.connect();
    f.app.send(kConnect);
    FakeTunnel& t = f.tunnel();
    t.cb->onResponseHead(responseHead(403, BodyFraming::ContentLength, 6));
    t.cb->onResponseData("denied", [] {});
    t.cb->onResponseEnd();
    REQUIRE(f.waitFor([&] { return f.app.ended(); }));
    CHECK(f.app.received.starts_with("HTTP/1.1 403 "));
    CHECK(f.app.received.ends_with("denied"));
    CHECK(t.info->result == Result::ConnectFailed);
  }
  SECTION("a listener at max_connections answers 503") {
    Fixture f;
    f.ctx.max_connections = 0;
    f.connect();
    REQUIRE(f.waitFor([&] { return f.app.ended(); }));
    CHECK(f.app.received.starts_with("HTTP/1.1 503 "));
    CHECK(f.app.received.find("max_connections") != std::string::npos);
  }
}

TEST_CASE("half-close: each direction's end is passed on, the tunnel ends when both did",
          "[downstream]") {
  Fixture f;
  f.ctx.tunnel_half_close_timeout = 60s;  // not what this test is about
  f.connect();
  f.app.send(kConnect);
  FakeTunnel& t = f.tunnel();
  t.cb->onResponseHead(responseHead(200));
  REQUIRE(f.received("established"));

  SECTION("the app finishes first; the destination still answers") {
    f.app.send("last words");
    f.app.shutdownSend();
    REQUIRE(f.waitFor([&] { return t.ended; }));
    CHECK(t.sent == "last words");
    t.cb->onResponseData("reply after the app's FIN", [] {});
    REQUIRE(f.received("reply after the app's FIN"));
    CHECK_FALSE(f.app.ended());
    t.cb->onResponseEnd();
    REQUIRE(f.waitFor([&] { return f.app.eof && f.closed; }));
    CHECK(t.info->result == Result::Ok);
  }
  SECTION("the destination finishes first; the app still sends") {
    t.cb->onResponseData("bye", [] {});
    t.cb->onResponseEnd();
    REQUIRE(f.waitFor([&] { return f.app.eof; }));  // its FIN, after the bytes
    CHECK(f.app.received.ends_with("bye"));
    CHECK_FALSE(f.closed);
    f.app.send("still talking");
    REQUIRE(f.waitFor([&] { return t.sent == "still talking"; }));
    f.app.shutdownSend();
    REQUIRE(f.waitFor([&] { return f.closed; }));
    CHECK(t.ended);
    CHECK(t.info->result == Result::Ok);
  }
}

TEST_CASE("drain: an idle connection closes at once, a busy one after its request",
          "[downstream]") {
  Fixture f;
  f.connect();
  f.app.send(kGetOne);
  FakeTunnel& t = f.tunnel();
  f.conn->drain();
  f.settle();
  CHECK_FALSE(f.closed);
  respond(t, "last");
  REQUIRE(f.waitFor([&] { return f.app.eof; }));
  CHECK(f.app.received.ends_with("last"));
}

TEST_CASE("fallback via the router: a CONNECT whose cluster is down goes DIRECT, early data too",
          "[downstream][fallback]") {
  config::Cluster cluster;  // outlives the io_context (and the pool's last handlers)
  Fixture f;
  // The cluster: one proxy on a port nobody listens on.
  uint16_t dead_port = 0;
  {
    tcp::acceptor a(f.io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    dead_port = a.local_endpoint().port();
  }
  cluster.name = "down";
  cluster.endpoints.push_back({"127.0.0.1", dead_port});
  cluster.connect_timeout = 2s;
  upstream::Upstreams upstreams;
  upstreams["down"] = std::make_shared<upstream::UpstreamPool>(
      f.io, cluster, nullptr, 0, f.shard,
      std::make_shared<upstream::ClusterHealth>("down", std::vector<std::string>{"x"}),
      std::make_shared<net::ConnectionLimit>());
  upstream::WorkerRouter router(f.io, upstreams, f.shard);
  // DIRECT's destination.
  tcp::acceptor destination(f.io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  tcp::socket dest(f.io);
  destination.async_accept(dest, [](const asio::error_code&) {});

  f.ctx.filters.push_back(std::make_shared<RouteTo>("down", std::vector<std::string>{""}));
  f.connect(router);
  const std::string target = "127.0.0.1:" + std::to_string(destination.local_endpoint().port());
  f.app.send("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\nEARLY");
  REQUIRE(f.received("HTTP/1.1 200 Connection established\r\n\r\n"));
  std::array<char, 16> got{};
  size_t n = 0;
  REQUIRE(f.waitFor([&] {
    asio::error_code ec;
    if (dest.is_open() && dest.available(ec) >= 5) n = dest.read_some(asio::buffer(got), ec);
    return n > 0;
  }));
  CHECK(std::string(got.data(), n) == "EARLY");
  CHECK(f.shard.counter(metrics::Family::RouteFallbacks, {"test", "down", "direct"}).value() == 1);
  // The connection is closed before the pool and router go.
  f.conn->forceClose();
  REQUIRE(f.waitFor([&] { return f.closed; }));
  f.conn.reset();
  for (auto& [name, pool] : upstreams) pool->shutdown();
  f.io.restart();
  f.io.poll();
}
