// A worker's metric cells for one listener: the app side of h2gate.
// Built before the worker's thread starts or on it (see metrics::Shard);
// used on the worker's thread only.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <unordered_map>

#include "gateway/http_types.h"
#include "gateway/metrics/registry.h"

namespace h2gate::downstream {

class ListenerStats {
 public:
  ListenerStats(metrics::Shard& shard, std::string listener);
  ListenerStats(const ListenerStats&) = delete;
  ListenerStats& operator=(const ListenerStats&) = delete;

  // Where a request went: cells looked up once per (cluster, protocol).
  struct Route {
    metrics::Counter& up;
    metrics::Counter& down;
    metrics::Histogram& tunnel_setup;
    metrics::Histogram& ttfb_connect;
    metrics::Histogram& ttfb_forward;
  };
  // `cluster` is "direct" for DIRECT routes.
  Route& route(const std::string& cluster, const std::string& protocol);
  void finished(const std::string& cluster, const std::string& protocol, bool connect,
                Result result);
  void errorReply(int status);

  metrics::Counter& connections;
  metrics::Gauge& connections_active;
  metrics::Counter& started_connect;
  metrics::Counter& started_forward;
  metrics::Gauge& active_connect;
  metrics::Gauge& active_forward;

 private:
  metrics::Shard& shard_;
  const std::string listener_;
  std::unordered_map<std::string, std::unique_ptr<Route>> routes_;
  // requests_finished cells per (cluster, protocol), by kind and result:
  // resolved once, not per request.
  std::unordered_map<std::string, std::array<metrics::Counter*, 2 * kResultCount>> finished_;
};

}  // namespace h2gate::downstream
