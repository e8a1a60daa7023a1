// What a downstream connection needs from its listener: the filter chain and
// the limits. Built once per listener at start; shared read-only by workers.
// It is also the listener's AddressPolicy for direct mode: its filters
// judge each address a destination resolved to (Filter::checkAddress).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "filters/filter.h"
#include "gateway/http1/parser.h"
#include "gateway/net/connection_limit.h"
#include "gateway/net/send_buffer.h"
#include "gateway/net/source_ranges.h"
#include "gateway/upstream/router.h"

namespace h2gate::downstream {

struct ListenerContext final : upstream::AddressPolicy {
  // The filters' Filter::checkAddress, in chain order: the first refusal.
  std::optional<Refusal> checkAddress(const RequestHead& head, const StreamInfo& info,
                                      const net::IpAddress& ip) const override;
  // DIRECT for this listener's requests (see upstream::DirectOptions).
  upstream::DirectOptions direct() const { return {direct_connect_timeout, send_buffer, this}; }

  std::string name;
  std::vector<filters::FilterPtr> filters;  // the last one is terminal
  // Clients outside these ranges are closed at accept, before any byte is
  // read (Worker::admit). Config: source_prefix_ranges, --allow.
  net::SourceRanges sources;
  // The warnings about them, per source address; shared by the workers and
  // kept across reloads like open_connections.
  std::shared_ptr<net::RefusalLog> refusals = std::make_shared<net::RefusalLog>();
  http1::Limits limits;
  // Direct mode: one deadline for DNS and all connect attempts
  // (config: the listener's direct_connect_timeout).
  config::Duration direct_connect_timeout{std::chrono::seconds(10)};
  // Slowloris guard: a request head MUST be complete this long after its
  // first byte, or, for a connection's first request, after the connection
  // was accepted. On expiry a partial head gets 408 and the connection is
  // closed; a connection that sent nothing at all is closed without a reply
  // (an unused pre-connect is not an error). Bytes still trickling in do not
  // extend it. Config: the listener's request_headers_timeout.
  config::Duration request_headers_timeout{std::chrono::seconds(10)};
  // A keep-alive connection that sends nothing for this long between
  // requests is closed (no reply). Config: the listener's idle_timeout.
  config::Duration idle_timeout{std::chrono::seconds(60)};
  // A CONNECT tunnel with no byte in either direction for this long is
  // closed, both sides; counted as a normal end (result ok) with a reason.
  // Config: the listener's tunnel_idle_timeout (Envoy tcp_proxy idle_timeout).
  config::Duration tunnel_idle_timeout{std::chrono::hours(1)};
  // From handing a request to its tunnel until the response head arrives
  // (pool wait, TCP, TLS, the proxy's or origin's answer). While an
  // absolute-form request body is still going up, each chunk taken restarts
  // it. On expiry the app gets 504 and the tunnel is aborted.
  // Config: the listener's connect_response_timeout.
  config::Duration connect_response_timeout{std::chrono::seconds(60)};
  // An absolute-form request, from its head until its response is complete,
  // with no byte moving in either direction for this long (a request body
  // the app stops sending, a response body the origin stops sending, an
  // app that stops reading) is ended. Before a response head went to the
  // app: 408 when h2gate was waiting for the app's body, 504 when it was
  // waiting for the upstream; after: the app connection is reset (the
  // message cannot be completed). Counted as result stream_idle_timeout;
  // the upstream side is aborted. CONNECT tunnels have tunnel_idle_timeout
  // instead. Config: the listener's stream_idle_timeout (Envoy's name).
  config::Duration stream_idle_timeout{std::chrono::minutes(5)};
  // Open app connections of this listener, across all workers. Beyond it a
  // new connection gets 503 + Connection: close and is closed (accepting
  // goes on). Config: the listener's max_connections.
  uint32_t max_connections = 4096;
  // The count max_connections is checked against. Shared (not copied) by
  // every worker; each connection holds a reference until it is released,
  // so the counter outlives the context if need be.
  std::shared_ptr<net::ConnectionLimit> open_connections = std::make_shared<net::ConnectionLimit>();
  // A tunnel one side of which has finished (FIN / END_STREAM) is closed
  // when the other side stays silent this long (HAProxy's client-fin /
  // server-fin). Needed because proxies such as nghttpx do not pass an
  // END_STREAM on to the destination, so without it a tunnel whose app has
  // gone lives until the destination's own idle timeout, holding a stream.
  // Config: the listener's tunnel_half_close_timeout.
  config::Duration tunnel_half_close_timeout{std::chrono::seconds(1)};
  // Send-buffer tuning of app sockets (and, in direct mode, of the sockets
  // to destinations). Config: the listener's send_buffer / tcp_notsent_lowat.
  net::SendBufferConfig send_buffer;
  // The listener's PAC file (filters/served_pac.h), generated with the context.
  // Served at GET /proxy.pac on the admin listener and, when serve_pac
  // (forward_proxy's pac.serve_on_listener), as the answer to an origin-form
  // GET/HEAD /proxy.pac on this listener, which otherwise gets 400.
  std::string pac;
  bool serve_pac = false;
};

}  // namespace h2gate::downstream
