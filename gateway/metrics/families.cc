#include "gateway/metrics/families.h"

#include <array>

namespace h2gate::metrics {
namespace {

constexpr double kNs = 1e-9;

// Order as in enum Family: definition() indexes this array by it
// (tests/unit/metrics/families_test.cc checks the names and two places).
const std::array<FamilyDef, kFamilyCount> kDefs{{
    {"h2gate_downstream_connections_total",
     "App connections accepted.",
     Type::Counter,
     {"listener"}},
    {"h2gate_downstream_connections_active", "App connections open.", Type::Gauge, {"listener"}},
    {"h2gate_requests_started_total",
     "Requests whose head was read: kind=connect are CONNECT tunnels, kind=forward "
     "absolute-form requests.",
     Type::Counter,
     {"listener", "kind"}},
    {"h2gate_requests_finished_total",
     "Requests and tunnels that ended, by how (result=ok when both directions completed).",
     Type::Counter,
     {"listener", "cluster", "protocol", "kind", "result"}},
    {"h2gate_requests_active",
     "Requests in progress; kind=connect are open tunnels.",
     Type::Gauge,
     {"listener", "kind"}},
    {"h2gate_downstream_errors_total",
     "Error replies h2gate sent to apps, by HTTP status.",
     Type::Counter,
     {"listener", "status"}},
    {"h2gate_relayed_bytes_total",
     "Payload bytes relayed: direction=upstream from apps towards the proxy or destination, "
     "direction=downstream back to apps.",
     Type::Counter,
     {"listener", "cluster", "protocol", "direction"}},
    {"h2gate_tunnel_setup_duration_seconds",
     "From an app's CONNECT to h2gate's 200 Connection established.",
     Type::Histogram,
     {"listener", "cluster", "protocol"}},
    {"h2gate_time_to_first_byte_seconds",
     "From a request head to the first byte of the response (or of the tunnel's downstream "
     "direction) written to the app.",
     Type::Histogram,
     {"listener", "cluster", "protocol", "kind"}},
    {"h2gate_route_fallbacks_total",
     "Requests that went on to the route's next cluster (fallback=direct: DIRECT) because no "
     "proxy of `cluster` could be reached.",
     Type::Counter,
     {"listener", "cluster", "fallback"}},
    {"h2gate_downstream_connections_refused_total",
     "App connections closed at accept, before any byte was read: reason=source_not_allowed, "
     "the client's address is in none of the listener's source_prefix_ranges (--allow).",
     Type::Counter,
     {"listener", "reason"}},
    {"h2gate_upstream_connections_active",
     "Connections open to upstream proxies, by negotiated protocol.",
     Type::Gauge,
     {"cluster", "endpoint", "protocol"}},
    {"h2gate_upstream_connections_opened_total",
     "Connections opened to upstream proxies, by what ALPN gave (h2 or http1).",
     Type::Counter,
     {"cluster", "endpoint", "protocol"}},
    {"h2gate_upstream_http1_connections_closed_total",
     "HTTP/1.1 connections to upstream proxies that h2gate closed or lost instead of keeping "
     "them for the next request, by why (upstream/upstream_stats.h Http1Close).",
     Type::Counter,
     {"cluster", "endpoint", "reason"}},
    {"h2gate_upstream_connect_failures_total",
     "Failed connection attempts to upstream proxies, by stage.",
     Type::Counter,
     {"cluster", "endpoint", "result"}},
    {"h2gate_upstream_connect_duration_seconds",
     "DNS lookup and TCP connect to a proxy.",
     Type::Histogram,
     {"cluster", "endpoint"}},
    {"h2gate_upstream_tls_handshake_duration_seconds",
     "TLS handshakes with a proxy.",
     Type::Histogram,
     {"cluster", "endpoint"}},
    {"h2gate_upstream_streams_active",
     "HTTP/2 streams open to upstream proxies.",
     Type::Gauge,
     {"cluster", "endpoint"}},
    {"h2gate_upstream_streams_stalled",
     "HTTP/2 streams blocked by flow control now: direction=upstream waits for the proxy's "
     "window, direction=downstream for a slow app (h2gate holds the window back).",
     Type::Gauge,
     {"cluster", "direction"}},
    {"h2gate_upstream_stream_stalled_seconds_total",
     "Time HTTP/2 streams spent blocked by flow control.",
     Type::Counter,
     {"cluster", "direction"},
     kNs},
    {"h2gate_upstream_pool_waiting",
     "Requests waiting for a connection to a cluster (max_connections reached or connecting).",
     Type::Gauge,
     {"cluster"}},
    {"h2gate_upstream_pool_queue_timeouts_total",
     "Requests that got 503 because no connection became available in time.",
     Type::Counter,
     {"cluster"}},
    {"h2gate_upstream_pool_overflows_total",
     "Requests refused at once with 503: too many were already waiting for a connection, or "
     "the cluster's max_requests were in progress.",
     Type::Counter,
     {"cluster"}},
    {"h2gate_upstream_goaways_total",
     "GOAWAY frames received from upstream proxies.",
     Type::Counter,
     {"cluster", "endpoint"}},
    {"h2gate_upstream_ping_rtt_seconds",
     "HTTP/2 PING round trips to upstream proxies.",
     Type::Histogram,
     {"cluster", "endpoint"}},
    {"h2gate_upstream_connection_ping_rtt_seconds",
     "Last HTTP/2 PING round trip of each open upstream connection.",
     Type::Gauge,
     {"cluster", "endpoint", "connection"},
     kNs},
    {"h2gate_upstream_connection_send_buffer_bytes",
     "Socket send buffer (SO_SNDBUF) of each open upstream connection.",
     Type::Gauge,
     {"cluster", "endpoint", "connection"}},
    {"h2gate_upstream_auth_total",
     "Authentications to upstream proxies, by scheme (basic, negotiate, ntlm) and result: "
     "success (the proxy accepted), rejected (it answered 407 to our credentials), failed "
     "(h2gate could not make credentials: no Kerberos ticket, an expired one, an unknown "
     "service principal...), mutual_failed (the proxy's Kerberos answer did not verify).",
     Type::Counter,
     {"cluster", "scheme", "result"}},
}};

}  // namespace

const FamilyDef& definition(Family f) {
  return kDefs[static_cast<size_t>(f)];
}

}  // namespace h2gate::metrics
