#include "gateway/upstream/pool.h"

#include <algorithm>
#include <array>
#include <utility>

#include "config/dump.h"
#include "gateway/base/connection_id.h"
#include "gateway/base/log.h"
#include "gateway/net/socket_tuning.h"
#include "gateway/upstream/cluster_tunnel.h"

namespace h2gate::upstream {

UpstreamPool::UpstreamPool(asio::io_context& io, const config::Cluster& cluster,
                           std::shared_ptr<net::TlsContext> tls, uint32_t worker,
                           metrics::Shard& shard, std::shared_ptr<ClusterHealth> health,
                           std::shared_ptr<net::ConnectionLimit> requests)
    : io_(io),
      cluster_(cluster),
      tls_(std::move(tls)),
      worker_(worker),
      cluster_stats_(std::make_shared<ClusterStats>(shard, cluster.name)),
      health_(std::move(health)),
      requests_(std::move(requests)),
      idle_timer_(io),
      endpoint_alpn_(cluster.endpoints.size()) {
  backoff_.resize(cluster.endpoints.size());
  for (auto& b : backoff_) b.retry = std::make_unique<asio::steady_timer>(io);
  for (const auto& ep : cluster.endpoints)
    endpoint_stats_.push_back(std::make_shared<EndpointStats>(
        shard, cluster_stats_, cluster.name, endpointLabel(ep.address, ep.port_value), worker));
  if (auth::ProxyAuth::configured(cluster)) {
    auth_ = std::make_shared<auth::ProxyAuth>(cluster, io, shard, health_);
    // ProxyAuth lives in this pool and calls back on its thread.
    // Posted: it may come from inside an h2 connection's callback.
    auth_->onHttp1Required([this](size_t endpoint) {
      asio::post(io_, [weak = weak_from_this(), endpoint] {
        if (auto p = weak.lock()) p->requireHttp1(endpoint);
      });
    });
    for (size_t i = 0; i < cluster.endpoints.size(); ++i)
      if (auth_->http1Only(i)) endpoint_alpn_[i] = "http/1.1";
  }
}

void UpstreamPool::requireHttp1(size_t endpoint) {
  endpoint_alpn_[endpoint] = "http/1.1";
  closeIdleH2();
  dispatch();
}

bool UpstreamPool::knownHttp1() const {
  if (endpoint_alpn_.empty()) return false;
  const auto& alpn = endpoint_alpn_[next_endpoint_ % endpoint_alpn_.size()];
  return alpn && *alpn != "h2";
}

UpstreamPool::~UpstreamPool() {
  for (auto& c : connecting_) c->cancel();
  // Streams may keep connections alive a little longer than the pool.
  for (auto& e : h2_) e.conn->detachOwner();
  for (auto& idle : h1_idle_) closeIdleH1(idle, Http1Close::Shutdown);
}

config::Duration UpstreamPool::queueTimeout() const {
  // Long enough for a connect attempt and a handshake, bounded so an app
  // never hangs on a saturated pool.
  return std::max<config::Duration>(cluster_.connect_timeout * 2, std::chrono::seconds(10));
}

std::shared_ptr<Tunnel> UpstreamPool::newTunnel(uint64_t conn_id, uint64_t stream_id) {
  return std::make_shared<ClusterTunnel>(shared_from_this(), conn_id, stream_id);
}

void UpstreamPool::preconnect() {
  if (connectionCount() == 0) openConnection();
}

void UpstreamPool::shutdown() {
  shutting_down_ = true;
  for (auto& b : backoff_) b.retry->cancel();
  for (auto& idle : h1_idle_) closeIdleH1(idle, Http1Close::Shutdown);
  h1_idle_.clear();
  idle_timer_.cancel();
  closeIdleH2();
}

void UpstreamPool::closeIdleH2() {
  // close() calls back into onConnectionClosed, which edits h2_.
  std::vector<std::shared_ptr<H2Connection>> idle;
  for (const auto& e : h2_)
    if (e.conn->activeStreams() == 0 && (shutting_down_ || (auth_ && auth_->http1Only(e.endpoint))))
      idle.push_back(e.conn);
  for (auto& c : idle)
    c->close(shutting_down_ ? "no longer needed (shutting down or replaced by a reload)"
                            : "its proxy wants NTLM: HTTP/1.1 connections from now on",
             false);
}

void UpstreamPool::closeIdleH1(H1Idle& idle, Http1Close why) {
  if (!idle.transport) return;
  idle.transport->close();  // cancels its watch too
  idle.transport.reset();
  endpoint_stats_[idle.endpoint]->h1_active.sub();
  endpoint_stats_[idle.endpoint]->h1Closed(why);
}

void UpstreamPool::addIdleH1(size_t endpoint, std::unique_ptr<Transport> transport) {
  h1_idle_.push_back(
      H1Idle{endpoint, std::move(transport), next_idle_id_++, std::chrono::steady_clock::now()});
  watchIdleH1(h1_idle_.back());
  if (h1_idle_.size() == 1) armIdleTimer();  // else armed for an older one already
}

UpstreamPool::H1Idle UpstreamPool::takeIdleH1() {
  H1Idle idle = std::move(h1_idle_.back());
  h1_idle_.pop_back();
  // The watch's handler may still run (cancelled, or completed just
  // before): it finds idle.id gone and leaves the connection alone.
  asio::error_code ec;
  idle.transport->socket().cancel(ec);
  return idle;
}

void UpstreamPool::watchIdleH1(H1Idle& idle) {
  // A readiness wait, not a read: nothing is consumed (see pool.h).
  idle.transport->asyncWaitReadable(
      [weak = weak_from_this(), id = idle.id](const asio::error_code& ec) {
        if (auto p = weak.lock()) p->onIdleH1Readable(id, ec);
      });
}

void UpstreamPool::onIdleH1Readable(uint64_t id, const asio::error_code& ec) {
  if (ec == asio::error::operation_aborted) return;  // taken or closed
  auto it =
      std::find_if(h1_idle_.begin(), h1_idle_.end(), [id](const H1Idle& i) { return i.id == id; });
  if (it == h1_idle_.end()) return;  // taken for a request meanwhile: not ours to read
  std::string why;
  if (ec) {
    why = "failed while idle: " + ec.message();
  } else {
    // Nobody else reads this connection while it is idle.
    std::array<char, 512> buf;
    asio::error_code rec;
    const size_t n = it->transport->readAvailable(asio::buffer(buf), rec);
    if (rec == asio::error::would_block || rec == asio::error::try_again) {
      watchIdleH1(*it);  // e.g. a TLS session ticket: nothing for us; still fine
      return;
    }
    if (rec == asio::error::eof || rec == asio::ssl::error::stream_truncated)
      why = "closed by the proxy while idle";
    else if (rec)
      why = "failed while idle: " + rec.message();
    else
      why = "sent " + std::to_string(n) + " unexpected byte(s) while idle";
  }
  const auto& ep = cluster_.endpoints[it->endpoint];
  H2G_LOG(Debug, 0, 0,
          "cluster " << cluster_.name << ": idle HTTP/1.1 connection to proxy "
                     << endpointLabel(ep.address, ep.port_value) << " " << why
                     << ": closed and dropped from the pool");
  closeIdleH1(*it, Http1Close::ProxyClosedIdle);
  h1_idle_.erase(it);
}

void UpstreamPool::armIdleTimer() {
  if (h1_idle_.empty() || cluster_.idle_timeout.count() <= 0) return;
  // Durations near the largest are "never", not an overflow into the past.
  const auto since = h1_idle_.front().since;
  const auto left = std::chrono::steady_clock::time_point::max() - since;
  if (cluster_.idle_timeout >= left) return;
  idle_timer_.expires_at(since + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                     cluster_.idle_timeout));
  idle_timer_.async_wait([weak = weak_from_this()](const asio::error_code& ec) {
    if (ec) return;  // re-armed, shut down, or the pool is going
    if (auto p = weak.lock()) p->onIdleTimer();
  });
}

