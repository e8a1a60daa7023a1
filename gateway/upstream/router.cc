#include "gateway/upstream/router.h"

#include <charconv>

#include "gateway/base/log.h"
#include "gateway/metrics/registry.h"
#include "gateway/net/connection_limit.h"
#include "gateway/upstream/direct_tunnel.h"
#include "gateway/upstream/health.h"
#include "gateway/upstream/pending_tunnel.h"
#include "gateway/upstream/pool.h"
#include "gateway/upstream/upstream_stats.h"

namespace h2gate::upstream {
namespace {

// A request with somewhere to go when its route fails: the current route's
// tunnel inside, the app's callbacks outside. Every call passes straight
// through (no copy, no allocation per chunk) except a failure that allows a
// fallback: then the failed tunnel is dropped and the next route's opened
// in its place, from a posted handler (the failure may come from inside the
// failed tunnel's open()), with the request's end replayed. The app side
// sees none of it; its connect_response_timeout keeps running from the
// first try.
//
// Lifetime: owned by the app side (and by a posted fallback while one is
// pending). After abort() it calls nothing and opens nothing.
class FallbackTunnel final : public Tunnel,
                             public TunnelCallbacks,
                             public std::enable_shared_from_this<FallbackTunnel> {
 public:
  FallbackTunnel(WorkerRouter& router, std::shared_ptr<Tunnel> first, const DirectOptions& direct)
      : router_(router), inner_(std::move(first)), direct_(direct) {}

  // Tunnel
  void open(const RequestHead& head, StreamInfo& info, TunnelCallbacks& callbacks) override {
    head_ = &head;
    info_ = &info;
    callbacks_ = &callbacks;
    inner_->open(head, info, *this);
  }
  // A tunnel is always there: the app side sends a CONNECT's bytes after the
  // response head and a request body at once, and neither falls back.
  void send(std::string_view data, Done done) override { inner_->send(data, std::move(done)); }
  void endOfRequest() override {
    ended_ = true;
    if (inner_) inner_->endOfRequest();
  }
  void abort() override {
    callbacks_ = nullptr;
    if (std::shared_ptr<Tunnel> t = std::move(inner_)) t->abort();
  }

  // TunnelCallbacks: the current route's, passed on.
  void onResponseHead(ResponseHead head) override {
    started_ = true;
    callbacks_->onResponseHead(std::move(head));
  }
  void onResponseData(std::string_view data, Done done) override {
    callbacks_->onResponseData(data, std::move(done));
  }
  bool acceptsDataV() const override { return callbacks_ && callbacks_->acceptsDataV(); }
  void onResponseDataV(const std::string_view* pieces, size_t n, Done done) override {
    callbacks_->onResponseDataV(pieces, n, std::move(done));
  }
  void onResponseHeadV(ResponseHead head, const std::string_view* pieces, size_t n,
                       Done done) override {
    started_ = true;
    callbacks_->onResponseHeadV(std::move(head), pieces, n, std::move(done));
  }
  void onResponseEnd() override { callbacks_->onResponseEnd(); }
  void onFailed(int status, Result result, std::string reason) override {
    inner_.reset();  // it already aborted itself
    if (canFallBack(result)) return fallBack(status, std::move(reason));
    if (!tried_.empty())
      reason = tried_ + "; then " + WorkerRouter::routeName(info_->cluster) + ": " + reason;
    callbacks_->onFailed(status, result, std::move(reason));
  }
  void onReset(Result result, std::string reason) override {
    callbacks_->onReset(result, std::move(reason));
  }

 private:
  // Whether a failure of the current route may go on to the next one.
  bool canFallBack(Result result) const {
    if (info_->fallbacks.empty() || started_) return false;
    // Only what can be sent again exactly as it was: a tunnel (the app's
    // bytes wait on the app side until it opens) or a request without a
    // body.
    if (!head_->is_connect && head_->framing != BodyFraming::None) return false;
    // The request never reached a proxy that could have acted on it.
    return result == Result::ConnectFailed || result == Result::ConnectTimeout ||
           result == Result::DnsFailed;
  }

  void fallBack(int status, std::string reason) {
    std::string next = std::move(info_->fallbacks.front());
    info_->fallbacks.erase(info_->fallbacks.begin());
    H2G_LOG(Info, info_->connection_id, info_->stream_id,
            head_->method << " " << head_->target << ": " << WorkerRouter::routeName(info_->cluster)
                          << " failed (" << status << ", " << reason << "); falling back to "
                          << WorkerRouter::routeName(next));
    router_.countFallback(*info_, info_->cluster, next);
    tried_ +=
        (tried_.empty() ? "" : "; then ") + WorkerRouter::routeName(info_->cluster) + ": " + reason;
    info_->cluster = std::move(next);
    info_->protocol.clear();
    info_->upstream.clear();
    asio::post(router_.io(), [self = shared_from_this()] { self->openNext(); });
  }

  void openNext() {
    if (!callbacks_) return;  // aborted meanwhile
    inner_ = router_.open(info_->cluster, *info_, direct_);
    if (!inner_)
      return callbacks_->onFailed(502, Result::ConnectFailed,
                                  "no upstream cluster '" + info_->cluster + "'");
    inner_->open(*head_, *info_, *this);
    // The request's end, if the app side gave it to the route that failed.
    if (inner_ && ended_) inner_->endOfRequest();
  }

  WorkerRouter& router_;
  std::shared_ptr<Tunnel> inner_;  // null between a failure and the next route
  const DirectOptions direct_;
  const RequestHead* head_ = nullptr;
  StreamInfo* info_ = nullptr;
  TunnelCallbacks* callbacks_ = nullptr;  // null once aborted
  std::string tried_;                     // routes that failed, with why
  bool ended_ = false;                    // endOfRequest() came
  bool started_ = false;                  // a response head went to the app side
};

// A route that cannot be had: fails with ConnectFailed (posted: never
// inside open()), so a FallbackTunnel goes on to the next route.
class FailingTunnel final : public Tunnel, public std::enable_shared_from_this<FailingTunnel> {
 public:
  FailingTunnel(asio::io_context& io, std::string reason) : io_(io), reason_(std::move(reason)) {}
  void open(const RequestHead&, StreamInfo&, TunnelCallbacks& callbacks) override {
    callbacks_ = &callbacks;
    asio::post(io_, [self = shared_from_this()] {
      if (TunnelCallbacks* cb = std::exchange(self->callbacks_, nullptr))
        cb->onFailed(503, Result::ConnectFailed, self->reason_);
    });
  }
  void send(std::string_view, Done) override {}
  void endOfRequest() override {}
  void abort() override { callbacks_ = nullptr; }

