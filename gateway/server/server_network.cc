// Server: network changes and resumes from suspend (see
// gateway/net/network_monitor.h). Main thread only.
#include "gateway/base/log.h"
#include "gateway/server/server.h"

namespace h2gate {

void Server::startNetworkMonitor() {
  const config::Duration timeout = bootstrap_->network_change_timeout;
  if (timeout.count() <= 0) {
    H2G_LOG(Info, 0, 0, "network monitor off (h2gate.network_change_timeout: 0s)");
    return;
  }
  network_monitor_ = std::make_unique<net::NetworkMonitor>(
      main_io_, net::NetworkMonitor::Options{},
      [this](const std::string& reason) { onNetworkChange(reason); });
  if (std::string err = network_monitor_->start(); !err.empty())
    H2G_LOG(Warn, 0, 0,
            "network monitor: " << err << "; address and route changes may go unnoticed");
  else
    H2G_LOG(Debug, 0, 0,
            "network monitor on: upstream connections are confirmed within "
                << std::chrono::duration<double>(timeout).count()
                << "s after a network change or resume");
}

void Server::onNetworkChange(const std::string& reason) {
  ++network_changes_;
  // Filters first (a PAC route forgets its answers and fetches again),
  // whatever else is confirmed below.
  for (const auto& l : listeners_)
    for (const auto& f : l->filters) f->onNetworkChange();
  // The current configuration's value: a reload may have changed it.
  const config::Duration timeout = bootstrap_->network_change_timeout;
  if (timeout.count() <= 0) {
    H2G_LOG(Info, 0, 0,
            "network change: " << reason << " (network_change_timeout is 0s: not confirming)");
    return;
  }
  if (bootstrap_->clusters.empty()) {
    H2G_LOG(Info, 0, 0,
            "network change: " << reason << " (direct mode: no upstream connection to confirm)");
    return;
  }
  H2G_LOG(Info, 0, 0, "network change: " << reason << "; confirming upstream connections");
  for (auto& w : workers_) w->onNetworkChange(timeout);
}

}  // namespace h2gate