void UpstreamPool::onIdleTimer() {
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(h1_idle_, [&](H1Idle& idle) {
    if (now - idle.since < cluster_.idle_timeout) return false;
    const auto& ep = cluster_.endpoints[idle.endpoint];
    H2G_LOG(Debug, 0, 0,
            "cluster " << cluster_.name << ": HTTP/1.1 connection to proxy "
                       << endpointLabel(ep.address, ep.port_value) << " unused for "
                       << config::formatDuration(cluster_.idle_timeout)
                       << " (idle_timeout): closed");
    closeIdleH1(idle, Http1Close::IdleTimeout);
    return true;
  });
  armIdleTimer();
}

size_t UpstreamPool::connectionCount() const {
  return h2_.size() + connecting_.size() + h1_busy_ + h1_idle_.size();
}

std::shared_ptr<H2Connection> UpstreamPool::pickH2(std::optional<size_t> avoid, size_t* endpoint) {
  // The connection with room and the fewest streams; ties go to the earlier
  // endpoint, so a recovered primary proxy is used again.
  const H2Entry* best = nullptr;
  for (const auto& e : h2_) {
    if (avoid && e.endpoint == *avoid) continue;
    if (auth_ && auth_->http1Only(e.endpoint)) continue;  // wants NTLM (requireHttp1)
    if (!e.conn->acceptsStreams()) continue;
    if (e.conn->idleTooLong()) {
      e.conn->probe(cluster_.http2.connection_keepalive->timeout);
      continue;
    }
    if (!best || e.conn->activeStreams() < best->conn->activeStreams() ||
        (e.conn->activeStreams() == best->conn->activeStreams() && e.endpoint < best->endpoint))
      best = &e;
  }
  if (!best) return nullptr;
  if (endpoint) *endpoint = best->endpoint;
  return best->conn;
}