 private:
  asio::io_context& io_;
  std::string reason_;
  TunnelCallbacks* callbacks_ = nullptr;
};

// A request whose route is decided when it opens (StreamInfo::route_decider):
// asks the decider, then opens what it answered through the router (with
// fallback across the answer's routes) and hands it what the app sent
// meanwhile (PendingTunnel). A refusal fails the request with the
// decider's status. Lifetime: owned by the app side and, while the decider
// has not answered, by the posted answer; after abort() the answer opens
// nothing.
class DecidingTunnel final : public PendingTunnel,
                             public std::enable_shared_from_this<DecidingTunnel> {
 public:
  DecidingTunnel(WorkerRouter& router, const DirectOptions& direct)
      : router_(router), direct_(direct) {}

  void open(const RequestHead& head, StreamInfo& info, TunnelCallbacks& callbacks) override {
    save(head, info, callbacks);
    std::shared_ptr<const RouteDecider> decider = info.route_decider;
    if (std::optional<RouteDecider::Decision> d = decider->decideNow(head, info)) {
      // Opened (or failed) inside open(), as a route the filters chose is:
      // the app side may drop this tunnel from a failure callback, so it
      // is held until the call returns.
      std::shared_ptr<DecidingTunnel> self = shared_from_this();
      return onDecision(std::move(*d));
    }
    decider->decide(
        head, info, router_.io().get_executor(),
        [self = shared_from_this()](RouteDecider::Decision d) { self->onDecision(std::move(d)); });
  }

 private:
  void onDecision(RouteDecider::Decision d) {
    if (!callbacks_) return;  // aborted meanwhile
    if (d.routes.empty())
      return fail(d.status, d.status == 503 ? Result::ConnectFailed : Result::Rejected,
                  std::move(d.reason));
    info_->cluster = std::move(d.routes.front());
    info_->fallbacks.assign(std::make_move_iterator(d.routes.begin() + 1),
                            std::make_move_iterator(d.routes.end()));
    std::string error;
    std::shared_ptr<Tunnel> t = router_.routeDecided(*info_, direct_, &error);
    if (!t) return fail(502, Result::ConnectFailed, std::move(error));
    attach(std::move(t));
  }

  WorkerRouter& router_;
  const DirectOptions direct_;
};

}  // namespace

bool parseProxyRoute(const std::string& route, bool* tls, std::string* host, uint16_t* port) {
  std::string_view r = route;
  if (r.starts_with("PROXY "))
    *tls = false;
  else if (r.starts_with("HTTPS "))
    *tls = true;
  else
    return false;
  r.remove_prefix(6);
  const size_t colon = r.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  std::string_view h = r.substr(0, colon);
  const std::string_view p = r.substr(colon + 1);
  unsigned value = 0;
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), value);
  if (ec != std::errc() || end != p.data() + p.size() || value == 0 || value > 65535) return false;
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.empty()) return false;
  *host = std::string(h);
  *port = static_cast<uint16_t>(value);
  return true;
}

