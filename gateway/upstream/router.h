// Where a request goes, as the app side sees it: it hands the route the
// filters chose (StreamInfo::cluster, then StreamInfo::fallbacks) to a
// Router and gets one Tunnel (tunnel.h), without knowing whether that is an
// h2 stream, an HTTP/1.1 tunnel to a proxy or a direct connection, nor how
// many routes it tries before one carries the request.
//
// The downstream side includes this header and tunnel.h, nothing else of
// upstream/.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <asio.hpp>

#include "config/config.h"
#include "gateway/base/http_types.h"
#include "gateway/net/send_buffer.h"
#include "gateway/upstream/tunnel.h"

namespace h2gate::metrics {
class Shard;
}  // namespace h2gate::metrics

namespace h2gate::net {
struct IpAddress;
class TlsContext;
}  // namespace h2gate::net

namespace h2gate::upstream {

class UpstreamPool;
class ClusterHealth;
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

// The proxy pools made from one ProxyTemplate, in every worker, for
// /clusters (gateway/server/server_admin.cc). Thread-safe; it holds weak
// references: a pool that is gone drops out.
class ProxyPoolList {
 public:
  struct Entry {
    uint32_t worker = 0;
    std::shared_ptr<ClusterHealth> health;  // its name is the route ("PROXY host:port")
  };
  void add(uint32_t worker, const std::shared_ptr<ClusterHealth>& health);
  // The pools that still exist, in the order they were made.
  std::vector<Entry> list() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<uint32_t, std::weak_ptr<ClusterHealth>>> entries_;
};

// How to reach proxies that a route names but the config does not (a PAC
// file's "PROXY host:port" and "HTTPS host:port"): each such proxy becomes
// a pool of its own in every worker that needs it, created on first use,
// shared by every request naming it, closed when idle. One template per
// route decider; immutable, shared by all workers.
struct ProxyTemplate {
  // Settings of every proxy made from it: connect_timeout, http2,
  // max_connections, max_requests, idle_timeout, send_buffer... The name
  // and the endpoint are the proxy's ("PROXY host:port"); `tls` is used for
  // HTTPS proxies only (its sni empty: the proxy's host).
  config::Cluster cluster;
  // Built from cluster.tls; null when it could not be (HTTPS proxies then
  // fail with `tls_error`).
  std::shared_ptr<net::TlsContext> tls;
  std::string tls_error;
  // At most this many such proxies per worker (all templates together use
  // the largest); one more evicts the least recently used idle one, or,
  // when none is idle, the request goes on to its next route.
  size_t max_proxies = 64;
  // A proxy pool with no request for this long is closed.
  config::Duration idle_timeout{std::chrono::minutes(5)};
  // Whether a proxy may get cluster.authentication and cluster.credentials
  // (a PAC route's authenticate_to, filters/pac_routing_config.h): asked
  // with the proxy's route ("PROXY host:port") and host (no brackets) once,
  // when its pool is made on a worker, on that worker's thread. "" allows;
  // otherwise why not, and the pool sends that proxy no credentials at all
  // (/clusters shows auth=none(authenticate_to)). Null: every proxy may.
  // Not asked when the cluster has nothing to send.
  std::function<std::string(const std::string& route, const std::string& host)> may_authenticate;
  // Raised when may_authenticate's answers may have changed (the PAC file
  // now comes from elsewhere): a pool made before is closed when it is next
  // asked for, and a new one is made (and may_authenticate asked again).
  mutable std::atomic<uint64_t> auth_generation{0};
  // The pools made from this template, for /clusters.
  std::shared_ptr<ProxyPoolList> pools = std::make_shared<ProxyPoolList>();
};

// The route of a request decided after the filters ran, when its tunnel
// opens (a PAC file's FindProxyForURL; filters/pac_routing.h). Implemented
// above upstream/ so that upstream/ knows nothing of PAC files; set by a
// filter in StreamInfo::route_decider. Shared by all workers: thread-safe.
class RouteDecider {
 public:
  struct Decision {
    // In order, the first that works carries the request: "" DIRECT, a
    // configured cluster's name, "PROXY host:port" (a plain HTTP proxy),
    // "HTTPS host:port" (a TLS proxy; IPv6 hosts in brackets).
    std::vector<std::string> routes;
    // When `routes` is empty: the app gets this status with this reason.
    int status = 503;
    std::string reason;
  };
  virtual ~RouteDecider() = default;
  // Decides for one request. `done` is posted to `ex` exactly once (never
  // run inside the call), within a bound the decider keeps (its evaluation
  // timeout). `head` and `info` are valid only during the call.
  virtual void decide(const RequestHead& head, const StreamInfo& info, asio::any_io_executor ex,
                      std::function<void(Decision)> done) const = 0;
  // The decision at once, when the decider has it without waiting (a
  // cached answer), exactly as decide() would have posted it; nullopt: call
  // decide(). Called on the request's event loop before decide(), once per
  // request: never blocks, and costs little when it has no answer.
  virtual std::optional<Decision> decideNow(const RequestHead& head, const StreamInfo& info) const {
    (void)head;
    (void)info;
    return std::nullopt;
  }
  // For the proxies its decisions name that are not clusters.
  virtual std::shared_ptr<const ProxyTemplate> proxies() const = 0;
};

// "PROXY host:port" / "HTTPS host:port": the route names a proxy, not a
// cluster. Sets *tls, *host (no brackets) and *port.
bool parseProxyRoute(const std::string& route, bool* tls, std::string* host, uint16_t* port);

// The cluster of the proxy `route` ("PROXY host:port" or "HTTPS host:port",
// parseProxyRoute's) made from `tmpl`, as its pool has it: named `route`, its
// one endpoint, TLS for HTTPS only, no listener headers, and no credentials
// when may_authenticate refuses them (*refused then gets why; "" otherwise).
// `route` MUST parse. Used by WorkerRouter and by `h2gate check`.
config::Cluster proxyCluster(const ProxyTemplate& tmpl, const std::string& route,
                             std::string* refused);

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
  // With info.route_decider set, the route is decided when the tunnel
  // opens: the tunnel asks the decider, sets info.cluster and
  // info.fallbacks to its answer and goes on from there (holding what the
  // app sends meanwhile); the caller does not see the difference.
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
  // `worker`: the worker's index (for pools' metrics).
  WorkerRouter(asio::io_context& io, const Upstreams& upstreams, metrics::Shard& shard,
               uint32_t worker = 0);
  ~WorkerRouter();