bool UpstreamPool::otherEndpointUp(size_t endpoint) const {
  for (size_t i = 0; i < backoff_.size(); ++i)
    if (i != endpoint && !backoff_[i].down) return true;
  return false;
}

bool UpstreamPool::connectAvoiding(size_t avoid) {
  for (const auto& c : connecting_)
    if (c->endpointIndex() != avoid) return true;
  if (connectionCount() >= cluster_.max_connections) return false;
  const size_t n = cluster_.endpoints.size();
  for (size_t k = 1; k < n; ++k) {
    const size_t index = (avoid + k) % n;
    if (!backoff_[index].down) return openConnection(index);
  }
  return false;
}

bool UpstreamPool::anyProbing() const {
  return std::any_of(h2_.begin(), h2_.end(), [](const H2Entry& e) { return e.conn->probing(); });
}

std::shared_ptr<net::ConnectionLimit> UpstreamPool::acquireRequest(uint64_t conn_id,
                                                                   uint64_t stream_id) {
  if (requests_->tryAcquire(cluster_.max_requests)) return requests_;
  if (const uint64_t n =
          requests_->noteRefusal(std::chrono::steady_clock::now(), kRefusalLogInterval))
    H2G_LOG(Warn, conn_id, stream_id,
            "cluster " << cluster_.name << " is at max_requests (" << cluster_.max_requests
                       << " requests and tunnels in progress): new ones get 503 (" << n
                       << " refused since the last report)");
  return nullptr;
}

std::string UpstreamPool::maxRequestsReason() const {
  return "too many requests in progress on upstream cluster '" + cluster_.name +
         "' (max_requests " + std::to_string(cluster_.max_requests) + "); try again later";
}

void UpstreamPool::enqueue(const std::shared_ptr<ClusterTunnel>& tunnel) {
  if (waiting_.size() >= kMaxWaiting) {
    cluster_stats_->overflows.add();
    tunnel->poolFailed(503, Result::ConnectFailed,
                       "too many requests waiting for cluster '" + cluster_.name + "'");
    return;
  }
  waiting_.push_back(tunnel);
  dispatch();
}