WorkerRouter::WorkerRouter(asio::io_context& io, const Upstreams& upstreams, metrics::Shard& shard,
                           uint32_t worker)
    : io_(io), upstreams_(upstreams), shard_(shard), worker_(worker), sweep_timer_(io) {}

WorkerRouter::~WorkerRouter() = default;

std::shared_ptr<Tunnel> WorkerRouter::route(StreamInfo& info, const DirectOptions& direct,
                                            std::string* error) {
  if (info.route_decider) return std::make_shared<DecidingTunnel>(*this, direct);
  return routeDecided(info, direct, error);
}

std::shared_ptr<Tunnel> WorkerRouter::routeDecided(StreamInfo& info, const DirectOptions& direct,
                                                   std::string* error) {
  std::shared_ptr<Tunnel> first = open(info.cluster, info, direct);
  if (!first) {
    *error = "no upstream cluster '" + info.cluster + "'";
    return nullptr;
  }
  if (info.fallbacks.empty()) return first;
  return std::make_shared<FallbackTunnel>(*this, std::move(first), direct);
}

std::shared_ptr<Tunnel> WorkerRouter::open(const std::string& route, const StreamInfo& info,
                                           const DirectOptions& direct) {
  if (route.empty()) {
    return std::make_shared<DirectTunnel>(io_, direct.connect_timeout, info.connection_id,
                                          info.stream_id, direct.send_buffer, direct.policy);
  }
  auto pool = upstreams_.find(route);
  if (pool != upstreams_.end()) return pool->second->newTunnel(info.connection_id, info.stream_id);
  if (!info.route_decider) return nullptr;
  std::shared_ptr<const ProxyTemplate> tmpl = info.route_decider->proxies();
  if (!tmpl) return nullptr;
  if (std::shared_ptr<UpstreamPool> p = existingProxyPool(tmpl.get(), route))
    return p->newTunnel(info.connection_id, info.stream_id);
  // The proxy's first request on this worker.
  bool tls = false;
  std::string host;
  uint16_t port = 0;
  if (!parseProxyRoute(route, &tls, &host, &port)) return nullptr;
  if (tls && !tmpl->tls)
    return std::make_shared<FailingTunnel>(io_,
                                           "no TLS settings for " + route + ": " + tmpl->tls_error);
  std::string error;
  std::shared_ptr<UpstreamPool> p = proxyPool(tmpl, route, &error);
  if (!p) return std::make_shared<FailingTunnel>(io_, std::move(error));
  return p->newTunnel(info.connection_id, info.stream_id);
}

