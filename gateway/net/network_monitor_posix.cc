// NetworkMonitor's parts on POSIX systems other than Linux (the BSDs,
// macOS): neither change notifications nor suspend detection yet. Linux
// listens on rtnetlink (network_monitor_linux.cc), Windows on iphlpapi
// (network_monitor_win.cc); here a PF_ROUTE socket would do it, which
// nothing tests. Upstream h2 connections then learn of a new network only
// when their own PINGs or TCP give up.
#include <chrono>

#include "gateway/net/network_monitor.h"

namespace h2gate::net {
namespace {

class NoNetworkWatcher final : public NetworkWatcher {
 public:
  std::string start() override {
    return "network change notifications are implemented on Linux (rtnetlink) and Windows "
           "only";
  }
  void stop() override {}
};

}  // namespace

// One clock for both readings: they never drift apart, so SuspendDetector
// reports no suspend. (Which POSIX clock stops during sleep differs between
// the systems: macOS's CLOCK_MONOTONIC counts on, FreeBSD's does not.)
SuspendClock systemSuspendClock() {
  return [] {
    const std::chrono::nanoseconds now = std::chrono::steady_clock::now().time_since_epoch();
    return SuspendClockReading{now, now};
  };
}

std::unique_ptr<NetworkWatcher> makeNetworkWatcher(asio::io_context&, NetworkWatcher::Note) {
  return std::make_unique<NoNetworkWatcher>();
}

}  // namespace h2gate::net
