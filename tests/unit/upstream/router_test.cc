// WorkerRouter over real routes: a pool whose one proxy refuses connections
// (nobody listens on its port) and DIRECT to a listening socket of the
// test. The app side is a recording TunnelCallbacks.
#include "gateway/upstream/router.h"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
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

struct RouterApp : TunnelCallbacks {
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

struct RouterFixture {
  RouterFixture() {
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
  ~RouterFixture() {
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
  // Until the app has a failure (10 s at most).
  bool waitForFailure() {
    return waitFor([this] { return app.failures > 0; });
  }
  // Opens `h` on cluster "down" (whose proxy refuses), then `then`.
  void openOnDown(std::vector<std::string> then, const RequestHead& h) {
    info.cluster = "down";
    info.fallbacks = std::move(then);
    open(h);
  }
  // A destination on loopback that accepts one connection (`connected`
  // once it has); returns its port.
  uint16_t listenOnce() {
    destination.emplace(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    destination->async_accept(accepted, [this](const asio::error_code& ec) { connected = !ec; });
    return destination->local_endpoint().port();
  }

  config::Cluster cluster;  // outlives io: pools refer to it until their last handler
  metrics::Shard& shard = metrics::Registry::global().newShard();
  asio::io_context io;
  Upstreams upstreams;
  WorkerRouter router{io, upstreams, shard};
  DirectOptions direct;
  StreamInfo info;
  RequestHead head;
  RouterApp app;
  std::shared_ptr<Tunnel> tunnel;
  std::optional<tcp::acceptor> destination;  // listenOnce()
  tcp::socket accepted{io};
  bool connected = false;
};

}  // namespace

TEST_CASE("router: one route, no fallback: that route's own tunnel; unknown cluster: none",
          "[upstream][router]") {
  RouterFixture f;
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
  RouterFixture f;
  const uint16_t destination = f.listenOnce();
  f.openOnDown({""}, f.connectTo(destination));
  REQUIRE(f.waitFor([&] { return f.app.status != 0 && f.connected; }));
  CHECK(f.app.status == 200);
  CHECK(f.app.failures == 0);
  CHECK(f.info.cluster.empty());  // the route that carries it
  CHECK(f.info.protocol == "direct");
  CHECK(f.info.fallbacks.empty());
  CHECK(f.fallbacks("direct") == 1);
}

TEST_CASE("router: when every route fails, the app's error names each and why",
          "[upstream][router][fallback]") {
  RouterFixture f;
  f.openOnDown({""}, f.connectTo(deadPort(f.io)));
  REQUIRE(f.waitForFailure());
  CHECK(f.app.failures == 1);
  CHECK(f.app.result == Result::ConnectFailed);
  INFO(f.app.reason);
  CHECK(f.app.reason.starts_with("cluster 'down': "));
  CHECK(f.app.reason.find("; then DIRECT: ") != std::string::npos);
  CHECK(f.fallbacks("direct") == 1);
}

TEST_CASE("router: a request with a body does not fall back", "[upstream][router][fallback]") {
  RouterFixture f;
  RequestHead h;
  h.method = "POST";
  h.target = "http://127.0.0.1:9/x";
  h.host = "127.0.0.1";
  h.port = 9;
  h.path = "/x";
  h.framing = BodyFraming::ContentLength;
  h.content_length = 4;
  f.openOnDown({""}, h);
  REQUIRE(f.waitForFailure());
  CHECK(f.app.reason.find("then") == std::string::npos);
  CHECK(f.info.cluster == "down");
  CHECK(f.fallbacks("direct") == 0);
}

TEST_CASE("router: a fallback to a cluster this worker does not have fails with 502",
          "[upstream][router][fallback]") {
  RouterFixture f;
  f.openOnDown({"gone"}, f.connectTo(deadPort(f.io)));
  REQUIRE(f.waitForFailure());
  CHECK(f.app.status == 502);
  CHECK(f.app.reason == "no upstream cluster 'gone'");
}

TEST_CASE("router: an abort while a fallback is pending opens nothing",
          "[upstream][router][fallback]") {
  RouterFixture f;
  const uint16_t destination = f.listenOnce();
  f.openOnDown({""}, f.connectTo(destination));
  // The cluster failed and the fallback is posted, not yet run.
  REQUIRE(f.waitFor([&] { return f.fallbacks("direct") == 1; }));
  f.tunnel->abort();
  test::runUntil(
      f.io, [] { return false; }, 200ms);
  CHECK_FALSE(f.connected);
  CHECK(f.app.status == 0);
  CHECK(f.app.failures == 0);
}

namespace {

// A decider that answers `routes` (or refuses with 451 when empty) after
// posting, as a PAC route does.
struct FixedDecider : RouteDecider {
  std::vector<std::string> routes;
  std::shared_ptr<ProxyTemplate> tmpl = std::make_shared<ProxyTemplate>();
  mutable int asked = 0;
  void decide(const RequestHead&, const StreamInfo&, asio::any_io_executor ex,
              std::function<void(Decision)> done) const override {
    ++asked;
    Decision d;
    d.routes = routes;
    d.status = 451;
    d.reason = "refused by the test";
    asio::post(ex, [d, done = std::move(done)]() mutable { done(std::move(d)); });
  }
  std::shared_ptr<const ProxyTemplate> proxies() const override { return tmpl; }
};

// With the last request aborted, a new one (CONNECT 127.0.0.1:9) on the same
// router, which `decider` sends to the first of its routes alone.
void againToFirstRoute(RouterFixture& f, const std::shared_ptr<FixedDecider>& decider) {
  f.tunnel->abort();
  f.tunnel.reset();
  f.app = RouterApp{};
  f.info = StreamInfo{};
  f.info.route_decider = decider;
  decider->routes = {decider->routes.front()};
  f.open(f.connectTo(9));
}

// The same, with its answer at hand (as a PAC route's cached one).
struct ReadyDecider : FixedDecider {
  mutable int asked_now = 0;
  std::optional<Decision> decideNow(const RequestHead&, const StreamInfo&) const override {
    ++asked_now;
    Decision d;
    d.routes = routes;
    d.status = 451;
    d.reason = "refused at once by the test";
    return d;
  }
};

// `decider` answers a proxy made on demand that refuses (nobody listens),
// then DIRECT to a destination that accepts: DIRECT carries the request, and
// the proxy has its pool. Then the same proxy alone: that pool again, not a
// second one, and the app's 503 names the proxy. `opened` runs right after
// open() returns, before anything is waited for.
void proxyThenDirect(RouterFixture& f, const std::shared_ptr<FixedDecider>& decider,
                     const std::function<void()>& opened) {
  const uint16_t destination = f.listenOnce();
  decider->routes = {"PROXY 127.0.0.1:" + std::to_string(deadPort(f.io)), ""};
  f.info.route_decider = decider;
  f.open(f.connectTo(destination));
  opened();
  REQUIRE(f.waitFor([&] { return f.app.status != 0 && f.connected; }));
  CHECK(f.app.status == 200);
  CHECK(f.info.cluster.empty());  // the route that carries it
  CHECK(f.info.protocol == "direct");
  CHECK(f.router.proxyPools() == 1);
  againToFirstRoute(f, decider);
  CHECK(f.router.proxyPools() == 1);
  REQUIRE(f.waitForFailure());
  CHECK(f.app.status == 503);
  CHECK(f.app.reason.find("PROXY 127.0.0.1:") != std::string::npos);
  CHECK(f.router.proxyPools() == 1);
}

// `decider` has no routes: it refuses, and the app fails with its 451 and
// `reason`, once; `posted`: after the io runs, else when open() returns.
void refused(const std::shared_ptr<FixedDecider>& decider, bool posted, const std::string& reason) {
  RouterFixture g;
  decider->routes = {};
  g.info.route_decider = decider;
  g.open(g.connectTo(9));
  if (posted) REQUIRE(g.waitForFailure());
  CHECK(g.app.failures == 1);
  CHECK(g.app.status == 451);
  CHECK(g.app.result == Result::Rejected);
  CHECK(g.app.reason == reason);
}

}  // namespace

TEST_CASE("router: PROXY/HTTPS routes parse; other strings are clusters",
          "[upstream][router][pac_route]") {
  bool tls = false;
  std::string host;
  uint16_t port = 0;
  CHECK(parseProxyRoute("PROXY a.test:8080", &tls, &host, &port));
  CHECK((!tls && host == "a.test" && port == 8080));
  CHECK(parseProxyRoute("HTTPS [2001:db8::1]:443", &tls, &host, &port));
  CHECK((tls && host == "2001:db8::1" && port == 443));
  CHECK_FALSE(parseProxyRoute("corp", &tls, &host, &port));
  CHECK_FALSE(parseProxyRoute("PROXY a.test", &tls, &host, &port));
  CHECK_FALSE(parseProxyRoute("PROXY a.test:0", &tls, &host, &port));
  CHECK_FALSE(parseProxyRoute("SOCKS a.test:1080", &tls, &host, &port));
  CHECK(WorkerRouter::routeName("PROXY a.test:8080") == "PROXY a.test:8080");
}

TEST_CASE("router: a decided route waits for the decider, then fails over along its answer",
          "[upstream][router][pac_route]") {
  RouterFixture f;
  auto decider = std::make_shared<FixedDecider>();
  proxyThenDirect(f, decider, [&] {
    CHECK(decider->asked == 1);
    CHECK(f.app.status == 0);  // nothing before the answer
  });
  f.router.shutdown();
  CHECK(f.router.proxyPools() == 0);
}

TEST_CASE("router: a decider's refusal is the app's status; an abort meanwhile opens nothing",
          "[upstream][router][pac_route]") {
  auto decider = std::make_shared<FixedDecider>();
  refused(decider, true, "refused by the test");

  RouterFixture g;
  decider->routes = {""};
  g.info.route_decider = decider;
  g.open(g.connectTo(9));
  g.tunnel->abort();
  test::runUntil(
      g.io, [] { return false; }, 200ms);
  CHECK(g.app.status == 0);
  CHECK(g.app.failures == 0);
}

TEST_CASE("router: at most max_proxies proxy pools; an idle one makes room",
          "[upstream][router][pac_route]") {
  RouterFixture f;
  auto decider = std::make_shared<FixedDecider>();
  decider->tmpl->max_proxies = 1;
  f.info.route_decider = decider;
  // A proxy that takes the connection (the kernel does) and never answers:
  // the request stays in progress on its pool.
  tcp::acceptor silent(f.io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  decider->routes = {"PROXY 127.0.0.1:" + std::to_string(silent.local_endpoint().port())};
  f.open(f.connectTo(9));
  REQUIRE(f.waitFor([&] { return f.router.proxyPools() == 1; }));
  // While this request holds its pool, a second proxy cannot have one.
  RouterFixture* fp = &f;
  RouterApp second;
  StreamInfo info2;
  info2.route_decider = decider;
  decider->routes = {"PROXY 127.0.0.2:1"};
  std::string error;
  std::shared_ptr<Tunnel> t2 = fp->router.route(info2, fp->direct, &error);
  RequestHead h2 = f.connectTo(9);
  t2->open(h2, info2, second);
  REQUIRE(f.waitFor([&] { return second.failures > 0; }));
  CHECK(second.reason.find("too many proxies in use") != std::string::npos);
  CHECK(f.app.failures == 0);
  CHECK(f.router.proxyPools() == 1);
  // Once the first request is gone, its pool is idle and makes room.
  f.tunnel->abort();
  f.tunnel.reset();
  RouterApp third;
  StreamInfo info3;
  info3.route_decider = decider;
  std::shared_ptr<Tunnel> t3 = fp->router.route(info3, fp->direct, &error);
  t3->open(h2, info3, third);
  REQUIRE(f.waitFor([&] { return third.failures > 0; }));
  CHECK(third.reason.find("too many") == std::string::npos);
  CHECK(f.router.proxyPools() == 1);
  t3->abort();
  t2->abort();
  f.router.shutdown();
}

TEST_CASE("router: a decision at hand opens its route inside open(), decide() is not asked",
          "[upstream][router][pac_route]") {
  RouterFixture f;
  auto decider = std::make_shared<ReadyDecider>();
  // The refused proxy, then DIRECT, as with a posted answer.
  proxyThenDirect(f, decider, [&] {
    // Routed before open() returned, nothing posted for it.
    CHECK(decider->asked_now == 1);
    CHECK(decider->asked == 0);
    CHECK(f.info.cluster == decider->routes.front());
    CHECK(f.info.fallbacks == std::vector<std::string>{""});
    CHECK(f.router.proxyPools() == 1);
  });
  CHECK(decider->asked == 0);

  // A refusal at hand: the app has its status when open() returns.
  refused(std::make_shared<ReadyDecider>(), false, "refused at once by the test");
  f.router.shutdown();
}

TEST_CASE(
    "router: a proxy may_authenticate refuses gets no credentials; a new generation asks "
    "again",
    "[upstream][router][pac_route][pac_auth]") {
  RouterFixture f;
  auto decider = std::make_shared<FixedDecider>();
  decider->tmpl->cluster.credentials = config::ProxyCredentials("alice", "alice-pw");
  std::vector<std::string> asked;
  std::string answer = "not in authenticate_to [localhost]";
  decider->tmpl->may_authenticate = [&](const std::string& route, const std::string& host) {
    asked.push_back(route + " " + host);
    return answer;
  };
  const std::string route = "PROXY 127.0.0.1:" + std::to_string(deadPort(f.io));
  decider->routes = {route};
  f.info.route_decider = decider;
  f.open(f.connectTo(9));
  REQUIRE(f.waitForFailure());
  REQUIRE(asked.size() == 1);
  CHECK(asked[0] == route + " 127.0.0.1");
  auto pools = decider->tmpl->pools->list();
  REQUIRE(pools.size() == 1);
  CHECK(pools[0].health->name() == route);
  CHECK(pools[0].health->snapshot().at(0).auth == "none(authenticate_to)");
  // The same proxy again: the same pool, not asked again.
  againToFirstRoute(f, decider);
  REQUIRE(f.waitForFailure());
  CHECK(asked.size() == 1);
  CHECK(decider->tmpl->pools->list().size() == 1);
  // The answers may have changed (the PAC file came from elsewhere): the
  // pool is made again, the template asked again; now it authenticates.
  answer.clear();
  decider->tmpl->auth_generation.fetch_add(1);
  againToFirstRoute(f, decider);
  REQUIRE(f.waitForFailure());
  CHECK(asked.size() == 2);
  CHECK(f.router.proxyPools() == 1);
  pools = decider->tmpl->pools->list();
  REQUIRE(!pools.empty());
  CHECK(pools.back().health->snapshot().at(0).auth == "basic");
  f.router.shutdown();

  // A template with nothing to send is not asked.
  RouterFixture g;
  auto plain = std::make_shared<FixedDecider>();
  plain->tmpl->may_authenticate = decider->tmpl->may_authenticate;
  plain->routes = {route};
  g.info.route_decider = plain;
  g.open(g.connectTo(9));
  REQUIRE(g.waitForFailure());
  CHECK(asked.size() == 2);
  CHECK(plain->tmpl->pools->list().at(0).health->snapshot().at(0).auth.empty());
  g.router.shutdown();
}