  std::shared_ptr<Tunnel> route(StreamInfo& info, const DirectOptions& direct,
                                std::string* error) override;
  // route() once the route is known (info.route_decider answered or unset).
  std::shared_ptr<Tunnel> routeDecided(StreamInfo& info, const DirectOptions& direct,
                                       std::string* error);

  // One route, no fallback: "" is DIRECT, a cluster's name, or (with
  // info.route_decider) "PROXY host:port" / "HTTPS host:port" through a
  // pool created on demand. Null when there is no such cluster. A proxy
  // pool that cannot be had (too many) gives a tunnel that fails with
  // ConnectFailed, so the request goes on to its next route.
  std::shared_ptr<Tunnel> open(const std::string& route, const StreamInfo& info,
                               const DirectOptions& direct);
  // The network changed: as UpstreamPool::onNetworkChange for the proxy
  // pools made on demand (the worker does its clusters).
  void onNetworkChange(config::Duration timeout);
  // Draining: the proxy pools made on demand open nothing new.
  void shutdown();
  // Proxy pools made on demand that exist now (for tests and logs).
  size_t proxyPools() const { return proxies_.size(); }
  // "DIRECT" or "cluster 'name'", for logs and error replies.
  static std::string routeName(const std::string& route);
  // A request left route `from` for `to` (metric labels: "direct" for DIRECT).
  void countFallback(const StreamInfo& info, const std::string& from, const std::string& to);
  asio::io_context& io() { return io_; }

 private:
  struct ProxyPool {
    std::shared_ptr<const ProxyTemplate> tmpl;  // keeps the key's pointer valid
    std::shared_ptr<UpstreamPool> pool;
    std::chrono::steady_clock::time_point last_used;
    uint64_t auth_generation = 0;  // tmpl->auth_generation when it was made
  };
  using ProxyKey = std::pair<const ProxyTemplate*, std::string>;
  // Looks a ProxyKey up by (template, route) without copying the route.
  using ProxyKeyView = std::pair<const ProxyTemplate*, std::string_view>;
  struct ProxyKeyLess {
    using is_transparent = void;
    static ProxyKeyView view(const ProxyKey& k) { return {k.first, k.second}; }
    static ProxyKeyView view(const ProxyKeyView& k) { return k; }
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
      const ProxyKeyView x = view(a), y = view(b);
      if (x.first != y.first) return std::less<const ProxyTemplate*>{}(x.first, y.first);
      return x.second < y.second;
    }
  };
  // The pool for proxy `route` of `tmpl` if this worker has one (its
  // last_used now), or null (a pool of an older auth_generation is retired
  // then). Allocates nothing: once per request.
  std::shared_ptr<UpstreamPool> existingProxyPool(const ProxyTemplate* tmpl,
                                                  std::string_view route);
  // The pool for proxy `route` of `tmpl`, created if need be; null with
  // *error when the worker has max_proxies busy ones.
  std::shared_ptr<UpstreamPool> proxyPool(const std::shared_ptr<const ProxyTemplate>& tmpl,
                                          const std::string& route, std::string* error);
  // Shuts `pool` down and keeps it until its last connection is gone.
  void retire(std::shared_ptr<UpstreamPool> pool);
  // Every 10 s while there are proxy pools: retires the idle ones, drops
  // retired ones that are finished.
  void armSweep();
  void sweep();

  asio::io_context& io_;
  const Upstreams& upstreams_;
  metrics::Shard& shard_;
  uint32_t worker_;
  std::map<ProxyKey, ProxyPool, ProxyKeyLess> proxies_;
  std::vector<std::shared_ptr<UpstreamPool>> retired_;
  asio::steady_timer sweep_timer_;
  bool sweep_armed_ = false;
  bool shutting_down_ = false;
};

}  // namespace h2gate::upstream
