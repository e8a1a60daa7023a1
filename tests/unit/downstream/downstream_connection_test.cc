// DownstreamConnection, the HTTP/1 proxy state machine, on its own: a real
// app socket (loopback TCP, the test's end read asynchronously on the same
// io_context) and a fake Router whose fake tunnels let the test play the
// upstream: it sees what the connection opened and sent, and answers
// through the TunnelCallbacks when it chooses. The last case routes through
// the real WorkerRouter instead, to see a fallback carry a CONNECT.
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
#include "tests/unit/upstream/io_util.h"

using namespace h2gate;
using namespace h2gate::downstream;
using namespace std::chrono_literals;
using asio::ip::tcp;

namespace {

// The upstream as the test plays it.
struct FakeTunnel : upstream::Tunnel {
  const RequestHead* head = nullptr;
  StreamInfo* info = nullptr;
  upstream::TunnelCallbacks* cb = nullptr;  // null once aborted
  std::string sent;                         // what the app side sent up
  bool ended = false;                       // endOfRequest()
  bool aborted = false;

  void open(const RequestHead& h, StreamInfo& i, upstream::TunnelCallbacks& c) override {
    head = &h;
    info = &i;
    cb = &c;
    i.protocol = "h2";
  }
  void send(std::string_view data, upstream::Done done) override {
    sent.append(data);
    done();  // taken at once
  }
  void endOfRequest() override { ended = true; }
  void abort() override {
    aborted = true;
    cb = nullptr;
  }
};

struct FakeRouter : upstream::Router {
  std::vector<std::shared_ptr<FakeTunnel>> tunnels;
  std::string refuse;  // set: route() fails with it
  std::vector<std::string> routes;

  std::shared_ptr<upstream::Tunnel> route(StreamInfo& info, const upstream::DirectOptions&,
                                          std::string* error) override {
    routes.push_back(info.cluster);
    if (!refuse.empty()) {
      *error = refuse;
      return nullptr;
    }
    tunnels.push_back(std::make_shared<FakeTunnel>());
    return tunnels.back();
  }
};

// Sends every request to `cluster`, then `fallbacks` (forward_proxy's job).
struct RouteTo : filters::Filter {
  RouteTo(std::string c, std::vector<std::string> f) : cluster(std::move(c)), fallbacks(f) {}
  filters::FilterStatus onRequestHead(const RequestHead&, StreamInfo& info) const override {
    info.cluster = cluster;
    info.fallbacks = fallbacks;
    info.route_set = true;
    return filters::FilterStatus::Stop;
  }
  std::string cluster;
  std::vector<std::string> fallbacks;
};

// The app: a socket whose reads go on in the background.
struct App {
  explicit App(asio::io_context& io) : socket(io) {}
  void startReading() {
    socket.async_read_some(asio::buffer(buf), [this](const asio::error_code& ec, size_t n) {
      if (ec == asio::error::eof) {
        eof = true;
      } else if (ec) {
        error = ec;
      } else {
        received.append(buf.data(), n);
        startReading();
      }
    });
  }
  void send(std::string_view s) { asio::write(socket, asio::buffer(s)); }
  void shutdownSend() { socket.shutdown(tcp::socket::shutdown_send); }
  bool ended() const { return eof || error; }

  tcp::socket socket;
  std::array<char, 64 * 1024> buf{};
  std::string received;
  bool eof = false;
  asio::error_code error;
};

ResponseHead responseHead(int status, BodyFraming framing = BodyFraming::None,
                          uint64_t length = 0) {
  ResponseHead h;
  h.status = status;
  h.reason = std::string(http1::reasonPhrase(status));
  h.framing = framing;
  h.content_length = length;
  return h;
}

struct Fixture {
  Fixture() {
    ctx.name = "test";
    ctx.open_connections = std::make_shared<net::ConnectionLimit>();
  }
  ~Fixture() {
    // The app goes first, so a lingering close ends at once.
    asio::error_code ec;
    app.socket.close(ec);
    if (conn) {
      conn->forceClose();
      test::runUntil(
          io, [&] { return closed; }, 5000ms);
      conn.reset();
    }
    io.restart();
    io.poll();
  }

  // Accepts the app's connection and starts the DownstreamConnection on it.
  void connect(upstream::Router& r) {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    app.socket.connect(acceptor.local_endpoint());
    tcp::socket server(io);
    acceptor.accept(server);
    conn = std::make_shared<DownstreamConnection>(std::move(server), ctx, stats, r, 7,
                                                  [this](uint64_t id) {
                                                    CHECK(id == 7);
                                                    closed = true;
                                                  });
    conn->start();
    app.startReading();
  }
  void connect() { connect(router); }

  bool waitFor(const std::function<bool()>& cond, std::chrono::milliseconds limit = 5000ms) {
    return test::runUntil(io, cond, limit);
  }
  // Lets the loop run for `d` (for "nothing happens" checks).
  void settle(std::chrono::milliseconds d = 50ms) {
    test::runUntil(
        io, [] { return false; }, d);
  }
  FakeTunnel& tunnel(size_t i = 0) {
    REQUIRE(waitFor([&] { return router.tunnels.size() > i && router.tunnels[i]->cb; }));
    return *router.tunnels[i];
  }
  bool received(std::string_view text) {
    return waitFor([&] { return app.received.find(text) != std::string::npos; });
  }
  uint64_t errorReplies(int status) {
    return shard.counter(metrics::Family::DownstreamErrors, {"test", std::to_string(status)})
        .value();
  }

