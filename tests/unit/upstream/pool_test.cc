// UpstreamPool with HTTP/1.1 proxies, as an app sees it through the pool's
// tunnels: a test proxy on loopback (a plain http:// proxy, so ALPN gives
// HTTP/1.1) on the test's io_context answers each request as the test
// scripted it and records what came on which connection. The first case
// proves the test proxy with curl.
#include "gateway/upstream/pool.h"

#include <array>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio.hpp>
#include <catch2/catch.hpp>

#include "gateway/http1/parser.h"
#include "gateway/metrics/registry.h"
#include "gateway/upstream/health.h"
#if !defined(_WIN32)
#include "tests/support/process.h"
#endif
#include "tests/support/temp_dir.h"
#include "tests/unit/upstream/io_util.h"
#include "tests/unit/upstream/recording_app.h"

using namespace h2gate;
using namespace h2gate::upstream;
using namespace std::chrono_literals;
using asio::ip::tcp;

namespace {

constexpr const char* kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

// The proxy. Each request it reads gets the next scripted answer (past the
// script: kOk), sent when the request has all arrived, or at once when its
// head has, or only when the test releases it.
class TestProxy {
 public:
  struct Answer {
    std::string bytes = kOk;
    enum class When { End, Head, Held } when = When::End;
    bool close = false;   // close the connection after the answer
    bool silent = false;  // close the connection instead of answering
  };
  static Answer held() {
    Answer a;
    a.when = Answer::When::Held;
    return a;
  }
  static Answer silent() {
    Answer a;
    a.silent = true;
    return a;
  }

