// The request/response heads and per-request bookkeeping shared by the
// downstream side, the tunnels and the filters.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/base/ascii.h"  // iequals, for comparing header names

namespace h2gate::upstream {
class RouteDecider;  // upstream/router.h
}  // namespace h2gate::upstream

namespace h2gate {

struct Header {
  std::string name;  // as received; compare case-insensitively
  std::string value;
};
using Headers = std::vector<Header>;

// First header with this name (case-insensitive), or nullptr.
const Header* findHeader(const Headers& headers, std::string_view name);

// "Basic base64(user:password)" (RFC 7617): a Proxy-Authorization value.
// The result is a secret: never log it.
std::string basicCredentials(std::string_view user, std::string_view password);

enum class BodyFraming { None, ContentLength, Chunked, UntilClose };

// Headers added to what h2gate sends to an upstream proxy (the CONNECT or
// the request), set up by the upstream_headers filter. Owned by the filter,
// which outlives every request of its listener. Looked up by the cluster
// that actually carries the request, so a fallback cluster gets its own.
struct UpstreamHeaders {
  Headers all;  // for every cluster
  // Per cluster: `all` with that cluster's own headers applied (same name:
  // the cluster's value).
  std::vector<std::pair<std::string, Headers>> by_cluster;
  const Headers& forCluster(std::string_view cluster) const {
    for (const auto& [name, headers] : by_cluster)
      if (name == cluster) return headers;
    return all;
  }
};

// An app's request as the proxy understood it.
struct RequestHead {
  std::string method;
  // As sent ("host:port" for CONNECT, the absolute URL otherwise), except
  // that an IP-literal host is rewritten in canonical form by
  // http1::parseTarget ("http://0x7f.1/" becomes "http://127.0.0.1/").
  std::string target;
  bool is_connect = false;
  std::string host;  // without IPv6 brackets; IP literals canonical
  uint16_t port = 0;
  std::string path;  // absolute-form only: path and query, at least "/"
  int http_minor = 1;
  Headers headers;
  BodyFraming framing = BodyFraming::None;
  uint64_t content_length = 0;
  bool keep_alive = true;

  // host:port, with brackets around IPv6 literals.
  std::string authority() const;
};

struct ResponseHead {
  int status = 0;
  std::string reason;
  int http_minor = 1;
  Headers headers;
  BodyFraming framing = BodyFraming::None;
  uint64_t content_length = 0;
  bool keep_alive = true;
};

// How a request ended, for logs and metrics (bounded set).
enum class Result {
  Ok,
  Rejected,    // a filter said no
  BadRequest,  // the app sent something we could not accept
  DnsFailed,
  ConnectFailed,  // refused, unreachable, reset during connect
  ConnectTimeout,
  UpstreamReset,    // upstream reset or broke mid-transfer
  DownstreamReset,  // the app went away mid-transfer
  Drained,          // cut by shutdown after the drain timeout
  // Nothing moved either way for the listener's stream_idle_timeout (a
  // stalled request or response body).
  StreamIdleTimeout,
};
inline constexpr size_t kResultCount = static_cast<size_t>(Result::StreamIdleTimeout) + 1;
std::string_view resultName(Result r);

// Why a request is refused before anything is sent for it (a filter's
// verdict on an address, see upstream::AddressPolicy): the status the app
// gets (403 for the acl, a reject route's own) and the body.
struct Refusal {
  int status = 403;
  std::string reason;
};

// Per request/tunnel bookkeeping. Filters read it on completion; the
// forward_proxy filter writes the route.
struct StreamInfo {
  uint64_t connection_id = 0;
  uint64_t stream_id = 0;  // index of the request on its app connection, from 1
  std::string listener_name;
  std::string client;  // "ip:port" of the app
  std::chrono::steady_clock::time_point start;
  std::chrono::system_clock::time_point start_wall;

  // Route chosen by the filter chain.
  std::string cluster;  // empty: direct
  // Where the request goes, in order, when no proxy of `cluster` can be
  // reached ("" = direct). The downstream side takes them one by one.
  std::vector<std::string> fallbacks;
  bool route_set = false;
  // Set by a filter whose route is decided per request after the filters
  // ran (a forward_proxy route with a PAC file): the router asks it when the
  // tunnel opens, and cluster/fallbacks are what it answered. Null: the
  // route is cluster/fallbacks as set. See upstream/router.h.
  std::shared_ptr<const upstream::RouteDecider> route_decider;
  // Set by upstream_headers (may stay null): added to the upstream request;
  // a header of the same name from the app is replaced. Values are secrets.
  const UpstreamHeaders* upstream_headers = nullptr;
  // Pass the app's own Proxy-Authorization on to the upstream proxy
  // (upstream_headers' forward_proxy_authorization); otherwise it is dropped.
  bool forward_proxy_authorization = false;
  // Extra header lines ("Name: value\r\n") for the reply when a filter
  // rejects the request (status set), e.g. a 407's Proxy-Authenticate.
  std::string reply_headers;

  int status = 0;           // status returned to the app (200 for an established tunnel)
  std::string reason;       // why it failed, for logs and error bodies
  uint64_t bytes_up = 0;    // app → upstream (request body / tunnel bytes)
  uint64_t bytes_down = 0;  // upstream → app
  std::string upstream;     // address actually connected to
  std::string protocol;     // "direct", "h2", "http1"
  Result result = Result::Ok;
};

}  // namespace h2gate
