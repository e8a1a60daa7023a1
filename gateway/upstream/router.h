// Where a request goes, as the app side sees it: it hands the route the
// filters chose (StreamInfo::cluster, then StreamInfo::fallbacks) to a
// Router and gets one Tunnel (tunnel.h), without knowing whether that is an
// h2 stream, an HTTP/1.1 tunnel to a proxy or a direct connection, nor how
// many routes it tries before one carries the request.
//
// The downstream side includes this header and tunnel.h, nothing else of
// upstream/.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include <asio.hpp>

#include "config/config.h"
#include "gateway/http_types.h"
#include "gateway/net/send_buffer.h"
#include "gateway/upstream/tunnel.h"

namespace h2gate::metrics {
class Shard;
}  // namespace h2gate::metrics

namespace h2gate::net {
struct IpAddress;
}  // namespace h2gate::net

namespace h2gate::upstream {

class UpstreamPool;
// A worker's pools, by cluster name.
using Upstreams = std::unordered_map<std::string, std::shared_ptr<UpstreamPool>>;

// Direct mode's judge of addresses: asked about every address a destination
// name resolved to (or the IP literal it named; IPv4-mapped addresses
// already unmapped) before h2gate connects anywhere. A refusal of any
// address refuses the request. Implemented above upstream/ (the listener's
// filter chain: downstream/listener_context.h), so that upstream/ does not
// include filters/.
class AddressPolicy {
 public:
  virtual ~AddressPolicy() = default;
  virtual std::optional<Refusal> checkAddress(const RequestHead& head, const StreamInfo& info,
                                              const net::IpAddress& ip) const = 0;
};

// What DIRECT means for the listener a request came in on.
struct DirectOptions {
  // One deadline for DNS and all connect attempts.
  config::Duration connect_timeout{std::chrono::seconds(10)};
  // For the socket to the destination (uploads leave the machine there).
  net::SendBufferConfig send_buffer;
  // Null: every address is fine. MUST outlive the tunnels opened with it
  // (the listener context does: every app connection holds its own).
  const AddressPolicy* policy = nullptr;
};

class Router {
 public:
  virtual ~Router() = default;
  // A tunnel for the request's route: info.cluster (a cluster's name; empty
  // means DIRECT) and, when that cannot be reached, info.fallbacks in
  // order. Not opened yet: the caller opens it (Tunnel::open) with the same
  // `info`, and from then on sees one tunnel whatever route carries it. The
  // route's outcome goes into `info` (cluster, protocol, upstream) and its
  // failure, with every route tried, into TunnelCallbacks::onFailed.
  // Null, with *error set, when the first route names nothing this worker
  // has (the app gets 502).
  //
  // (A route that is decided later, say by evaluating a PAC file, or that
  // names a proxy not in the config, is a Router whose tunnel decides in
  // open() and opens the chosen route's tunnel then: the caller does not
  // change.)
  virtual std::shared_ptr<Tunnel> route(StreamInfo& info, const DirectOptions& direct,
                                        std::string* error) = 0;
};

// The routes a worker has: its pools (one per cluster) and direct
// connections. Owns fallback across routes: when the current route fails
// before the request reached a proxy that could have acted on it (connect
// failed or timed out, DNS failed) and the request can be sent again as it
// was (a tunnel not yet open, or a request without a body), the request
// goes on to the next route, logged and counted in
// h2gate_route_fallbacks_total; when the last fails, the app's error
// names every route tried and why.
class WorkerRouter final : public Router {
 public:
  // `upstreams` and `shard` are the worker's: they outlive the router, and
  // the router outlives every tunnel it made (the worker's connections).
  WorkerRouter(asio::io_context& io, const Upstreams& upstreams, metrics::Shard& shard);

  std::shared_ptr<Tunnel> route(StreamInfo& info, const DirectOptions& direct,
                                std::string* error) override;

  // One route, no fallback: "" is DIRECT, anything else a cluster's name.
  // Null when there is no such cluster.
  std::shared_ptr<Tunnel> open(const std::string& route, const StreamInfo& info,
                               const DirectOptions& direct);
  // "DIRECT" or "cluster 'name'", for logs and error replies.
  static std::string routeName(const std::string& route);
  // A request left route `from` for `to` (metric labels: "direct" for DIRECT).
  void countFallback(const StreamInfo& info, const std::string& from, const std::string& to);
  asio::io_context& io() { return io_; }

 private:
  asio::io_context& io_;
  const Upstreams& upstreams_;
  metrics::Shard& shard_;
};

}  // namespace h2gate::upstream