void UpstreamPool::attachH1(const std::shared_ptr<ClusterTunnel>& t, size_t endpoint,
                            std::unique_ptr<Transport> transport, std::string peer, bool reused) {
  ++h1_busy_;
  std::weak_ptr<UpstreamPool> weak = weak_from_this();
  t->attachH1(
      std::move(transport), std::move(peer), endpoint,
      [weak, endpoint](std::unique_ptr<Transport> tr, Http1Close why) {
        if (auto p = weak.lock()) p->onH1Released(endpoint, std::move(tr), why);
      },
      reused);
}

void UpstreamPool::dispatch() {
  size_t unserved = 0;  // waiting HTTP/1.1 requests that need a connection of their own
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    auto t = it->lock();
    if (!t || !t->waiting()) {
      it = waiting_.erase(it);
      continue;
    }
    size_t endpoint = 0;
    if (auto c = pickH2(t->avoid(), &endpoint)) {
      it = waiting_.erase(it);
      t->attachH2(c, endpoint);
      continue;
    }
    if (t->avoid() && !knownHttp1()) {
      // A retry kept off the proxy that answered 5xx: it waits for another
      // proxy's connection, or, with none to be had, takes any.
      if (!connectAvoiding(*t->avoid())) t->clearAvoid();
      if (t->avoid()) ++it;
      continue;
    }
    if (knownHttp1() && !t->wantsNewConnection() && !h1_idle_.empty()) {
      H1Idle idle = takeIdleH1();
      it = waiting_.erase(it);
      attachH1(t, idle.endpoint, std::move(idle.transport), "", /*reused=*/true);
      continue;
    }
    if (!knownHttp1()) break;  // h2 (or not known yet): the next connection serves all
    ++unserved;
    ++it;
  }
  if (waiting_.empty()) return;
  if (!knownHttp1()) {
    // A connection being confirmed by PING answers (or dies) within the
    // keepalive timeout: wait for that rather than opening another.
    if (connecting_.empty() && !anyProbing() && connectionCount() < cluster_.max_connections &&
        !openConnection(std::nullopt, /*probe=*/true))
      failWaiting(503, Result::ConnectFailed, allDownReason());
    return;
  }
  // HTTP/1.1: one connection per waiting request. Idle keep-alive
  // connections make room for CONNECTs when the breaker is reached.
  while (connecting_.size() < unserved) {
    if (connectionCount() >= cluster_.max_connections) {
      if (h1_idle_.empty()) break;
      closeIdleH1(h1_idle_.back(), Http1Close::MakeRoom);
      h1_idle_.pop_back();
    }
    if (!openConnection(std::nullopt, /*probe=*/true)) {
      // Every endpoint is down: the attempts in flight (probes, or their
      // back-off retries) decide; with none, nothing can serve them soon.
      if (!connecting_.empty()) break;
      failWaiting(503, Result::ConnectFailed, allDownReason());
      return;
    }
  }
}

std::optional<size_t> UpstreamPool::pickEndpoint(bool probe) {
  const size_t n = cluster_.endpoints.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t index = next_endpoint_++ % n;
    if (!backoff_[index].down) return index;
  }
  // None is up: one whose connection died but which no attempt has failed
  // yet may be fine (the path died); the attempt tells.
  for (size_t index = 0; index < n; ++index)
    if (!backoff_[index].verified) return index;
  if (!probe) return std::nullopt;
  // A request waits: rather than refusing it until a back-off ends, try the
  // down endpoint due first now, unless an attempt to it is in flight (a
  // probe for another request, or its back-off retry). The proxy may be
  // back already; a failed probe only postpones that endpoint's next turn.
  std::optional<size_t> best;
  for (size_t index = 0; index < n; ++index) {
    if (connectingTo(index)) continue;
    if (!best || backoff_[index].until < backoff_[*best].until) best = index;
  }
  return best;
}

bool UpstreamPool::connectingTo(size_t endpoint) const {
  return std::any_of(connecting_.begin(), connecting_.end(),
                     [endpoint](const auto& c) { return c->endpointIndex() == endpoint; });
}