  // Before io: a connection kept alive by a pending handler refers to them
  // until io_context's destruction.
  ListenerContext ctx;
  metrics::Shard& shard = metrics::Registry::global().newShard();
  ListenerStats stats{shard, "test"};
  FakeRouter router;
  asio::io_context io;
  App app{io};
  std::shared_ptr<DownstreamConnection> conn;
  bool closed = false;
};

const std::string kGetOne = "GET http://a.test/one HTTP/1.1\r\nHost: a.test\r\n\r\n";
const std::string kGetTwo = "GET http://a.test/two HTTP/1.1\r\nHost: a.test\r\n\r\n";
const std::string kConnect = "CONNECT dest.test:443 HTTP/1.1\r\nHost: dest.test:443\r\n\r\n";

// Answers the request of `t` with a 200 and `body` (Content-Length).
void respond(FakeTunnel& t, const std::string& body) {
  t.cb->onResponseHead(responseHead(200, BodyFraming::ContentLength, body.size()));
  bool taken = false;
  t.cb->onResponseData(body, [&] { taken = true; });
  CHECK(taken);  // the socket took it at once
  t.cb->onResponseEnd();
}

}  // namespace

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

TEST_CASE("timeouts of the app side", "[downstream][timeouts]") {
  Fixture f;
  SECTION("request_headers_timeout: a head that does not complete gets 408") {
    f.ctx.request_headers_timeout = 150ms;
    f.connect();
    f.app.send("GET http://a.test/ HTTP/1.1\r\nHost: a");
    REQUIRE(f.waitFor([&] { return f.app.ended(); }));
    CHECK(f.app.received.starts_with("HTTP/1.1 408 "));
    CHECK(f.app.received.find("(request_headers_timeout)") != std::string::npos);
  }
  SECTION("request_headers_timeout: a connection that sends nothing is closed without a word") {
    f.ctx.request_headers_timeout = 150ms;
    f.connect();
    REQUIRE(f.waitFor([&] { return f.app.ended(); }));
    CHECK(f.app.eof);
    CHECK(f.app.received.empty());
    CHECK(f.errorReplies(408) == 0);
  }
  SECTION("idle_timeout: a keep-alive connection silent between requests is closed") {
    f.ctx.idle_timeout = 150ms;
    f.connect();
    f.app.send(kGetOne);
    respond(f.tunnel(), "first");
    REQUIRE(f.received("first"));
    const size_t before = f.app.received.size();
    REQUIRE(f.waitFor([&] { return f.app.eof; }));
    CHECK(f.app.received.size() == before);  // no reply of its own
  }
  SECTION("connect_response_timeout: a CONNECT with no answer gets 504, the tunnel is aborted") {
    f.ctx.connect_response_timeout = 150ms;
    f.connect();
    f.app.send(kConnect);
    FakeTunnel& t = f.tunnel();
    REQUIRE(f.waitFor([&] { return f.app.ended(); }));
    CHECK(f.app.received.starts_with("HTTP/1.1 504 "));
    CHECK(f.app.received.find("(connect_response_timeout)") != std::string::npos);
    CHECK(t.aborted);
  }
  SECTION("stream_idle_timeout: a response body that stalls resets the app's connection") {
    f.ctx.stream_idle_timeout = 150ms;
    f.connect();
    f.app.send(kGetOne);
    FakeTunnel& t = f.tunnel();
    t.cb->onResponseHead(responseHead(200, BodyFraming::ContentLength, 10));
    t.cb->onResponseData("12345", [] {});
    REQUIRE(f.waitFor([&] { return f.app.ended(); }));
    CHECK(f.app.error == asio::error::connection_reset);  // not a clean end
    CHECK(f.app.received.ends_with("12345"));
    CHECK(t.aborted);
  }
  SECTION("stream_idle_timeout: a request body that stalls gets 408") {
    f.ctx.stream_idle_timeout = 150ms;
    f.connect();
    f.app.send("POST http://a.test/up HTTP/1.1\r\nHost: a.test\r\nContent-Length: 10\r\n\r\n12");
    FakeTunnel& t = f.tunnel();
    REQUIRE(f.waitFor([&] { return f.app.ended(); }));
    CHECK(f.app.received.starts_with("HTTP/1.1 408 "));
    CHECK(f.app.received.find("request body stalled") != std::string::npos);
    CHECK(t.sent == "12");
    CHECK(t.aborted);
  }
  SECTION("tunnel_idle_timeout: a tunnel silent both ways is closed, both sides") {
    f.ctx.tunnel_idle_timeout = 150ms;
    f.connect();
    f.app.send(kConnect);
    FakeTunnel& t = f.tunnel();
    t.cb->onResponseHead(responseHead(200));
    REQUIRE(f.received("established"));
    REQUIRE(f.waitFor([&] { return f.app.eof && t.aborted; }));
  }
  SECTION("tunnel_half_close_timeout: one side ended, the other silent: closed") {
    f.ctx.tunnel_half_close_timeout = 150ms;
    f.connect();
    f.app.send(kConnect);
    FakeTunnel& t = f.tunnel();
    t.cb->onResponseHead(responseHead(200));
    REQUIRE(f.received("established"));
    t.cb->onResponseEnd();
    REQUIRE(f.waitFor([&] { return t.aborted; }));
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
