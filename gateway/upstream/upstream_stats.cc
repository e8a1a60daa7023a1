#include "gateway/upstream/upstream_stats.h"

namespace h2gate::upstream {

using metrics::Family;

ClusterStats::ClusterStats(metrics::Shard& s, const std::string& c)
    : waiting(s.gauge(Family::UpstreamPoolWaiting, {c})),
      queue_timeouts(s.counter(Family::UpstreamPoolQueueTimeouts, {c})),
      overflows(s.counter(Family::UpstreamPoolOverflows, {c})),
      stalled_up(s.gauge(Family::UpstreamStreamsStalled, {c, "upstream"})),
      stalled_down(s.gauge(Family::UpstreamStreamsStalled, {c, "downstream"})),
      stalled_ns_up(s.counter(Family::UpstreamStreamStalledTime, {c, "upstream"})),
      stalled_ns_down(s.counter(Family::UpstreamStreamStalledTime, {c, "downstream"})) {}

EndpointStats::EndpointStats(metrics::Shard& s, std::shared_ptr<const ClusterStats> cl,
                             const std::string& c, const std::string& e, uint32_t worker)
    : cluster(std::move(cl)),
      h2_active(s.gauge(Family::UpstreamConnectionsActive, {c, e, "h2"})),
      h1_active(s.gauge(Family::UpstreamConnectionsActive, {c, e, "http1"})),
      h2_opened(s.counter(Family::UpstreamConnectionsOpened, {c, e, "h2"})),
      h1_opened(s.counter(Family::UpstreamConnectionsOpened, {c, e, "http1"})),
      connect_time(s.histogram(Family::UpstreamConnectDuration, {c, e})),
      tls_time(s.histogram(Family::UpstreamTlsHandshakeDuration, {c, e})),
      streams(s.gauge(Family::UpstreamStreamsActive, {c, e})),
      goaways(s.counter(Family::UpstreamGoaways, {c, e})),
      ping_rtt(s.histogram(Family::UpstreamPingRtt, {c, e})),
      shard_(s),
      cluster_name_(c),
      endpoint_(e),
      worker_(worker) {}

void EndpointStats::connectFailed(Result result, bool tls) {
  std::string_view stage = tls ? "tls_failed" : resultName(result);
  shard_.counter(Family::UpstreamConnectFailures, {cluster_name_, endpoint_, stage}).add();
}

std::string_view http1CloseName(Http1Close why) {
  switch (why) {
    case Http1Close::Response:
      return "response";
    case Http1Close::ErrorAnswer:
      return "error_answer";
    case Http1Close::Tunnel:
      return "tunnel";
    case Http1Close::Incomplete:
      return "incomplete";
    case Http1Close::ProxyClosedIdle:
      return "proxy_closed_idle";
    case Http1Close::IdleTimeout:
      return "idle_timeout";
    case Http1Close::MakeRoom:
      return "make_room";
    case Http1Close::NetworkChange:
      return "network_change";
    case Http1Close::Shutdown:
      return "shutdown";
  }
  return "unknown";
}

void EndpointStats::h1Closed(Http1Close why) {
  shard_.counter(Family::UpstreamHttp1Closed, {cluster_name_, endpoint_, http1CloseName(why)})
      .add();
}

EndpointStats::ConnectionGauges::ConnectionGauges(EndpointStats& stats)
    : stats_(stats),
      slot_([&] {
        auto& s = stats.slots_;
        size_t i = 0;
        while (i < s.size() && s[i]) ++i;
        if (i == s.size()) s.push_back(false);
        s[i] = true;
        return i;
      }()),
      rtt_(stats.shard_.gauge(Family::UpstreamConnectionPingRtt,
                              {stats.cluster_name_, stats.endpoint_,
                               "w" + std::to_string(stats.worker_) + "c" + std::to_string(slot_)})),
      sndbuf_(
          stats.shard_.gauge(Family::UpstreamConnectionSendBuffer,
                             {stats.cluster_name_, stats.endpoint_,
                              "w" + std::to_string(stats.worker_) + "c" + std::to_string(slot_)})) {
  rtt_.clear();  // no round trip measured yet
  sndbuf_.clear();
}

EndpointStats::ConnectionGauges::~ConnectionGauges() {
  rtt_.clear();
  sndbuf_.clear();
  stats_.slots_[slot_] = false;
}

void EndpointStats::ConnectionGauges::pingRtt(std::chrono::nanoseconds rtt) {
  rtt_.set(rtt.count());
}

void EndpointStats::ConnectionGauges::sendBuffer(int64_t bytes) {
  sndbuf_.set(bytes);
}

void StallClock::set(bool on, metrics::Gauge& stalled, metrics::Counter& stalled_ns) {
  if (on == on_) return;
  on_ = on;
  const auto now = std::chrono::steady_clock::now();
  if (on) {
    since_ = now;
    stalled.add();
  } else {
    stalled.sub();
    stalled_ns.add(static_cast<uint64_t>((now - since_).count()));
  }
}

std::shared_ptr<EndpointStats> makeEndpointStats(metrics::Shard& shard, const std::string& cluster,
                                                 const std::string& endpoint, uint32_t worker) {
  return std::make_shared<EndpointStats>(shard, std::make_shared<ClusterStats>(shard, cluster),
                                         cluster, endpoint, worker);
}

std::string endpointLabel(const std::string& address, uint16_t port) {
  return (address.find(':') != std::string::npos ? "[" + address + "]" : address) + ":" +
         std::to_string(port);
}

}  // namespace h2gate::upstream