bool UpstreamPool::openConnection(std::optional<size_t> endpoint, bool probe) {
  if (cluster_.endpoints.empty() || shutting_down_) return false;
  if (!endpoint) endpoint = pickEndpoint(probe);
  if (!endpoint) return false;
  const size_t index = *endpoint;
  const config::SocketAddress& ep = cluster_.endpoints[index];
  const uint64_t id = nextConnectionId();
  Backoff& b = backoff_[index];
  b.probing = probe && b.down && b.verified;
  if (b.probing)
    H2G_LOG(Debug, id, 0,
            "cluster "
                << cluster_.name << ": every proxy is down; a request waits: probing "
                << endpointLabel(ep.address, ep.port_value) << " now (back-off retry in "
                << std::chrono::duration<double>(b.until - std::chrono::steady_clock::now()).count()
                << "s)");
  H2G_LOG(Debug, id, 0,
          "connecting to proxy " << ep.address << ":" << ep.port_value << " (cluster "
                                 << cluster_.name << ", worker " << worker_ << ")");
  auto connector =
      std::make_shared<Connector>(io_, ep, tls_, cluster_.connect_timeout, id,
                                  net::tuningOf(cluster_.send_buffer, cluster_.tcp_notsent_lowat),
                                  cluster_.http2.connection_keepalive);
  connector->setEndpointIndex(index);
  if (auth_ && auth_->http1Only(index)) connector->setHttp1Only();
  connecting_.push_back(connector);
  std::weak_ptr<UpstreamPool> weak = weak_from_this();
  connector->start([weak, connector, index](ConnectOutcome outcome) {
    if (auto p = weak.lock()) p->onConnected(connector, index, std::move(outcome));
  });
  return true;
}

void UpstreamPool::markDown(size_t endpoint, const std::string& reason, bool verified) {
  Backoff& b = backoff_[endpoint];
  b.verified = verified;
  b.delay = b.down ? std::min<std::chrono::milliseconds>(b.delay * 2, kBackoffMax) : kBackoffMin;
  b.down = true;
  b.last_error = reason;
  b.until = std::chrono::steady_clock::now() + b.delay;
  health_->failed(endpoint, reason);
  H2G_LOG(Debug, 0, 0,
          "cluster " << cluster_.name << ": proxy "
                     << endpointLabel(cluster_.endpoints[endpoint].address,
                                      cluster_.endpoints[endpoint].port_value)
                     << " down; next attempt in " << std::chrono::duration<double>(b.delay).count()
                     << "s");
  // The background attempt: its outcome marks the endpoint up or down again.
  b.retry->expires_at(b.until);
  b.retry->async_wait([weak = weak_from_this(), endpoint](const asio::error_code& ec) {
    auto p = weak.lock();
    if (ec || !p || p->shutting_down_ || !p->backoff_[endpoint].down) return;
    if (p->connectingTo(endpoint)) return;  // a probe: its outcome re-arms this
    p->openConnection(endpoint);
  });
}

void UpstreamPool::markUp(size_t endpoint) {
  Backoff& b = backoff_[endpoint];
  b.down = false;
  b.delay = std::chrono::milliseconds(0);
  b.retry->cancel();
}

std::string UpstreamPool::allDownReason() const {
  std::string out = "all " + std::to_string(cluster_.endpoints.size()) + " upstream prox" +
                    (cluster_.endpoints.size() == 1 ? "y" : "ies") + " of cluster '" +
                    cluster_.name + "' are down";
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < backoff_.size(); ++i) {
    const auto& e = cluster_.endpoints[i];
    const auto left = std::chrono::duration<double>(backoff_[i].until - now).count();
    out += (i == 0 ? ": " : "; ") + endpointLabel(e.address, e.port_value) + " " +
           backoff_[i].last_error + " (retrying in " +
           std::to_string(static_cast<int>(std::max(0.0, left) + 0.999)) + "s)";
  }
  return out;
}

void UpstreamPool::ensureConnection(std::optional<size_t> prefer) {
  if (shutting_down_ || knownHttp1() || !connecting_.empty()) return;
  for (const auto& e : h2_)
    if (e.conn->acceptsStreams() || e.conn->probing()) return;
  if (connectionCount() >= cluster_.max_connections) return;
  if (prefer && backoff_[*prefer].down) prefer.reset();
  openConnection(prefer);  // when every endpoint is down, their back-off timers retry
}