config::Cluster proxyCluster(const ProxyTemplate& tmpl, const std::string& route,
                             std::string* refused) {
  refused->clear();
  bool tls = false;
  std::string host;
  uint16_t port = 0;
  parseProxyRoute(route, &tls, &host, &port);
  config::Cluster cluster = tmpl.cluster;
  cluster.name = route;
  cluster.endpoints = {config::SocketAddress{host, port}};
  if (!tls) cluster.tls.reset();
  // Whoever serves the PAC file chose this proxy: the listener's
  // credentials and extra headers are not for it.
  cluster.receives_listener_headers = false;
  // Nor are the route's own proxy credentials, unless the operator allows
  // this proxy (may_authenticate logs a refusal).
  if (auth::ProxyAuth::configured(cluster) && tmpl.may_authenticate) {
    *refused = tmpl.may_authenticate(route, host);
    if (!refused->empty()) {
      cluster.authentication.reset();
      cluster.credentials.reset();
    }
  }
  return cluster;
}

void ProxyPoolList::add(uint32_t worker, const std::shared_ptr<ClusterHealth>& health) {
  std::lock_guard lock(mutex_);
  std::erase_if(entries_, [](const auto& e) { return e.second.expired(); });
  entries_.emplace_back(worker, health);
}

std::vector<ProxyPoolList::Entry> ProxyPoolList::list() const {
  std::lock_guard lock(mutex_);
  std::vector<Entry> out;
  for (const auto& [worker, weak] : entries_)
    if (std::shared_ptr<ClusterHealth> h = weak.lock()) out.push_back({worker, std::move(h)});
  return out;
}

std::shared_ptr<UpstreamPool> WorkerRouter::existingProxyPool(const ProxyTemplate* tmpl,
                                                              std::string_view route) {
  auto it = proxies_.find(ProxyKeyView{tmpl, route});
  if (it == proxies_.end()) return nullptr;
  if (it->second.auth_generation != tmpl->auth_generation.load(std::memory_order_relaxed)) {
    H2G_LOG(Info, 0, 0,
            "worker " << worker_ << ": closing proxy pool " << it->first.second
                      << ": the PAC file now comes from elsewhere, so whether it gets "
                         "credentials is decided again");
    retire(std::move(it->second.pool));
    proxies_.erase(it);
    return nullptr;
  }
  it->second.last_used = std::chrono::steady_clock::now();
  return it->second.pool;
}

