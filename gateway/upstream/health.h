// What is known about each endpoint of a cluster, across all workers: up
// (the last connection attempt worked), down (it failed), or not known yet.
// Feeds /ready, /clusters and the h2gate_upstream_endpoint_up gauge.
// Thread-safe: every worker's pool reports to the same object; the last
// report wins, and a transition is logged once.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace h2gate::upstream {

class ClusterHealth {
 public:
  enum class State { Unknown, Up, Down };
  struct Endpoint {
    std::string name;  // "host:port"
    State state = State::Unknown;
    std::string alpn;        // of the last connection that worked
    std::string last_error;  // empty until something failed
    // The proxy authentication scheme in use towards it ("negotiate",
    // "ntlm", "basic"; "auto" while a cluster set to auto has not learnt
    // it yet); empty when the cluster does not authenticate.
    std::string auth;
    std::chrono::system_clock::time_point since{};  // of the current state
  };

  ClusterHealth(std::string cluster, std::vector<std::string> endpoints);

  const std::string& name() const { return name_; }
  void connected(size_t endpoint, const std::string& alpn);
  void failed(size_t endpoint, const std::string& reason);
  // An established connection ended: remembered as the last error, but the
  // endpoint stays up until a new attempt fails.
  void lost(size_t endpoint, const std::string& reason);
  // The authentication scheme used with `endpoint` (see Endpoint::auth).
  void setAuth(size_t endpoint, std::string_view scheme);

  std::vector<Endpoint> snapshot() const;
  // At least one endpoint is up.
  bool usable() const;

 private:
  const std::string name_;
  mutable std::mutex mu_;
  std::vector<Endpoint> endpoints_;
};

const char* stateName(ClusterHealth::State s);

}  // namespace h2gate::upstream
