// What stops or reloads the process on POSIX (server_signals_posix.cc), in the
// process itself: SIGTERM and SIGINT are stops, SIGHUP a reload, each handled
// on the Server's event loop and named for the log; a service-style stop
// from another thread is a stop too; SIGPIPE does not kill the process.
// The daemon's reaction (drain, reload) is the integration tests'.
#include <csignal>
#include <string>
#include <thread>

#include <asio.hpp>
#include <catch2/catch.hpp>

#include "gateway/server/server_signals.h"
#include "tests/unit/upstream/io_util.h"

using namespace h2gate;
using namespace std::chrono_literals;

namespace {

struct Got {
  bool done = false;
  ServerSignals::Kind kind = ServerSignals::Kind::Stop;
  std::string name;
  std::thread::id thread;
};

// The next signal `signals` reports, after `raise` ran.
Got next(asio::io_context& io, ServerSignals& signals, const std::function<void()>& raise) {
  Got got;
  signals.asyncWait([&](ServerSignals::Kind k, const std::string& n) {
    got.done = true;
    got.kind = k;
    got.name = n;
    got.thread = std::this_thread::get_id();
  });
  raise();
  REQUIRE(test::runUntil(
      io, [&] { return got.done; }, 5000ms));
  return got;
}

}  // namespace

TEST_CASE("server signals: SIGHUP reloads, SIGTERM and SIGINT stop", "[server][signals]") {
  asio::io_context io;
  ServerSignals signals(io);
  Got g = next(io, signals, [] { std::raise(SIGHUP); });
  CHECK(g.kind == ServerSignals::Kind::Reload);
  CHECK(g.name == "SIGHUP");
  CHECK(g.thread == std::this_thread::get_id());  // on the loop, not in the signal handler
  g = next(io, signals, [] { std::raise(SIGTERM); });
  CHECK(g.kind == ServerSignals::Kind::Stop);
  CHECK(g.name == "SIGTERM");
  g = next(io, signals, [] { std::raise(SIGINT); });
  CHECK(g.kind == ServerSignals::Kind::Stop);
  CHECK(g.name == "SIGINT");
}

TEST_CASE("server signals: requestStop from another thread is a stop", "[server][signals]") {
  asio::io_context io;
  ServerSignals signals(io);
  const Got g = next(io, signals, [] {
    std::thread t([] { ServerSignals::requestStop("service stop"); });
    t.join();
  });
  CHECK(g.kind == ServerSignals::Kind::Stop);
  CHECK(g.name == "service stop");
  CHECK(g.thread == std::this_thread::get_id());
}

TEST_CASE("server signals: cancel() means no handler; SIGPIPE is ignored", "[server][signals]") {
  asio::io_context io;
  ServerSignals signals(io);
  bool called = false;
  signals.asyncWait([&](ServerSignals::Kind, const std::string&) { called = true; });
  signals.cancel();
  std::raise(SIGHUP);  // still caught by the signal set, but nobody waits
  test::runUntil(
      io, [] { return false; }, 100ms);
  CHECK_FALSE(called);

  ServerSignals::prepareProcess();
  std::raise(SIGPIPE);  // would end the process without prepareProcess()
  SUCCEED("the process is alive");
}