std::shared_ptr<UpstreamPool> WorkerRouter::proxyPool(
    const std::shared_ptr<const ProxyTemplate>& tmpl, const std::string& route,
    std::string* error) {
  if (std::shared_ptr<UpstreamPool> p = existingProxyPool(tmpl.get(), route)) return p;
  const auto now = std::chrono::steady_clock::now();
  const ProxyKey key{tmpl.get(), route};
  if (shutting_down_) {
    *error = route + ": h2gate is shutting down";
    return nullptr;
  }
  if (proxies_.size() >= tmpl->max_proxies) {
    // Evict the least recently used pool no request holds.
    auto victim = proxies_.end();
    for (auto it = proxies_.begin(); it != proxies_.end(); ++it)
      if (it->second.pool.use_count() == 1 &&
          (victim == proxies_.end() || it->second.last_used < victim->second.last_used))
        victim = it;
    if (victim == proxies_.end()) {
      *error = route + ": too many proxies in use (" + std::to_string(proxies_.size()) +
               " PAC proxies with requests in progress on this worker, the limit)";
      return nullptr;
    }
    H2G_LOG(Info, 0, 0,
            "worker " << worker_ << ": closing proxy pool " << victim->first.second
                      << " (least recently used) to make room for " << route);
    retire(std::move(victim->second.pool));
    proxies_.erase(victim);
  }
  bool tls = false;
  std::string host;
  uint16_t port = 0;
  parseProxyRoute(route, &tls, &host, &port);
  // Read before the pool is made: a pool made now belongs to this generation.
  const uint64_t generation = tmpl->auth_generation.load(std::memory_order_relaxed);
  std::string why;
  auto cluster = std::make_shared<config::Cluster>(proxyCluster(*tmpl, route, &why));
  const bool refused = !why.empty();
  auto health =
      std::make_shared<ClusterHealth>(route, std::vector<std::string>{endpointLabel(host, port)});
  if (refused) health->setAuth(0, "none(authenticate_to)");
  auto* raw = new UpstreamPool(io_, *cluster, tls ? tmpl->tls : nullptr, worker_, shard_, health,
                               std::make_shared<net::ConnectionLimit>());
  std::shared_ptr<UpstreamPool> pool(raw, [keep = cluster](UpstreamPool* p) { delete p; });
  H2G_LOG(Info, 0, 0,
          "worker " << worker_ << ": new proxy pool " << route << " (named by a PAC file; "
                    << proxies_.size() + 1 << " now)");
  tmpl->pools->add(worker_, health);
  proxies_.emplace(key, ProxyPool{tmpl, pool, now, generation});
  armSweep();
  return pool;
}

void WorkerRouter::retire(std::shared_ptr<UpstreamPool> pool) {
  pool->shutdown();
  retired_.push_back(std::move(pool));
  armSweep();
}

void WorkerRouter::armSweep() {
  if (sweep_armed_) return;
  sweep_armed_ = true;
  sweep_timer_.expires_after(std::chrono::seconds(10));
  // Cancelled only by the router's destruction: then `this` is gone.
  sweep_timer_.async_wait([this](const asio::error_code& ec) {
    if (ec) return;
    sweep_armed_ = false;
    sweep();
  });
}

void WorkerRouter::sweep() {
  const auto now = std::chrono::steady_clock::now();
  for (auto it = proxies_.begin(); it != proxies_.end();) {
    // Requests in progress hold the pool (their tunnels); idle_timeout
    // counts from the last request that asked for it.
    if (it->second.pool.use_count() == 1 &&
        now - it->second.last_used >= it->second.tmpl->idle_timeout) {
      H2G_LOG(Info, 0, 0, "worker " << worker_ << ": closing idle proxy pool " << it->first.second);
      retire(std::move(it->second.pool));
      it = proxies_.erase(it);
    } else {
      ++it;
    }
  }
  std::erase_if(retired_, [](const std::shared_ptr<UpstreamPool>& p) {
    return p.use_count() == 1 && p->h2Connections() == 0;
  });
  if (!proxies_.empty() || !retired_.empty()) armSweep();
}

void WorkerRouter::onNetworkChange(config::Duration timeout) {
  for (auto& [key, p] : proxies_) p.pool->onNetworkChange(timeout);
}

void WorkerRouter::shutdown() {
  shutting_down_ = true;
  for (auto& [key, p] : proxies_) retire(std::move(p.pool));
  proxies_.clear();
}

std::string WorkerRouter::routeName(const std::string& route) {
  if (route.empty()) return "DIRECT";
  if (route.starts_with("PROXY ") || route.starts_with("HTTPS ")) return route;
  return "cluster '" + route + "'";
}

void WorkerRouter::countFallback(const StreamInfo& info, const std::string& from,
                                 const std::string& to) {
  shard_
      .counter(metrics::Family::RouteFallbacks,
               {info.listener_name, from.empty() ? "direct" : from, to.empty() ? "direct" : to})
      .add();
}

}  // namespace h2gate::upstream
