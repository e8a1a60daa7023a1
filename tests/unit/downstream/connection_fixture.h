// The DownstreamConnection unit tests' fixture: a real app socket (loopback
// TCP, the test's end read asynchronously on the same io_context) and a fake
// Router whose fake tunnels let the test play the upstream: it sees what the
// connection opened and sent, and answers through the TunnelCallbacks when
// it chooses. Used by downstream_connection_test.cc and
// downstream_timers_test.cc.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <asio.hpp>
#include <catch2/catch.hpp>

#include "gateway/downstream/downstream_connection.h"
#include "gateway/http1/codec.h"
#include "gateway/metrics/registry.h"
#include "tests/unit/upstream/io_util.h"

namespace h2gate::downstream::fixture {

using namespace std::chrono_literals;
using asio::ip::tcp;

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

inline ResponseHead responseHead(int status, BodyFraming framing = BodyFraming::None,
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

inline const std::string kGetOne = "GET http://a.test/one HTTP/1.1\r\nHost: a.test\r\n\r\n";
inline const std::string kGetTwo = "GET http://a.test/two HTTP/1.1\r\nHost: a.test\r\n\r\n";
inline const std::string kConnect = "CONNECT dest.test:443 HTTP/1.1\r\nHost: dest.test:443\r\n\r\n";

// Answers the request of `t` with a 200 and `body` (Content-Length).
inline void respond(FakeTunnel& t, const std::string& body) {
  t.cb->onResponseHead(responseHead(200, BodyFraming::ContentLength, body.size()));
  bool taken = false;
  t.cb->onResponseData(body, [&] { taken = true; });
  CHECK(taken);  // the socket took it at once
  t.cb->onResponseEnd();
}

}  // namespace h2gate::downstream::fixture
