#include "gateway/net/network_monitor.h"

#include <algorithm>
#include <cmath>

#include "gateway/base/log.h"

namespace h2gate::net {

SuspendDetector::SuspendDetector(SuspendClock clock, std::chrono::nanoseconds threshold)
    : clock_(std::move(clock)), threshold_(threshold) {}

std::optional<std::chrono::nanoseconds> SuspendDetector::check() {
  const SuspendClockReading now = clock_();
  const std::optional<SuspendClockReading> last = last_;
  last_ = now;
  if (!last) return std::nullopt;
  // Both clocks advance together while the machine runs; only the boot clock
  // advances while it sleeps. A clock going backwards (it must not) is
  // treated as no suspend.
  const auto slept = (now.boot - last->boot) - (now.awake - last->awake);
  if (slept <= threshold_) return std::nullopt;
  return slept;
}

ChangeCoalescer::ChangeCoalescer(asio::io_context& io, std::chrono::milliseconds quiet,
                                 std::chrono::milliseconds max_delay, OnChange on_change)
    : timer_(io),
      quiet_(quiet),
      max_delay_(std::max(max_delay, quiet)),
      on_change_(std::move(on_change)) {}

ChangeCoalescer::~ChangeCoalescer() = default;

void ChangeCoalescer::note(std::string what) {
  const auto now = std::chrono::steady_clock::now();
  if (total_++ == 0) first_ = now;
  last_ = now;
  if (std::find(events_.begin(), events_.end(), what) == events_.end())
    events_.push_back(std::move(what));
  arm();
}

void ChangeCoalescer::cancel() {
  events_.clear();
  total_ = 0;
  timer_.cancel();
}

void ChangeCoalescer::arm() {
  // Quiet for `quiet_` after the last event, but no later than max_delay_
  // after the first.
  timer_.expires_at(std::min(last_ + quiet_, first_ + max_delay_));
  timer_.async_wait([this, life = std::weak_ptr<int>(life_)](const asio::error_code& ec) {
    if (ec || !life.lock()) return;
    fire();
  });
}

void ChangeCoalescer::fire() {
  if (events_.empty()) return;
  // A newer event re-armed the timer after this wait had completed: wait on.
  if (std::chrono::steady_clock::now() < std::min(last_ + quiet_, first_ + max_delay_)) return;
  std::string reason;
  const size_t listed = std::min(events_.size(), kMaxListed);
  for (size_t i = 0; i < listed; ++i) reason += (i ? "; " : "") + events_[i];
  if (total_ > listed) reason += " (" + std::to_string(total_) + " events)";
  events_.clear();
  total_ = 0;
  on_change_(reason);
}

NetworkMonitor::NetworkMonitor(asio::io_context& io, Options options, OnChange on_change)
    : io_(io),
      options_(std::move(options)),
      coalescer_(io, options_.debounce, options_.max_delay, std::move(on_change)),
      suspend_(options_.clock ? options_.clock : systemSuspendClock(), options_.suspend_threshold),
      suspend_timer_(io) {}

NetworkMonitor::~NetworkMonitor() {
  stop();
}

std::string NetworkMonitor::start() {
  if (running_) return {};
  running_ = true;
  suspend_.check();  // the first reading
  armTick();
  if (!options_.watch_os) return {};
  watcher_ = makeNetworkWatcher(io_, [this](std::string what) { note(std::move(what)); });
  return watcher_->start();
}

void NetworkMonitor::stop() {
  if (!running_) return;
  running_ = false;
  if (watcher_) watcher_->stop();
  suspend_timer_.cancel();
  coalescer_.cancel();
}

void NetworkMonitor::note(std::string what) {
  H2G_LOG(Debug, 0, 0, "network event: " << what);
  coalescer_.note(std::move(what));
}

void NetworkMonitor::tick() {
  if (auto slept = suspend_.check()) {
    const auto s = std::llround(std::chrono::duration<double>(*slept).count());
    note("resumed after ~" + std::to_string(s) + " s of suspend");
  }
  armTick();
}

void NetworkMonitor::armTick() {
  suspend_timer_.expires_after(options_.suspend_tick);
  suspend_timer_.async_wait([this, life = std::weak_ptr<int>(life_)](const asio::error_code& ec) {
    if (ec || !life.lock() || !running_) return;
    tick();
  });
}

}  // namespace h2gate::net
