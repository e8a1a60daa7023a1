// WorkerRouter over real routes: a pool whose one proxy refuses connections
// (nobody listens on its port) and DIRECT to a listening socket of the
// test. The app side is a recording TunnelCallbacks.
#include "gateway/upstream/router.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <asio.hpp>
#include <catch2/catch.hpp>

#include "gateway/metrics/registry.h"
#include "gateway/upstream/direct_tunnel.h"
#include "gateway/upstream/health.h"
#include "gateway/upstream/pool.h"
#include "tests/unit/upstream/io_util.h"

using namespace h2gate;
using namespace h2gate::upstream;
using namespace std::chrono_literals;
using asio::ip::tcp;

namespace {

struct App : TunnelCallbacks {
  void onResponseHead(ResponseHead head) override { status = head.status; }
  void onResponseData(std::string_view, Done done) override { done(); }
  void onResponseEnd() override {}
  void onFailed(int s, Result r, std::string why) override {
    ++failures;
    status = s;
    result = r;
    reason = std::move(why);
  }
  void onReset(Result, std::string) override {}

  int status = 0;
  int failures = 0;
  Result result = Result::Ok;
  std::string reason;
};

uint16_t deadPort(asio::io_context& io) {
  tcp::acceptor a(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  return a.local_endpoint().port();
}

struct Fixture {
  Fixture() {
    cluster.name = "down";
    cluster.endpoints.push_back({"127.0.0.1", deadPort(io)});
    upstreams["down"] = std::make_shared<UpstreamPool>(
        io, cluster, nullptr, 0, shard,
        std::make_shared<ClusterHealth>("down", std::vector<std::string>{"down:1"}),
        std::make_shared<net::ConnectionLimit>());
    info.connection_id = 3;
    info.stream_id = 1;
    info.listener_name = "router_test";
  }
  ~Fixture() {
    if (tunnel) tunnel->abort();
    tunnel.reset();
    for (auto& [name, pool] : upstreams) pool->shutdown();
    upstreams.clear();
    io.restart();
    io.poll();
  }
  RequestHead connectTo(uint16_t port) {
    RequestHead h;
    h.method = "CONNECT";
    h.is_connect = true;
    h.host = "127.0.0.1";
    h.port = port;
    h.target = h.authority();
    return h;
  }
  // Opens `head` on the route in `info`.
  void open(const RequestHead& h) {
    head = h;
    std::string error;
    tunnel = router.route(info, direct, &error);
    REQUIRE(tunnel);
    tunnel->open(head, info, app);
  }
  uint64_t fallbacks(const std::string& to) {
    return shard.counter(metrics::Family::RouteFallbacks, {"router_test", "down", to}).value();
  }
  bool waitFor(const std::function<bool()>& cond) { return test::runUntil(io, cond, 10000ms); }

  config::Cluster cluster;  // outlives io: pools refer to it until their last handler
  metrics::Shard& shard = metrics::Registry::global().newShard();
  asio::io_context io;
  Upstreams upstreams;
  WorkerRouter router{io, upstreams, shard};
  DirectOptions direct;
  StreamInfo info;
  RequestHead head;
  App app;
  std::shared_ptr<Tunnel> tunnel;
};

}  // namespace

TEST_CASE("router: one route, no fallback: that route's own tunnel; unknown cluster: none",
          "[upstream][router]") {
  Fixture f;
  std::string error;
  f.info.cluster = "nope";
  CHECK_FALSE(f.router.route(f.info, f.direct, &error));
  CHECK(error == "no upstream cluster 'nope'");
  f.info.cluster = "";
  std::shared_ptr<Tunnel> t = f.router.route(f.info, f.direct, &error);
  CHECK(std::dynamic_pointer_cast<DirectTunnel>(t) != nullptr);  // nothing in between
  CHECK(WorkerRouter::routeName("") == "DIRECT");
  CHECK(WorkerRouter::routeName("a") == "cluster 'a'");
}

TEST_CASE("router: a cluster that cannot be reached falls back to DIRECT, which carries it",
          "[upstream][router][fallback]") {
  Fixture f;
  tcp::acceptor destination(f.io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  tcp::socket accepted(f.io);
  bool connected = false;
  destination.async_accept(accepted, [&](const asio::error_code& ec) { connected = !ec; });
  f.info.cluster = "down";
  f.info.fallbacks = {""};
  f.open(f.connectTo(destination.local_endpoint().port()));
  REQUIRE(f.waitFor([&] { return f.app.status != 0 && connected; }));
  CHECK(f.app.status == 200);
  CHECK(f.app.failures == 0);
  CHECK(f.info.cluster.empty());  // the route that carries it
  CHECK(f.info.protocol == "direct");
  CHECK(f.info.fallbacks.empty());
  CHECK(f.fallbacks("direct") == 1);
}

TEST_CASE("router: when every route fails, the app's error names each and why",
          "[upstream][router][fallback]") {
  Fixture f;
  f.info.cluster = "down";
  f.info.fallbacks = {""};
  f.open(f.connectTo(deadPort(f.io)));
  REQUIRE(f.waitFor([&] { return f.app.failures > 0; }));
  CHECK(f.app.failures == 1);
  CHECK(f.app.result == Result::ConnectFailed);
  INFO(f.app.reason);
  CHECK(f.app.reason.starts_with("cluster 'down': "));
  CHECK(f.app.reason.find("; then DIRECT: ") != std::string::npos);
  CHECK(f.fallbacks("direct") == 1);
}

TEST_CASE("router: a request with a body does not fall back", "[upstream][router][fallback]") {
  Fixture f;
  f.info.cluster = "down";
  f.info.fallbacks = {""};
  RequestHead h;
  h.method = "POST";
  h.target = "http://127.0.0.1:9/x";
  h.host = "127.0.0.1";
  h.port = 9;
  h.path = "/x";
  h.framing = BodyFraming::ContentLength;
  h.content_length = 4;
  f.open(h);
  REQUIRE(f.waitFor([&] { return f.app.failures > 0; }));
  CHECK(f.app.reason.find("then") == std::string::npos);
  CHECK(f.info.cluster == "down");
  CHECK(f.fallbacks("direct") == 0);
}

TEST_CASE("router: a fallback to a cluster this worker does not have fails with 502",
          "[upstream][router][fallback]") {
  Fixture f;
  f.info.cluster = "down";
  f.info.fallbacks = {"gone"};
  f.open(f.connectTo(deadPort(f.io)));
  REQUIRE(f.waitFor([&] { return f.app.failures > 0; }));
  CHECK(f.app.status == 502);
  CHECK(f.app.reason == "no upstream cluster 'gone'");
}

TEST_CASE("router: an abort while a fallback is pending opens nothing",
          "[upstream][router][fallback]") {
  Fixture f;
  tcp::acceptor destination(f.io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  tcp::socket accepted(f.io);
  bool connected = false;
  destination.async_accept(accepted, [&](const asio::error_code& ec) { connected = !ec; });
  f.info.cluster = "down";
  f.info.fallbacks = {""};
  f.open(f.connectTo(destination.local_endpoint().port()));
  // The cluster failed and the fallback is posted, not yet run.
  REQUIRE(f.waitFor([&] { return f.fallbacks("direct") == 1; }));
  f.tunnel->abort();
  test::runUntil(
      f.io, [] { return false; }, 200ms);
  CHECK_FALSE(connected);
  CHECK(f.app.status == 0);
  CHECK(f.app.failures == 0);
}
