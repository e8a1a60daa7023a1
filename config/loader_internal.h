// Private to the loader (config/loader.cc, config/cluster_loader.cc): the
// per-section parsers. Each records every problem it finds in the reader's
// Diagnostics and returns what it could read, so later sections are still
// checked and the Bootstrap's lists stay index-aligned with the YAML.
#pragma once

#include <optional>

#include "config/config.h"
#include "config/node_reader.h"

namespace h2gate::config::detail {

enum class AddressKind {
  Bind,      // listener/admin: an IP literal, port 0..65535 (0: ephemeral)
  Endpoint,  // upstream proxy: host name or IP, port 1..65535
};

// An Envoy Address: {socket_address: {address: ..., port_value: ...}}.
std::optional<SocketAddress> parseAddress(NodeReader& address, AddressKind kind);
Listener parseListener(NodeReader& listener);
// `send_buffer: {mode, bytes}` and `tcp_notsent_lowat` of a listener or cluster.
void parseSocketTuning(NodeReader& r, SendBuffer& send_buffer, uint32_t& notsent_lowat);
Cluster parseCluster(NodeReader& cluster);

// Type URLs accepted in "@type" (optional) at the places that take one.
inline constexpr const char* kTlsTransportSocket = "envoy.transport_sockets.tls";
inline constexpr const char* kUpstreamTlsContextType =
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext";
inline constexpr const char* kHttpProtocolOptionsKey =
    "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";
inline constexpr const char* kHttpProtocolOptionsType =
    "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

}  // namespace h2gate::config::detail
