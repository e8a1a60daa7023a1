// The send-buffer tuner against fake socket operations and a fake clock.
// Standard library and Catch2 only: the Windows cross build runs it too.
#include <catch2/catch.hpp>

#include <optional>
#include <vector>

#include "gateway/net/send_buffer.h"

using namespace h2gate::net;
using namespace std::chrono_literals;
using TimePoint = std::chrono::steady_clock::time_point;

namespace {

struct FakeOps : SocketOps {
  struct State {
    std::optional<uint32_t> ideal = 65536;  // nullopt: the query fails
    bool set_fails = false;
    uint32_t sndbuf = 8192;
    int queries = 0;
    std::vector<uint32_t> sets;
    std::vector<uint32_t> lowats;
  };
  explicit FakeOps(State& s) : s_(s) {}
  std::optional<uint32_t> idealSendBacklog() override {
    ++s_.queries;
    return s_.ideal;
  }
  bool setSendBuffer(uint32_t bytes) override {
    if (s_.set_fails) return false;
    s_.sets.push_back(bytes);
    s_.sndbuf = bytes;
    return true;
  }
  std::optional<uint32_t> sendBuffer() override { return s_.sndbuf; }
  bool setNotsentLowat(uint32_t bytes) override {
    s_.lowats.push_back(bytes);
    return true;
  }
  State& s_;
};

struct SendBufferFixture {
  FakeOps::State state;
  TimePoint now{};
  std::vector<std::pair<uint32_t, uint32_t>> changes;
  SendBufferTuner make(SendBufferConfig config) {
    return SendBufferTuner(
        config, std::make_unique<FakeOps>(state), [this] { return now; },
        [this](uint32_t from, uint32_t to) { changes.emplace_back(from, to); });
  }
};

SendBufferConfig ideal() {
  SendBufferConfig c;
  c.mode = SendBufferConfig::Mode::IdealBacklog;
  return c;
}

}  // namespace

TEST_CASE("ideal backlog: at most one query per second per connection", "[net][send_buffer]") {
  SendBufferFixture f;
  SendBufferTuner t = f.make(ideal());
  t.onConnected();
  CHECK(f.state.queries == 1);
  CHECK(f.state.sets == std::vector<uint32_t>{65536});
  CHECK(t.sendBuffer() == 65536);
  // Many sends (from any number of streams of the connection) within the second.
  for (int i = 0; i < 1000; ++i) {
    f.now += 999us;
    t.afterSend();
  }
  CHECK(f.state.queries == 1);
  f.now += 1ms;  // 1.000 s since the first query
  t.afterSend();
  CHECK(f.state.queries == 2);
  t.afterSend();
  CHECK(f.state.queries == 2);
}

TEST_CASE("ideal backlog: SO_SNDBUF is set only when the ideal value changes",
          "[net][send_buffer]") {
  SendBufferFixture f;
  SendBufferTuner t = f.make(ideal());
  t.onConnected();
  for (int i = 0; i < 5; ++i) {
    f.now += 1s;
    t.afterSend();
  }
  CHECK(f.state.queries == 6);
  CHECK(f.state.sets.size() == 1);  // unchanged: no setsockopt

  f.state.ideal = 1u << 20;  // grows…
  f.now += 1s;
  t.afterSend();
  f.state.ideal = 256u << 10;  // …and shrinks
  f.now += 1s;
  t.afterSend();
  CHECK(f.state.sets == std::vector<uint32_t>{65536, 1u << 20, 256u << 10});
  CHECK(t.sendBuffer() == 256u << 10);
  CHECK(f.changes == std::vector<std::pair<uint32_t, uint32_t>>{
                         {8192, 65536}, {65536, 1u << 20}, {1u << 20, 256u << 10}});
}

TEST_CASE("ideal backlog: failures are swallowed and retried a second later",
          "[net][send_buffer]") {
  SendBufferFixture f;
  f.state.ideal = std::nullopt;  // WSAEINVAL (old Windows) / WSAENOTCONN
  SendBufferTuner t = f.make(ideal());
  t.onConnected();
  f.now += 1s;
  t.afterSend();
  CHECK(f.state.queries == 2);
  CHECK(f.state.sets.empty());
  CHECK(t.sendBuffer() == 8192);

  f.state.ideal = 0;  // nonsense answers are ignored too
  f.now += 1s;
  t.afterSend();
  CHECK(f.state.sets.empty());

  f.state.ideal = 131072;
  f.state.set_fails = true;  // setsockopt refused: try again next time
  f.now += 1s;
  t.afterSend();
  CHECK(f.state.sets.empty());
  f.state.set_fails = false;
  f.now += 1s;
  t.afterSend();
  CHECK(f.state.sets == std::vector<uint32_t>{131072});
}

TEST_CASE("ideal backlog: clamped to 16 MiB", "[net][send_buffer]") {
  SendBufferFixture f;
  f.state.ideal = 100u << 20;
  SendBufferTuner t = f.make(ideal());
  t.onConnected();
  CHECK(f.state.sets == std::vector<uint32_t>{SendBufferTuner::kMaxBytes});
  CHECK(SendBufferTuner::kMaxBytes == 16u << 20);
}

TEST_CASE("fixed: set once at connect, never queried", "[net][send_buffer]") {
  SendBufferFixture f;
  SendBufferConfig c;
  c.mode = SendBufferConfig::Mode::Fixed;
  c.bytes = 65536;
  SendBufferTuner t = f.make(c);
  t.onConnected();
  for (int i = 0; i < 5; ++i) {
    f.now += 2s;
    t.afterSend();
  }
  CHECK(f.state.sets == std::vector<uint32_t>{65536});
  CHECK(f.state.queries == 0);
  CHECK(t.effectiveMode() == SendBufferConfig::Mode::Fixed);
}

TEST_CASE("auto: the platform decides; TCP_NOTSENT_LOWAT only when configured",
          "[net][send_buffer]") {
  SendBufferFixture f;
  SendBufferConfig c;  // auto
  SendBufferTuner t = f.make(c);
  t.onConnected();
  f.now += 2s;
  t.afterSend();
  if (platformHasIdealBacklog()) {
    CHECK(t.effectiveMode() == SendBufferConfig::Mode::IdealBacklog);
    CHECK(f.state.queries == 2);
  } else {
    // Linux/macOS: kernel autotuning stays on: no setsockopt, no query.
    CHECK(t.effectiveMode() == SendBufferConfig::Mode::Auto);
    CHECK(f.state.queries == 0);
    CHECK(f.state.sets.empty());
  }
  CHECK(f.state.lowats.empty());

  SendBufferFixture g;
  c.notsent_lowat = 131072;
  SendBufferTuner u = g.make(c);
  u.onConnected();
  CHECK(g.state.lowats == std::vector<uint32_t>{131072});
}