  explicit TestProxy(asio::io_context& io)
      : acceptor_(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0)) {
    accept();
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  void script(Answer a) { script_.push_back(std::move(a)); }
  size_t accepted() const { return conns_.size(); }
  // The request lines ("GET http://origin.test/a") read on connection `i`.
  const std::vector<std::string>& requestsOn(size_t i) const { return conns_.at(i)->requests; }
  size_t requests() const {
    size_t n = 0;
    for (const auto& c : conns_) n += c->requests.size();
    return n;
  }
  // Connections whose client (the pool) closed them.
  size_t closedByClient() const {
    size_t n = 0;
    for (const auto& c : conns_) n += c->client_closed ? 1 : 0;
    return n;
  }
  bool clientClosed(size_t i) const { return conns_.at(i)->client_closed; }
  // Sends the held answers.
  void releaseHeld() {
    std::vector<std::shared_ptr<Conn>> held = std::move(held_);
    held_.clear();
    for (auto& c : held) answer(c);
  }
  // Closes connection `i` as a proxy closes an idle one.
  void close(size_t i) {
    asio::error_code ec;
    conns_.at(i)->socket.close(ec);
  }

 private:
  struct Conn {
    explicit Conn(tcp::socket s) : socket(std::move(s)) {}
    tcp::socket socket;
    http1::Parser parser{http1::Parser::Kind::Request, http1::Limits{}};
    std::array<char, 16384> buf{};
    std::vector<std::string> requests;
    std::optional<Answer> current;  // the answer to the request being read
    bool held = false;              // ...which waits for releaseHeld()
    bool client_closed = false;
  };

  void accept() {
    acceptor_.async_accept([this](const asio::error_code& ec, tcp::socket s) {
      if (ec) return;
      conns_.push_back(std::make_shared<Conn>(std::move(s)));
      read(conns_.back());
      accept();
    });
  }

  void read(const std::shared_ptr<Conn>& c) {
    c->socket.async_read_some(
        asio::buffer(c->buf), [this, c](const asio::error_code& ec, size_t n) {
          if (ec) {
            c->client_closed =
                ec != asio::error::operation_aborted && ec != asio::error::bad_descriptor;
            return;
          }
          if (!parse(c, n)) return;
          if (c->socket.is_open()) read(c);
        });
  }

  // False when the connection was closed.
  bool parse(const std::shared_ptr<Conn>& c, size_t n) {
    size_t off = 0;
    std::string body;
    for (int steps = 0; steps < 1000; ++steps) {
      size_t used = 0;
      const http1::Event ev = c->parser.feed(c->buf.data() + off, n - off, &used, &body);
      off += used;
      if (ev == http1::Event::HeadComplete) {
        const RequestHead& h = c->parser.request();
        c->requests.push_back(h.method + " " + h.target);
        c->current = script_.empty() ? Answer{} : std::move(script_.front());
        if (!script_.empty()) script_.pop_front();
        c->held = false;
        // A request without a body is whole with its head (the parser
        // reports its end with the next request's bytes).
        if ((c->current->when == Answer::When::Head || h.framing == BodyFraming::None) &&
            !requestDone(c))
          return false;
      } else if (ev == http1::Event::MessageComplete) {
        if (!requestDone(c)) return false;
      } else if (ev == http1::Event::Error) {
        FAIL("the test proxy could not parse a request: " << c->parser.errorReason());
      } else if (ev == http1::Event::NeedMore) {
        return true;
      }
    }
    FAIL("the test proxy's parser did not finish");
    return false;
  }

  // The current request is whole (or its head, for Answer::When::Head):
  // answered now, or held. False when the connection was closed.
  bool requestDone(const std::shared_ptr<Conn>& c) {
    if (!c->current || c->held) return true;  // answered, or held, already
    if (c->current->when == Answer::When::Held) {
      c->held = true;
      held_.push_back(c);
      return true;
    }
    return answer(c);
  }

  // Sends the current answer (once). False when the connection was closed.
  bool answer(const std::shared_ptr<Conn>& c) {
    if (!c->current) return c->socket.is_open();
    Answer a = std::move(*c->current);
    c->current.reset();
    if (a.silent) {
      asio::error_code ec;
      c->socket.close(ec);
      return false;
    }
    auto bytes = std::make_shared<std::string>(std::move(a.bytes));
    asio::async_write(c->socket, asio::buffer(*bytes),
                      [c, bytes, close = a.close](const asio::error_code&, size_t) {
                        if (!close) return;
                        asio::error_code ec;
                        c->socket.close(ec);
                      });
    return true;
  }

  tcp::acceptor acceptor_;
  std::deque<Answer> script_;
  std::vector<std::shared_ptr<Conn>> conns_;
  std::vector<std::shared_ptr<Conn>> held_;
};

// The app side of one request.
using App = test::RecordingApp;

// One request through the pool: the head and its bookkeeping outlive the
// tunnel, as the app connection's do.
struct Request {
  RequestHead head;
  StreamInfo info;
  std::string upload;  // the request body, held until the tunnel's done
  App app;
  std::shared_ptr<Tunnel> tunnel;
  bool over() const { return app.over(); }
};

// An absolute-form request as an app sends it to h2gate.
RequestHead parseHead(const std::string& text) {
  http1::Parser p(http1::Parser::Kind::Request, http1::Limits{});
  size_t used = 0;
  std::string body;
  REQUIRE(p.feed(text.data(), text.size(), &used, &body) == http1::Event::HeadComplete);
  RequestHead h = p.request();
  REQUIRE(http1::parseTarget(h) == "");
  return h;
}

struct PoolFixture {
  PoolFixture() {
    cluster.name = "c";
    cluster.endpoints.push_back({"127.0.0.1", proxy.port()});
  }
  ~PoolFixture() {
    for (auto& r : open_)
      if (r->tunnel) r->tunnel->abort();
    open_.clear();
    if (pool) pool->shutdown();
    pool.reset();
    io.restart();
    io.poll();
  }
  // After changing `cluster`.
  void makePool() {
    pool = std::make_shared<UpstreamPool>(
        io, cluster, nullptr, 0, shard,
        std::make_shared<ClusterHealth>("c", std::vector<std::string>{"proxy"}), requests);
  }
  // GET (no body), or POST `body` with Content-Length.
  // `method` (no body) instead of GET.
  Request& start(const std::string& path, const std::string& body = "",
                 const std::string& method = "GET") {
    auto r = std::make_unique<Request>();
    const std::string target = "http://origin.test" + path;
    r->head = parseHead(
        body.empty() ? method + " " + target + " HTTP/1.1\r\nHost: origin.test\r\n\r\n"
                     : "POST " + target + " HTTP/1.1\r\nHost: origin.test\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n");
    r->info.connection_id = 7;
    r->info.stream_id = ++streams_;
    r->info.cluster = "c";
    r->info.listener_name = "pool_test";
    r->tunnel = pool->newTunnel(r->info.connection_id, r->info.stream_id);
    r->tunnel->open(r->head, r->info, r->app);
    if (!body.empty() && !r->app.failed) {
      r->upload = body;
      r->tunnel->send(r->upload, [] {});
    }
    if (!r->app.failed) r->tunnel->endOfRequest();
    open_.push_back(std::move(r));
    return *open_.back();
  }
  bool waitFor(const std::function<bool()>& cond) { return test::runUntil(io, cond, 10000ms); }
  // A GET the proxy has read and answers only at releaseHeld().
  Request& startHeld(const std::string& path) {
    proxy.script(TestProxy::held());
    const size_t before = proxy.requests();
    Request& r = start(path);
    REQUIRE(waitFor([&] { return proxy.requests() == before + 1; }));
    return r;
  }
  // Runs the loop for `d`, whatever happens.
  void runFor(std::chrono::milliseconds d) {
    test::runUntil(
        io, [] { return false; }, d);
  }
  uint64_t closed(const char* reason) {
    return shard
        .counter(metrics::Family::UpstreamHttp1Closed,
                 {"c", endpointLabel("127.0.0.1", proxy.port()), reason})
        .value();
  }
  int64_t activeConnections() {
    return shard
        .gauge(metrics::Family::UpstreamConnectionsActive,
               {"c", endpointLabel("127.0.0.1", proxy.port()), "http1"})
        .value();
  }
  int64_t waiting() { return shard.gauge(metrics::Family::UpstreamPoolWaiting, {"c"}).value(); }

