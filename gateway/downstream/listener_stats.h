// A worker's metric cells for one listener: the app side of h2gate.
// Built before the worker's thread starts or on it (see metrics::Shard);
// used on the worker's thread only.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "gateway/base/http_types.h"
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
  // `cluster` is "direct" for DIRECT routes. Once per request: a known
  // (cluster, protocol) allocates nothing, however long its name (a PAC
  // file's "HTTPS proxy.corp.example:8443").
  Route& route(std::string_view cluster, std::string_view protocol);
  void finished(std::string_view cluster, std::string_view protocol, bool connect, Result result);
  void errorReply(int status);

  metrics::Counter& connections;
  metrics::Gauge& connections_active;
  // Closed at accept: the client is in none of the listener's
  // source_prefix_ranges (reason="source_not_allowed"). Not in `connections`.
  metrics::Counter& refused_source;
  metrics::Counter& started_connect;
  metrics::Counter& started_forward;
  metrics::Gauge& active_connect;
  metrics::Gauge& active_forward;

 private:
  metrics::Shard& shard_;
  // Sets key_ to "cluster\0protocol", the maps' key, reusing its capacity.
  std::string_view keyOf(std::string_view cluster, std::string_view protocol);
  struct KeyHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view k) const { return std::hash<std::string_view>{}(k); }
  };
  template <class T>
  using ByKey = std::unordered_map<std::string, T, KeyHash, std::equal_to<>>;

  const std::string listener_;
  std::string key_;
  ByKey<std::unique_ptr<Route>> routes_;
  // requests_finished cells per (cluster, protocol), by kind and result:
  // resolved once, not per request.
  ByKey<std::array<metrics::Counter*, 2 * kResultCount>> finished_;
};

}  // namespace h2gate::downstream