void UpstreamPool::onConnected(const std::shared_ptr<Connector>& connector, size_t endpoint,
                               ConnectOutcome outcome) {
  std::erase(connecting_, connector);
  EndpointStats& stats = *endpoint_stats_[endpoint];
  if (outcome.connect_time.count() > 0) stats.connect_time.observe(outcome.connect_time);
  const bool probe = std::exchange(backoff_[endpoint].probing, false);
  if (!outcome.transport) {
    // A failed probe of an endpoint known down is not news (its fall was
    // logged, and probes come as often as requests do).
    if (probe)
      H2G_LOG(Debug, 0, 0, "cluster " << cluster_.name << ": probe failed: " << outcome.reason);
    else
      H2G_LOG(Warn, 0, 0, "cluster " << cluster_.name << ": " << outcome.reason);
    stats.connectFailed(outcome.result, outcome.tls_failed);
    markDown(endpoint, outcome.reason, /*verified=*/true);
    // A retry waiting for another proxy than the one it left takes what is
    // left now.
    if (!h2_.empty() && std::any_of(waiting_.begin(), waiting_.end(), [](const auto& w) {
          auto t = w.lock();
          return t && t->waiting() && t->avoid();
        })) {
      return dispatch();
    }
    if (waiting_.empty() || !h2_.empty() || !connecting_.empty()) return;
    // Waiting requests try the next endpoint that is not down (no new
    // probe: that would go round for as long as the proxies stay down);
    // with none left, nothing can serve them soon: fail them now with what
    // happened rather than letting them sit until their queue timeout. A
    // failed probe leaves every endpoint down: the 503 a request gets when
    // there is nothing to probe.
    if (!openConnection()) {
      if (probe)
        failWaiting(503, Result::ConnectFailed, allDownReason());
      else
        failWaiting(outcome.status, outcome.result, outcome.reason);
    }
    return;
  }
  if (tls_) stats.tls_time.observe(outcome.tls_time);
  const std::string alpn = outcome.alpn;
  markUp(endpoint);
  health_->connected(endpoint, alpn);
  std::optional<std::string>& known = endpoint_alpn_[endpoint];
  if (!known || *known != alpn)
    H2G_LOG(Info, 0, 0,
            "cluster " << cluster_.name << ": proxy " << outcome.peer << " negotiated "
                       << (alpn.empty() ? "no ALPN (HTTP/1.1)" : alpn));
  known = alpn;
  if (shutting_down_) {
    outcome.transport->close();
    return;
  }
  if (alpn == "h2") {
    auto conn =
        std::make_shared<H2Connection>(std::move(outcome.transport), cluster_, nextConnectionId(),
                                       outcome.peer, this, endpoint_stats_[endpoint]);
    if (std::string err = conn->start(); !err.empty()) {
      H2G_LOG(Warn, 0, 0, "cluster " << cluster_.name << ": " << err);
      return;
    }
    h2_.push_back(H2Entry{std::move(conn), endpoint});
    dispatch();
    return;
  }
  // HTTP/1.1: the connection goes to the first waiting request, or idles.
  stats.h1_opened.add();
  stats.h1_active.add();
  while (!waiting_.empty()) {
    auto t = waiting_.front().lock();
    waiting_.pop_front();
    if (!t || !t->waiting()) continue;
    attachH1(t, endpoint, std::move(outcome.transport), outcome.peer, /*reused=*/false);
    dispatch();
    return;
  }
  addIdleH1(endpoint, std::move(outcome.transport));
}

void UpstreamPool::onH1Released(size_t endpoint, std::unique_ptr<Transport> transport,
                                Http1Close why) {
  --h1_busy_;
  if (transport && !shutting_down_) {
    addIdleH1(endpoint, std::move(transport));
  } else {
    endpoint_stats_[endpoint]->h1_active.sub();
    endpoint_stats_[endpoint]->h1Closed(transport ? Http1Close::Shutdown : why);
  }
  asio::post(io_, [weak = weak_from_this()] {
    if (auto p = weak.lock()) p->dispatch();
  });
}