  config::Cluster cluster;  // outlives io: the pool refers to it until its last handler
  metrics::Shard& shard = metrics::Registry::global().newShard();
  asio::io_context io;
  TestProxy proxy{io};
  std::shared_ptr<net::ConnectionLimit> requests = std::make_shared<net::ConnectionLimit>();
  std::shared_ptr<UpstreamPool> pool;

 private:
  std::vector<std::unique_ptr<Request>> open_;
  uint64_t streams_ = 0;
};

}  // namespace

#if !defined(_WIN32)  // test::Process: the Windows build runs the pool cases only
TEST_CASE("pool test proxy: curl through it gets the scripted answers", "[upstream][pool]") {
  asio::io_context io;
  TestProxy proxy(io);
  proxy.script({"HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope"});
  test::TempDir dir("pool-test-proxy");
  test::Process curl(
      {"curl", "-sS", "--max-time", "10", "-x", "http://127.0.0.1:" + std::to_string(proxy.port()),
       "-w", " %{http_code}", "http://origin.test/one", "http://origin.test/two"},
      dir.path().string());
  REQUIRE(test::runUntil(
      io, [&] { return !curl.running(); }, 15000ms));
  INFO(curl.stderrText());
  CHECK(curl.stdoutText() == "nope 404ok 200");
  // curl kept the connection alive for its second request.
  REQUIRE(proxy.accepted() == 1);
  CHECK(proxy.requestsOn(0) ==
        std::vector<std::string>{"GET http://origin.test/one", "GET http://origin.test/two"});
}

#endif

TEST_CASE(
    "pool: a kept-alive HTTP/1.1 connection carries the next request after a complete "
    "response, an error status to a request without a body included",
    "[upstream][pool]") {
  PoolFixture f;
  f.makePool();
  f.proxy.script({"HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope"});
  Request& a = f.start("/a");
  REQUIRE(f.waitFor([&] { return a.over(); }));
  CHECK(a.app.status == 404);
  CHECK(a.app.body == "nope");
  CHECK(a.app.ended);
  Request& b = f.start("/b");
  REQUIRE(f.waitFor([&] { return b.over(); }));
  CHECK(b.app.status == 200);
  CHECK(b.app.body == "ok");
  REQUIRE(f.proxy.accepted() == 1);
  CHECK(f.proxy.requestsOn(0) ==
        std::vector<std::string>{"GET http://origin.test/a", "GET http://origin.test/b"});
  CHECK(f.activeConnections() == 1);  // idle, kept for the next request
}

