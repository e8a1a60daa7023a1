#include "gateway/downstream/listener_stats.h"

namespace h2gate::downstream {

using metrics::Family;

ListenerStats::ListenerStats(metrics::Shard& s, std::string listener)
    : connections(s.counter(Family::DownstreamConnections, {listener})),
      connections_active(s.gauge(Family::DownstreamConnectionsActive, {listener})),
      refused_source(
          s.counter(Family::DownstreamConnectionsRefused, {listener, "source_not_allowed"})),
      started_connect(s.counter(Family::RequestsStarted, {listener, "connect"})),
      started_forward(s.counter(Family::RequestsStarted, {listener, "forward"})),
      active_connect(s.gauge(Family::RequestsActive, {listener, "connect"})),
      active_forward(s.gauge(Family::RequestsActive, {listener, "forward"})),
      shard_(s),
      listener_(std::move(listener)) {}

std::string_view ListenerStats::keyOf(std::string_view cluster, std::string_view protocol) {
  key_.assign(cluster);
  key_ += '\0';
  key_ += protocol;
  return key_;
}

ListenerStats::Route& ListenerStats::route(std::string_view cluster, std::string_view protocol) {
  const std::string_view key = keyOf(cluster, protocol);
  auto it = routes_.find(key);
  if (it != routes_.end()) return *it->second;
  const std::string& l = listener_;
  auto r = std::unique_ptr<Route>(new Route{
      shard_.counter(Family::RelayedBytes, {l, cluster, protocol, "upstream"}),
      shard_.counter(Family::RelayedBytes, {l, cluster, protocol, "downstream"}),
      shard_.histogram(Family::TunnelSetupDuration, {l, cluster, protocol}),
      shard_.histogram(Family::TimeToFirstByte, {l, cluster, protocol, "connect"}),
      shard_.histogram(Family::TimeToFirstByte, {l, cluster, protocol, "forward"}),
  });
  return *routes_.emplace(std::string(key), std::move(r)).first->second;
}

void ListenerStats::finished(std::string_view cluster, std::string_view protocol, bool connect,
                             Result result) {
  const std::string_view key = keyOf(cluster, protocol);
  auto it = finished_.find(key);
  if (it == finished_.end()) it = finished_.try_emplace(std::string(key)).first;  // all null
  metrics::Counter*& cell = it->second[(connect ? kResultCount : 0) + static_cast<size_t>(result)];
  if (!cell)
    cell = &shard_.counter(
        Family::RequestsFinished,
        {listener_, cluster, protocol, connect ? "connect" : "forward", resultName(result)});
  cell->add();
}

void ListenerStats::errorReply(int status) {
  shard_.counter(Family::DownstreamErrors, {listener_, std::to_string(status)}).add();
}

}  // namespace h2gate::downstream
