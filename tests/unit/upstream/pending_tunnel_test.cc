// PendingTunnel (gateway/upstream/pending_tunnel.h): what the app sends
// before the real tunnel exists (a request waiting in a pool, a direct
// connection still resolving) reaches it, once, in order; a request failed
// or aborted first tells the app once and nothing after.
#include "gateway/upstream/pending_tunnel.h"

#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

using namespace h2gate;
using namespace h2gate::upstream;

namespace {

// The real tunnel: records the calls it gets, in order.
struct Recorder : Tunnel {
  void open(const RequestHead& head, StreamInfo&, TunnelCallbacks& cb) override {
    calls.push_back("open " + head.target);
    callbacks = &cb;
  }
  void send(std::string_view data, Done done) override {
    calls.push_back("send " + std::string(data));
    last_done = std::move(done);
  }
  void endOfRequest() override { calls.push_back("end"); }
  void abort() override { calls.push_back("abort"); }
  std::vector<std::string> calls;
  TunnelCallbacks* callbacks = nullptr;
  Done last_done;
};

// A PendingTunnel whose real tunnel the test hands over.
struct Pending : PendingTunnel {
  void open(const RequestHead& head, StreamInfo& info, TunnelCallbacks& cb) override {
    save(head, info, cb);
  }
  using PendingTunnel::attach;
  using PendingTunnel::attached;
  using PendingTunnel::fail;
};

struct AppEnd : TunnelCallbacks {
  void onResponseHead(ResponseHead) override {}
  void onResponseData(std::string_view, Done done) override { done(); }
  void onResponseEnd() override {}
  void onFailed(int s, Result, std::string why) override {
    failed.push_back(std::to_string(s) + " " + why);
  }
  void onReset(Result, std::string) override {}
  std::vector<std::string> failed;
};

struct PendingTunnelFixture {
  PendingTunnelFixture() {
    head.target = "http://origin.test/";
    pending.open(head, info, app);
  }
  RequestHead head;
  StreamInfo info;
  AppEnd app;
  Pending pending;
};

}  // namespace

TEST_CASE("pending tunnel: the held buffer and end go to the real tunnel, in order",
          "[upstream][pending_tunnel]") {
  PendingTunnelFixture f;
  bool done = false;
  f.pending.send("body", [&] { done = true; });
  f.pending.endOfRequest();
  CHECK_FALSE(f.pending.attached());
  CHECK_FALSE(done);  // held, not acknowledged: the app must not send more
  auto inner = std::make_shared<Recorder>();
  f.pending.attach(inner);
  CHECK(f.pending.attached());
  CHECK(inner->calls == std::vector<std::string>{"open http://origin.test/", "send body", "end"});
  CHECK(inner->callbacks == &f.app);
  REQUIRE(inner->last_done);
  inner->last_done();  // the real tunnel's done is the app's
  CHECK(done);
  // From now on, straight through.
  f.pending.send("more", [] {});
  f.pending.abort();
  CHECK(inner->calls.back() == "abort");
  CHECK(inner->calls[inner->calls.size() - 2] == "send more");
}

TEST_CASE("pending tunnel: the end is replayed to the next tunnel of a retry",
          "[upstream][pending_tunnel]") {
  PendingTunnelFixture f;
  auto first = std::make_shared<Recorder>();
  f.pending.attach(first);
  f.pending.endOfRequest();
  CHECK(first->calls.back() == "end");
  auto second = std::make_shared<Recorder>();
  f.pending.attach(second);  // the request queued again, on a new connection
  CHECK(second->calls == std::vector<std::string>{"open http://origin.test/", "end"});
}

TEST_CASE("pending tunnel: failed or aborted before a tunnel, nothing reaches one",
          "[upstream][pending_tunnel]") {
  SECTION("failed") {
    PendingTunnelFixture f;
    f.pending.send("body", [] { FAIL("a failed request's buffer is not acknowledged"); });
    f.pending.fail(503, Result::ConnectFailed, "no proxy is up");
    f.pending.fail(502, Result::ConnectFailed, "again");  // the app hears once
    CHECK(f.app.failed == std::vector<std::string>{"503 no proxy is up"});
    auto late = std::make_shared<Recorder>();
    f.pending.attach(late);
    CHECK(late->calls.empty());
    CHECK_FALSE(f.pending.attached());
  }
  SECTION("aborted") {
    PendingTunnelFixture f;
    f.pending.send("body", [] { FAIL("an aborted request's buffer is not acknowledged"); });
    f.pending.abort();
    auto late = std::make_shared<Recorder>();
    f.pending.attach(late);
    CHECK(late->calls.empty());
    f.pending.fail(502, Result::ConnectFailed, "after the abort");
    CHECK(f.app.failed.empty());
  }
}