TEST_CASE("pool: a response with no body frees its connection for the next request",
          "[upstream][pool]") {
  PoolFixture f;
  f.makePool();
  struct Shape {
    const char* method;
    const char* answer;
  };
  const Shape shapes[] = {
      {"GET", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
      {"GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
      {"GET", "HTTP/1.1 204 No Content\r\n\r\n"},
      {"GET", "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n"},
      {"HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"},
  };
  for (const Shape& shape : shapes) {
    INFO(shape.method << " answered " << shape.answer);
    f.proxy.script({shape.answer});
    Request& r = f.start("/empty", "", shape.method);
    REQUIRE(f.waitFor([&] { return r.over(); }));
    CHECK(r.app.ended);
    CHECK(r.app.body.empty());
  }
  Request& last = f.start("/last");
  REQUIRE(f.waitFor([&] { return last.over(); }));
  CHECK(last.app.status == 200);
  // One connection carried all of them.
  CHECK(f.proxy.accepted() == 1);
  CHECK(f.proxy.requests() == 6);
  CHECK(f.activeConnections() == 1);
}

TEST_CASE(
    "pool: a connection whose request body was answered with an error status is closed, "
    "not reused",
    "[upstream][pool]") {
  PoolFixture f;
  f.makePool();
  f.proxy.script({"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n"});
  Request& a = f.start("/upload", "hello");
  REQUIRE(f.waitFor([&] { return a.over(); }));
  CHECK(a.app.status == 413);
  CHECK(a.app.ended);
  Request& b = f.start("/b");
  REQUIRE(f.waitFor([&] { return b.over(); }));
  CHECK(b.app.status == 200);
  // The next request went on a new connection; the first was closed.
  REQUIRE(f.proxy.accepted() == 2);
  CHECK(f.proxy.requestsOn(1) == std::vector<std::string>{"GET http://origin.test/b"});
  REQUIRE(f.waitFor([&] { return f.proxy.clientClosed(0); }));
  CHECK(f.closed("error_answer") == 1);
}

TEST_CASE(
    "pool: a request whose kept-alive connection died before any answer goes again on a "
    "new connection; with its body sent, the app gets 502",
    "[upstream][pool]") {
  PoolFixture f;
  f.makePool();
  Request& a = f.start("/a");
  REQUIRE(f.waitFor([&] { return a.over(); }));
  REQUIRE(a.app.status == 200);

  SECTION("no byte of the request body went: retried") {
    f.proxy.script(TestProxy::silent());
    Request& b = f.start("/b");
    REQUIRE(f.waitFor([&] { return b.over(); }));
    CHECK_FALSE(b.app.failed);
    CHECK(b.app.status == 200);
    CHECK(b.app.body == "ok");
    REQUIRE(f.proxy.accepted() == 2);
    CHECK(f.proxy.requestsOn(0) ==
          std::vector<std::string>{"GET http://origin.test/a", "GET http://origin.test/b"});
    CHECK(f.proxy.requestsOn(1) == std::vector<std::string>{"GET http://origin.test/b"});
    CHECK(f.closed("proxy_closed_idle") == 1);
  }
  SECTION("its body went: not sent again") {
    f.proxy.script(TestProxy::silent());
    Request& b = f.start("/upload", "hello");
    REQUIRE(f.waitFor([&] { return b.over(); }));
    CHECK(b.app.failed);
    CHECK(b.app.status == 502);
    CHECK(b.app.result == Result::UpstreamReset);
    CHECK(f.proxy.accepted() == 1);
  }
}

TEST_CASE("pool: max_connections: a request beyond it waits for a connection, then takes it",
          "[upstream][pool]") {
  PoolFixture f;
  f.cluster.max_connections = 1;
  f.makePool();
  Request& a = f.startHeld("/a");
  Request& b = f.start("/b");
  f.runFor(300ms);
  CHECK(f.proxy.accepted() == 1);
  CHECK(f.proxy.requests() == 1);
  CHECK(b.app.status == 0);
  CHECK(f.waiting() == 1);
  f.proxy.releaseHeld();
  REQUIRE(f.waitFor([&] { return a.over() && b.over(); }));
  CHECK(a.app.status == 200);
  CHECK(b.app.status == 200);
  CHECK(f.waiting() == 0);
  REQUIRE(f.proxy.accepted() == 1);
  CHECK(f.proxy.requestsOn(0) ==
        std::vector<std::string>{"GET http://origin.test/a", "GET http://origin.test/b"});
}

TEST_CASE("pool: max_requests: a request beyond it gets 503 at once; its slot comes back",
          "[upstream][pool]") {
  PoolFixture f;
  f.cluster.max_requests = 1;
  f.makePool();
  Request& a = f.startHeld("/a");
  Request& b = f.start("/b");
  CHECK(b.app.failed);  // inside open()
  CHECK(b.app.status == 503);
  CHECK(b.app.result == Result::Rejected);
  CHECK(b.app.reason.find("max_requests 1") != std::string::npos);
  f.proxy.releaseHeld();
  REQUIRE(f.waitFor([&] { return a.over(); }));
  CHECK(a.app.status == 200);
  // The app connection drops a finished request's tunnel: its slot is free.
  a.tunnel.reset();
  Request& c = f.start("/c");
  REQUIRE(f.waitFor([&] { return c.over(); }));
  CHECK(c.app.status == 200);
}

TEST_CASE(
    "pool: draining: idle connections close at once, a request in progress finishes, "
    "new requests get 503",
    "[upstream][pool]") {
  PoolFixture f;
  f.makePool();
  f.proxy.script({});                 // /a: answered at once
  f.proxy.script(TestProxy::held());  // /b: answered when the test says
  Request& a = f.start("/a");
  Request& b = f.start("/b");
  REQUIRE(f.waitFor([&] { return a.over() && f.proxy.requests() == 2; }));
  CHECK(a.app.status == 200);
  REQUIRE(f.proxy.accepted() == 2);
  CHECK(f.activeConnections() == 2);  // /a's idle, /b's busy

  f.pool->shutdown();
  REQUIRE(f.waitFor([&] { return f.proxy.clientClosed(0); }));
  CHECK_FALSE(f.proxy.clientClosed(1));
  CHECK(f.closed("shutdown") == 1);
  CHECK_FALSE(b.over());

  f.proxy.releaseHeld();
  REQUIRE(f.waitFor([&] { return b.over(); }));
  CHECK(b.app.status == 200);
  CHECK(b.app.ended);
  // Its connection is not kept for another request.
  REQUIRE(f.waitFor([&] { return f.proxy.clientClosed(1); }));
  CHECK(f.closed("shutdown") == 2);
  CHECK(f.activeConnections() == 0);

  Request& c = f.start("/c");
  REQUIRE(f.waitFor([&] { return c.over(); }));
  CHECK(c.app.status == 503);
  CHECK(f.proxy.accepted() == 2);
}

TEST_CASE("pool: an idle connection the proxy closed is dropped; the next request opens another",
          "[upstream][pool]") {
  PoolFixture f;
  f.makePool();
  Request& a = f.start("/a");
  REQUIRE(f.waitFor([&] { return a.over(); }));
  REQUIRE(f.activeConnections() == 1);
  f.proxy.close(0);
  REQUIRE(f.waitFor([&] { return f.activeConnections() == 0; }));
  CHECK(f.closed("proxy_closed_idle") == 1);
  Request& b = f.start("/b");
  REQUIRE(f.waitFor([&] { return b.over(); }));
  CHECK(b.app.status == 200);
  CHECK_FALSE(b.app.failed);
  CHECK(f.proxy.accepted() == 2);
}