void UpstreamPool::failWaiting(int status, Result result, const std::string& reason) {
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& w : waiting)
    if (auto t = w.lock(); t && t->waiting()) t->poolFailed(status, result, reason);
}

void UpstreamPool::onCapacityChanged(H2Connection&) {
  // Called from inside nghttp2 callbacks: place waiting requests later. A
  // GOAWAY lands here too: the replacement opens before the old connection
  // has drained.
  asio::post(io_, [weak = weak_from_this()] {
    if (auto p = weak.lock()) {
      p->dispatch();
      p->ensureConnection();
      if (p->shutting_down_ || p->auth_) p->closeIdleH2();
    }
  });
}

void UpstreamPool::onConnectionClosed(H2Connection& conn, const std::string& reason, bool failed) {
  auto it =
      std::find_if(h2_.begin(), h2_.end(), [&](const H2Entry& e) { return e.conn.get() == &conn; });
  if (it == h2_.end()) return;
  // Lost while confirming itself after a network change: its path died,
  // not its proxy (see onNetworkChange()).
  if (auto probe = network_probes_.find(conn.id()); probe != network_probes_.end()) {
    if (std::chrono::steady_clock::now() <= probe->second) failed = false;
    network_probes_.erase(probe);
  }
  auto keep = it->conn;  // alive until this call returns
  // A connection that died (no PING answer, an error) takes its endpoint
  // down, so new requests go to another one at once. A plain close (EOF,
  // the end after a GOAWAY) is left to the next attempt to judge.
  if (failed && !shutting_down_)
    markDown(it->endpoint, reason, /*verified=*/false);
  else
    health_->lost(it->endpoint, reason);
  const size_t endpoint = it->endpoint;
  h2_.erase(it);
  asio::post(io_, [weak = weak_from_this(), keep, endpoint] {
    auto p = weak.lock();
    if (!p) return;
    p->dispatch();
    // Have a usable connection ready before the next request, to the same
    // proxy if it is not known down: that finds out whether it is still there.
    p->ensureConnection(endpoint);
  });
}

void UpstreamPool::onNetworkChange(config::Duration timeout) {
  const auto now = std::chrono::steady_clock::now();
  // The PING's own deadline is a moment later than ours: allow for that.
  const auto deadline = now + timeout + std::chrono::seconds(1);
  std::erase_if(network_probes_, [&](const auto& p) { return p.second < now; });
  // Copy: a probe may close its connection, which edits h2_.
  const std::vector<H2Entry> conns = h2_;
  for (const H2Entry& e : conns) {
    if (e.conn->closed()) continue;
    network_probes_[e.conn->id()] = deadline;
    e.conn->probe(timeout);
  }
  const size_t idle = h1_idle_.size();
  for (auto& i : h1_idle_) closeIdleH1(i, Http1Close::NetworkChange);
  h1_idle_.clear();
  // A proxy that was down may be reachable on the new network: its back-off
  // starts over (markUp cancels the retry timer and clears the delay), and
  // an attempt to it starts now, as its timer would have. Without that
  // attempt nothing would try it again while another endpoint serves, and
  // /clusters would go on calling it down after it came back.
  std::vector<size_t> revived;
  for (size_t i = 0; i < backoff_.size(); ++i) {
    if (!backoff_[i].down) continue;
    markUp(i);
    revived.push_back(i);
  }
  H2G_LOG(Debug, 0, 0,
          "cluster " << cluster_.name << " (worker " << worker_ << "): network change: "
                     << conns.size() << " h2 connection(s) to confirm within "
                     << std::chrono::duration<double>(timeout).count() << "s, " << idle
                     << " idle HTTP/1.1 connection(s) closed, " << revived.size()
                     << " endpoint(s) no longer considered down, tried again now");
  preconnect();
  for (size_t i : revived)
    if (!connectingTo(i)) openConnection(i);
}

}  // namespace h2gate::upstream
