// NetworkMonitor with the real Windows watcher (network_monitor_win.cc):
// iphlpapi registrations start and stop cleanly, and the suspend clocks
// read sensibly. Built only by the mingw-w64 cross build (tests/windows/) and
// run under wine, which may accept the registrations without ever calling
// back; the Linux build compiles this file to nothing.
#ifdef _WIN32
#include <windows.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gateway/net/network_monitor.h"

using namespace h2gate::net;
using namespace std::chrono_literals;

TEST_CASE("windows: the monitor starts, runs and stops without crashing",
          "[net][netmon][windows]") {
  asio::io_context io;
  std::vector<std::string> reasons;
  NetworkMonitor::Options o;
  o.debounce = 50ms;
  o.suspend_tick = 20ms;
  for (int round = 0; round < 3; ++round) {
    NetworkMonitor m(io, o, [&](const std::string& r) { reasons.push_back(r); });
    const std::string err = m.start();
    if (!err.empty()) WARN("watcher: " << err);  // wine may lack some notifications
    io.restart();
    io.run_for(200ms);
    m.stop();
    m.stop();  // idempotent
    io.restart();
    io.run_for(20ms);
  }
  // Nothing changed the network meanwhile, and nobody slept.
  for (const auto& r : reasons) WARN("unexpected change: " << r);
  SUCCEED("started, ran and stopped three times");
}

TEST_CASE("windows: the suspend clocks advance together while awake", "[net][netmon][windows]") {
  const SuspendClock clock = systemSuspendClock();
  const SuspendClockReading a = clock();
  std::this_thread::sleep_for(300ms);
  const SuspendClockReading b = clock();
  const auto awake = b.awake - a.awake;
  const auto boot = b.boot - a.boot;
  CHECK(awake >= 250ms);
  CHECK(boot >= 250ms);
  // GetTickCount64 moves in 10-16 ms steps.
  CHECK(std::chrono::abs(boot - awake) < 100ms);
  SuspendDetector d(clock, 2s);
  CHECK_FALSE(d.check());
  CHECK_FALSE(d.check());
}
#endif
