// Every metric family h2gate exports, in one place: name, help, type and
// label names. Label values come only from bounded sets (config names,
// protocol, direction, result…), never from a destination, URL or client.
// deploy/prometheus/metric_names.txt lists the same names for the
// dashboards' tests.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string_view>

namespace h2gate::metrics {

enum class Type { Counter, Gauge, Histogram };

enum class Family {
  // Downstream: apps and their requests.
  DownstreamConnections,         // counter {listener}
  DownstreamConnectionsActive,   // gauge {listener}
  RequestsStarted,               // counter {listener, kind}
  RequestsFinished,              // counter {listener, cluster, protocol, kind, result}
  RequestsActive,                // gauge {listener, kind}
  DownstreamErrors,              // counter {listener, status}
  RelayedBytes,                  // counter {listener, cluster, protocol, direction}
  TunnelSetupDuration,           // histogram {listener, cluster, protocol}
  TimeToFirstByte,               // histogram {listener, cluster, protocol, kind}
  RouteFallbacks,                // counter {listener, cluster, fallback}
  DownstreamConnectionsRefused,  // counter {listener, reason}
  // Upstream: proxies, connections, streams.
  UpstreamConnectionsActive,     // gauge {cluster, endpoint, protocol}
  UpstreamConnectionsOpened,     // counter {cluster, endpoint, protocol}
  UpstreamHttp1Closed,           // counter {cluster, endpoint, reason}
  UpstreamConnectFailures,       // counter {cluster, endpoint, result}
  UpstreamConnectDuration,       // histogram {cluster, endpoint}
  UpstreamTlsHandshakeDuration,  // histogram {cluster, endpoint}
  UpstreamStreamsActive,         // gauge {cluster, endpoint}
  UpstreamStreamsStalled,        // gauge {cluster, direction}
  UpstreamStreamStalledTime,     // counter (ns, exported as seconds) {cluster, direction}
  UpstreamPoolWaiting,           // gauge {cluster}
  UpstreamPoolQueueTimeouts,     // counter {cluster}
  UpstreamPoolOverflows,         // counter {cluster}
  UpstreamGoaways,               // counter {cluster, endpoint}
  UpstreamPingRtt,               // histogram {cluster, endpoint}
  UpstreamConnectionPingRtt,     // gauge (ns, exported as seconds) {cluster, endpoint, connection}
  UpstreamConnectionSendBuffer,  // gauge {cluster, endpoint, connection}
  UpstreamAuth,                  // counter {cluster, scheme, result}
  Count_,
};

struct FamilyDef {
  std::string_view name;
  std::string_view help;
  Type type;
  std::initializer_list<std::string_view> labels;
  double scale = 1;  // exported value = stored value × scale (ns → s)
};

const FamilyDef& definition(Family f);
constexpr size_t kFamilyCount = static_cast<size_t>(Family::Count_);

}  // namespace h2gate::metrics
