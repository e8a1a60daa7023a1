// A worker's metric cells for one cluster and its endpoints, resolved once
// so the pool, its connections and streams touch them without a lookup.
// Built and used on the worker's thread only (see metrics::Shard).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gateway/base/http_types.h"
#include "gateway/metrics/registry.h"

namespace h2gate::upstream {

// Why an HTTP/1.1 connection to a proxy was closed instead of kept for the
// next request (h2gate_upstream_http1_connections_closed_total{reason}).
enum class Http1Close {
  Response,         // the response ended it: Connection: close, a close-delimited body, HTTP/1.0
  ErrorAnswer,      // an error status answered a request with a body: the proxy may not
                    // have read all of the body, so the next request could stick behind it
  Tunnel,           // it carried a CONNECT tunnel, which ends the connection
  Incomplete,       // the exchange ended before request and response both completed (the
                    // app went away, an error, a timeout, an authentication retry)
  ProxyClosedIdle,  // the proxy closed it (or sent stray bytes, or it failed) while idle
  IdleTimeout,      // unused for the cluster's idle_timeout
  MakeRoom,         // idle, closed for a tunnel when max_connections was reached
  NetworkChange,    // idle when the machine's network changed
  Shutdown,         // idle when the pool shut down (stop, reload)
};
std::string_view http1CloseName(Http1Close why);

struct ClusterStats {
  ClusterStats(metrics::Shard& shard, const std::string& cluster);
  metrics::Gauge& waiting;
  metrics::Counter& queue_timeouts;
  metrics::Counter& overflows;
  // Flow-control stalls, by direction (see H2Stream).
  metrics::Gauge& stalled_up;
  metrics::Gauge& stalled_down;
  metrics::Counter& stalled_ns_up;
  metrics::Counter& stalled_ns_down;
};

class EndpointStats {
 public:
  // Connections hold a shared_ptr to their endpoint's stats: they may
  // outlive the pool (pending handlers die with the worker's event loop).
  EndpointStats(metrics::Shard& shard, std::shared_ptr<const ClusterStats> cluster,
                const std::string& cluster_name, const std::string& endpoint, uint32_t worker);
  EndpointStats(const EndpointStats&) = delete;
  EndpointStats& operator=(const EndpointStats&) = delete;

  // A failed attempt, by stage: Result::DnsFailed / ConnectFailed /
  // ConnectTimeout, or `tls` for a failed handshake.
  void connectFailed(Result result, bool tls);
  // An HTTP/1.1 connection closed instead of kept (see Http1Close).
  void h1Closed(Http1Close why);

  // The per-connection gauges of one open connection, labelled by a slot
  // ("w<worker>c<n>", the lowest free n) so the label set stays bounded by
  // max_connections. Removed from the exposition when destroyed.
  class ConnectionGauges {
   public:
    explicit ConnectionGauges(EndpointStats& stats);
    ~ConnectionGauges();
    ConnectionGauges(const ConnectionGauges&) = delete;
    ConnectionGauges& operator=(const ConnectionGauges&) = delete;
    void pingRtt(std::chrono::nanoseconds rtt);
    void sendBuffer(int64_t bytes);

   private:
    EndpointStats& stats_;
    size_t slot_;
    metrics::Gauge& rtt_;
    metrics::Gauge& sndbuf_;
  };

  const std::shared_ptr<const ClusterStats> cluster;
  metrics::Gauge& h2_active;
  metrics::Gauge& h1_active;
  metrics::Counter& h2_opened;
  metrics::Counter& h1_opened;
  metrics::Histogram& connect_time;
  metrics::Histogram& tls_time;
  metrics::Gauge& streams;
  metrics::Counter& goaways;
  metrics::Histogram& ping_rtt;

 private:
  metrics::Shard& shard_;
  std::string cluster_name_;
  std::string endpoint_;
  uint32_t worker_;
  std::vector<bool> slots_;
};

// One stream's flow-control stall in one direction: counted in `stalled`
// while it lasts, its length added to `stalled_ns` when it ends.
class StallClock {
 public:
  void set(bool on, metrics::Gauge& stalled, metrics::Counter& stalled_ns);
  bool on() const { return on_; }

 private:
  bool on_ = false;
  std::chrono::steady_clock::time_point since_{};
};

// An endpoint's stats with their cluster's.
std::shared_ptr<EndpointStats> makeEndpointStats(metrics::Shard& shard, const std::string& cluster,
                                                 const std::string& endpoint, uint32_t worker);

// "host:port" as configured: the endpoint label.
std::string endpointLabel(const std::string& address, uint16_t port);

}  // namespace h2gate::upstream
