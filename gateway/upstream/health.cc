#include "gateway/upstream/health.h"

#include "gateway/base/log.h"

namespace h2gate::upstream {

ClusterHealth::ClusterHealth(std::string cluster, std::vector<std::string> endpoints)
    : name_(std::move(cluster)) {
  for (auto& e : endpoints) {
    Endpoint ep;
    ep.name = std::move(e);
    endpoints_.push_back(std::move(ep));
  }
}

void ClusterHealth::connected(size_t i, const std::string& alpn) {
  std::lock_guard lock(mu_);
  Endpoint& e = endpoints_.at(i);
  if (e.state == State::Down)
    H2G_LOG(Info, 0, 0, "cluster " << name_ << ": proxy " << e.name << " is reachable again");
  if (e.state != State::Up) e.since = std::chrono::system_clock::now();
  e.state = State::Up;
  e.alpn = alpn.empty() ? "http/1.1" : alpn;
}

void ClusterHealth::failed(size_t i, const std::string& reason) {
  std::lock_guard lock(mu_);
  Endpoint& e = endpoints_.at(i);
  if (e.state != State::Down) {
    H2G_LOG(Warn, 0, 0, "cluster " << name_ << ": proxy " << e.name << " is down: " << reason);
    e.since = std::chrono::system_clock::now();
  }
  e.state = State::Down;
  e.last_error = reason;
}

void ClusterHealth::lost(size_t i, const std::string& reason) {
  std::lock_guard lock(mu_);
  endpoints_.at(i).last_error = reason;
}

void ClusterHealth::setAuth(size_t i, std::string_view scheme) {
  std::lock_guard lock(mu_);
  endpoints_.at(i).auth = scheme;
}

std::vector<ClusterHealth::Endpoint> ClusterHealth::snapshot() const {
  std::lock_guard lock(mu_);
  return endpoints_;
}

bool ClusterHealth::usable() const {
  std::lock_guard lock(mu_);
  for (const auto& e : endpoints_)
    if (e.state == State::Up) return true;
  return false;
}

const char* stateName(ClusterHealth::State s) {
  switch (s) {
    case ClusterHealth::State::Up:
      return "up";
    case ClusterHealth::State::Down:
      return "down";
    case ClusterHealth::State::Unknown:
      break;
  }
  return "unknown";
}

}  // namespace h2gate::upstream
