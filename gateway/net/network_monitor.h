// Notices that the machine's network changed (addresses, routes, links) or
// that the process was suspended (laptop sleep), and says so once per burst.
//
// Why: an h2 connection to the proxy survives neither a new address nor a
// night in a closed laptop, but nothing tells it so; the next request would
// wait for TCP to give up. On a change the server has every upstream h2
// connection prove itself with a PING (Firefox's
// network.http.network-changed.timeout) and replaces those that cannot.
//
// Pieces, platform-neutral here:
//   ChangeCoalescer  bursts of events (an interface going up brings addresses,
//                    routes and link messages together) become one callback.
//   SuspendDetector  compares a clock that stops while the machine sleeps with
//                    one that does not; the clocks are injected (tests fake a
//                    jump).
//   NetworkMonitor   both, plus the OS's change notifications through a
//                    NetworkWatcher made by the platform file:
//                    network_monitor_linux.cc (rtnetlink),
//                    network_monitor_win.cc (iphlpapi, cross-built by
//                    tests/windows/) or, on other POSIX systems,
//                    network_monitor_posix.cc (neither notifications nor
//                    suspend detection).
//
// Threads: everything runs on the io_context given at construction. Create,
// start(), stop() and destroy a NetworkMonitor on that context's thread, or
// while the context does not run. Callbacks never run after stop() or
// destruction.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio.hpp>

namespace h2gate::net {

// One reading of two clocks that differ only while the machine sleeps.
struct SuspendClockReading {
  // Stops during suspend (Linux CLOCK_MONOTONIC, Windows unbiased interrupt time).
  std::chrono::nanoseconds awake{0};
  // Keeps counting during suspend (Linux CLOCK_BOOTTIME, Windows GetTickCount64).
  std::chrono::nanoseconds boot{0};
};
using SuspendClock = std::function<SuspendClockReading()>;

// The platform's clocks (defined by the platform file).
SuspendClock systemSuspendClock();

// Call check() every second or so: it says when the machine slept for longer
// than `threshold` since the previous call. The first call only takes a
// reading.
class SuspendDetector {
 public:
  SuspendDetector(SuspendClock clock, std::chrono::nanoseconds threshold);
  // How long the machine was suspended since the last call, when that is
  // more than the threshold; nullopt otherwise.
  std::optional<std::chrono::nanoseconds> check();

 private:
  SuspendClock clock_;
  std::chrono::nanoseconds threshold_;
  std::optional<SuspendClockReading> last_;
};

// Collects events and runs `on_change` once per burst: when no event came
// for `quiet`, or at the latest `max_delay` after the burst's first event (so
// a flapping link cannot postpone it forever). The reason names the events,
// duplicates once, at most kMaxListed of them.
class ChangeCoalescer {
 public:
  using OnChange = std::function<void(const std::string& reason)>;
  static constexpr size_t kMaxListed = 4;

  ChangeCoalescer(asio::io_context& io, std::chrono::milliseconds quiet,
                  std::chrono::milliseconds max_delay, OnChange on_change);
  ~ChangeCoalescer();
  ChangeCoalescer(const ChangeCoalescer&) = delete;
  ChangeCoalescer& operator=(const ChangeCoalescer&) = delete;

  void note(std::string what);
  // Drops the pending burst; no callback for it.
  void cancel();
  size_t pending() const { return events_.size(); }

 private:
  void arm();
  void fire();

  asio::steady_timer timer_;
  std::chrono::milliseconds quiet_;
  std::chrono::milliseconds max_delay_;
  OnChange on_change_;
  std::vector<std::string> events_;  // distinct, in arrival order
  size_t total_ = 0;                 // events noted in this burst, duplicates too
  std::chrono::steady_clock::time_point first_{};
  std::chrono::steady_clock::time_point last_{};
  // Handlers hold a weak_ptr: a wait that completed before cancel() or
  // destruction must not touch this object.
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

// The OS's source of change notifications (platform file). It calls `note`
// on the io_context's thread, one short text per event ("address
// 10.0.0.5/24 added on eth0"), only for real changes, never for refreshes.
class NetworkWatcher {
 public:
  using Note = std::function<void(std::string what)>;
  virtual ~NetworkWatcher() = default;
  // Subscribes. Returns "" or why notifications are (partly) unavailable;
  // the watcher then delivers what it can.
  virtual std::string start() = 0;
  // Unsubscribes; no `note` call afterwards. Idempotent.
  virtual void stop() = 0;
};
std::unique_ptr<NetworkWatcher> makeNetworkWatcher(asio::io_context& io, NetworkWatcher::Note note);

class NetworkMonitor {
 public:
  using OnChange = ChangeCoalescer::OnChange;
  struct Options {
    std::chrono::milliseconds debounce{500};
    std::chrono::milliseconds max_delay{3000};  // of one burst's callback
    std::chrono::milliseconds suspend_tick{1000};
    std::chrono::milliseconds suspend_threshold{2000};
    SuspendClock clock;    // empty: systemSuspendClock()
    bool watch_os = true;  // false: suspend detection and note() only (tests)
  };

  NetworkMonitor(asio::io_context& io, Options options, OnChange on_change);
  ~NetworkMonitor();
  NetworkMonitor(const NetworkMonitor&) = delete;
  NetworkMonitor& operator=(const NetworkMonitor&) = delete;

  // Subscribes to the OS's notifications and starts the suspend timer.
  // Returns "" or why OS notifications are unavailable (suspend detection
  // still runs; the caller logs it).
  std::string start();
  void stop();
  // One event, as the watcher reports it (logged at debug, then coalesced).
  void note(std::string what);

 private:
  void tick();
  void armTick();

  asio::io_context& io_;
  Options options_;
  ChangeCoalescer coalescer_;
  SuspendDetector suspend_;
  asio::steady_timer suspend_timer_;
  std::unique_ptr<NetworkWatcher> watcher_;
  bool running_ = false;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);  // see ChangeCoalescer
};

}  // namespace h2gate::net
