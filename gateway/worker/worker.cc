#include "gateway/worker/worker.h"

#include "gateway/base/connection_id.h"
#include "gateway/base/log.h"
#include "gateway/net/address.h"

namespace h2gate {

Worker::Worker(uint32_t index) : index_(index), shard_(metrics::Registry::global().newShard()) {
  guard_.emplace(io_.get_executor());
}

Worker::~Worker() {
  stop();
}

downstream::ListenerStats& Worker::statsFor(const std::string& listener) {
  auto& stats = listener_stats_[listener];
  if (!stats) stats = std::make_unique<downstream::ListenerStats>(shard_, listener);
  return *stats;
}

void Worker::addListener(std::shared_ptr<const downstream::ListenerContext> ctx, uint64_t socket_id,
                         const asio::ip::tcp& protocol, net::OwnedSocket socket) {
  downstream::ListenerStats& stats = statsFor(ctx->name);
  auto a = std::shared_ptr<Acceptor>(new Acceptor{
      socket_id, std::move(ctx), &stats, asio::ip::tcp::acceptor(io_), asio::steady_timer(io_)});
  asio::error_code ec;
  a->acceptor.assign(protocol, socket.get(), ec);
  if (ec) {
    H2G_LOG(Error, 0, 0,
            "worker " << index_ << ": cannot accept on a listening socket: " << ec.message());
    return;  // `socket` closes it
  }
  socket.release();
  acceptors_.push_back(std::move(a));
}

std::shared_ptr<upstream::UpstreamPool> Worker::newPool(
    std::shared_ptr<const config::Cluster> cluster, std::shared_ptr<net::TlsContext> tls,
    std::shared_ptr<upstream::ClusterHealth> health,
    std::shared_ptr<net::ConnectionLimit> requests) {
  auto* pool = new upstream::UpstreamPool(io_, *cluster, std::move(tls), index_, shard_,
                                          std::move(health), std::move(requests));
  return std::shared_ptr<upstream::UpstreamPool>(
      pool, [keep = std::move(cluster)](upstream::UpstreamPool* p) { delete p; });
}

void Worker::addCluster(std::shared_ptr<const config::Cluster> cluster,
                        std::shared_ptr<net::TlsContext> tls,
                        std::shared_ptr<upstream::ClusterHealth> health,
                        std::shared_ptr<net::ConnectionLimit> requests) {
  const std::string name = cluster->name;
  upstreams_[name] =
      newPool(std::move(cluster), std::move(tls), std::move(health), std::move(requests));
}

void Worker::start() {
  for (auto& a : acceptors_) accept(a);
  for (auto& [name, pool] : upstreams_) asio::post(io_, [p = pool] { p->preconnect(); });
  thread_ = std::thread([this] {
    H2G_LOG(Debug, 0, 0, "worker " << index_ << " running");
    io_.run();
  });
}

void Worker::reconfigure(Reconfigure update) {
  // The handler owns the update: if the loop never runs it, the fds close
  // when the io_context destroys it.
  asio::post(
      io_, [this, u = std::make_shared<Reconfigure>(std::move(update))] { applyReconfigure(*u); });
}

void Worker::applyReconfigure(Reconfigure& update) {
  // Pools first, so connections accepted below already see them. A
  // replaced pool stays alive through the tunnels that use it (each holds
  // a shared_ptr) and opens nothing new.
  for (const std::string& name : update.removed_clusters) {
    auto it = upstreams_.find(name);
    if (it == upstreams_.end()) continue;
    retire(std::move(it->second));
    upstreams_.erase(it);
  }
  for (Reconfigure::Pool& p : update.pools) {
    const std::string name = p.cluster->name;
    auto pool =
        newPool(std::move(p.cluster), std::move(p.tls), std::move(p.health), std::move(p.requests));
    auto& slot = upstreams_[name];
    if (slot) retire(std::move(slot));
    slot = pool;
    if (!draining_) pool->preconnect();
  }
  if (draining_) {
    H2G_LOG(Debug, 0, 0, "worker " << index_ << ": draining, new listening sockets not used");
    return;  // drain() closed every acceptor; the update's fds close with it
  }

  std::vector<std::shared_ptr<Acceptor>> next;
  std::vector<std::shared_ptr<Acceptor>> fresh;
  for (Reconfigure::Socket& s : update.sockets) {
    downstream::ListenerStats& stats = statsFor(s.ctx->name);
    if (!s.fd) {
      for (auto& a : acceptors_) {
        if (!a || a->socket_id != s.socket_id) continue;
        a->ctx = std::move(s.ctx);
        a->stats = &stats;
        next.push_back(std::move(a));
        break;
      }
      continue;
    }
    auto a = std::shared_ptr<Acceptor>(new Acceptor{s.socket_id, std::move(s.ctx), &stats,
                                                    asio::ip::tcp::acceptor(io_),
                                                    asio::steady_timer(io_)});
    asio::error_code ec;
    a->acceptor.assign(s.protocol, s.fd.get(), ec);
    if (ec) {
      H2G_LOG(Error, 0, 0,
              "worker " << index_ << ": cannot accept on a new socket of listener " << a->ctx->name
                        << ": " << ec.message());
      continue;  // s.fd still owns the descriptor and closes it
    }
    s.fd.release();
    next.push_back(a);
    fresh.push_back(std::move(a));
  }
  // What is left was not listed: stop accepting. A completed accept still
  // queued keeps its Acceptor alive and serves that one connection.
  for (auto& a : acceptors_) {
    if (!a) continue;
    asio::error_code ec;
    a->acceptor.close(ec);
    a->retry.cancel();
  }
  acceptors_ = std::move(next);
  for (auto& a : fresh) accept(a);
}

void Worker::retire(std::shared_ptr<upstream::UpstreamPool> pool) {
  pool->shutdown();
  retired_.push_back(std::move(pool));
  if (retired_.size() == 1) sweepRetired();
}

void Worker::sweepRetired() {
  std::erase_if(retired_, [](const std::shared_ptr<upstream::UpstreamPool>& p) {
    return p.use_count() == 1 && p->h2Connections() == 0;
  });
  if (retired_.empty()) return;
  retired_timer_.expires_after(std::chrono::seconds(1));
  retired_timer_.async_wait([this](const asio::error_code& ec) {
    if (!ec) sweepRetired();
  });
}

void Worker::accept(const std::shared_ptr<Acceptor>& a) {
  a->acceptor.async_accept([this, a](const asio::error_code& ec, asio::ip::tcp::socket socket) {
    if (draining_ || ec == asio::error::operation_aborted) return;
    if (ec) {
      if (!a->acceptor.is_open()) return;  // closed by a reload meanwhile
      // EMFILE and friends: back off instead of spinning (net/accept_backoff.h).
      uint64_t unlogged = 0;
      if (a->backoff.failed(std::chrono::steady_clock::now(), &unlogged))
        H2G_LOG(Warn, 0, 0,
                "worker " << index_ << ": accept on listener " << a->ctx->name
                          << " failed: " << ec.message() << "; retrying every "
                          << net::AcceptBackoff::kRetryDelay.count() << " ms"
                          << (unlogged ? " (" + std::to_string(unlogged) +
                                             " more failures since the last warning)"
                                       : std::string()));
      a->retry.expires_after(net::AcceptBackoff::kRetryDelay);
      a->retry.async_wait([this, a](const asio::error_code& e) {
        if (!e && !draining_ && a->acceptor.is_open()) accept(a);
      });
      return;
    }
    startConnection(std::move(socket), a->ctx, *a->stats);
    if (a->acceptor.is_open()) accept(a);
  });
}

bool Worker::admit(asio::ip::tcp::socket& socket, const downstream::ListenerContext& ctx,
                   downstream::ListenerStats& stats) {
  if (!ctx.sources.restricted()) return true;
  asio::error_code ec;
  const asio::ip::tcp::endpoint peer = socket.remote_endpoint(ec);
  if (!ec && ctx.sources.allows(peer.address())) return true;
  socket.close(ec);
  if (peer.address().is_unspecified()) return false;  // gone before it could be judged
  stats.refused_source.add();
  const net::RefusalLog::Verdict v =
      ctx.refusals->note(peer.address(), std::chrono::steady_clock::now());
  if (v.log) {
    std::string since;
    if (v.crowd)
      since = " (refused clients from more than " + std::to_string(net::RefusalLog::kMaxSources) +
              " addresses within " + std::to_string(net::RefusalLog::kInterval.count()) +
              " s: the others share this line; " + std::to_string(v.unlogged) +
              " refusals of theirs not logged since)";
    else if (v.unlogged != 0)
      since = " (" + std::to_string(v.unlogged) + " more from " + peer.address().to_string() +
              " since the last line)";
    H2G_LOG(Warn, 0, 0,
            "listener " << ctx.name << ": refused a connection from " << net::endpointText(peer)
                        << ": not in its source_prefix_ranges (" << ctx.sources.str() << ")"
                        << since);
  }
  return false;
}

void Worker::startConnection(asio::ip::tcp::socket socket,
                             const std::shared_ptr<const downstream::ListenerContext>& ctx,
                             downstream::ListenerStats& stats) {
  if (!admit(socket, *ctx, stats)) return;
  const uint64_t id = nextConnectionId();
  // The connection refers to its listener context by reference; the
  // deleter keeps the context (filters, limits) alive exactly as long as
  // the connection, whatever reloads happen meanwhile.
  auto conn = std::shared_ptr<downstream::DownstreamConnection>(
      new downstream::DownstreamConnection(std::move(socket), *ctx, stats, router_, id,
                                           [this](uint64_t closed) { onConnectionClosed(closed); }),
      [ctx](downstream::DownstreamConnection* c) { delete c; });
  conns_.emplace(id, conn);
  active_.store(conns_.size());
  conn->start();
}

void Worker::adopt(asio::ip::tcp::socket socket,
                   std::shared_ptr<const downstream::ListenerContext> ctx) {
  asio::post(io_, [this, s = std::move(socket), ctx = std::move(ctx)]() mutable {
    if (draining_) {
      asio::error_code ec;
      s.close(ec);
      return;
    }
    startConnection(std::move(s), ctx, statsFor(ctx->name));
  });
}

void Worker::onConnectionClosed(uint64_t id) {
  conns_.erase(id);
  active_.store(conns_.size());
  checkIdle();
}

void Worker::checkIdle() {
  if (draining_ && conns_.empty() && on_idle_) {
    auto cb = std::move(on_idle_);
    on_idle_ = nullptr;
    cb();
  }
}

void Worker::drain(std::function<void()> on_idle) {
  asio::post(io_, [this, on_idle = std::move(on_idle)]() mutable {
    draining_ = true;
    on_idle_ = std::move(on_idle);
    for (auto& a : acceptors_) {
      asio::error_code ec;
      a->acceptor.close(ec);
      a->retry.cancel();
    }
    for (auto& [name, pool] : upstreams_) pool->shutdown();
    router_.shutdown();
    // Copy: drain() may close connections, which edits conns_ (posted).
    auto conns = conns_;
    for (auto& [id, c] : conns) c->drain();
    checkIdle();
  });
}

void Worker::forceClose() {
  asio::post(io_, [this] {
    auto conns = conns_;
    for (auto& [id, c] : conns) c->forceClose();
  });
}

void Worker::stop() {
  if (!thread_.joinable()) return;
  guard_.reset();
  io_.stop();
  thread_.join();
}

void Worker::releaseContexts() {
  // Moved out first: a connection's end may call onConnectionClosed(), which
  // erases from conns_.
  auto conns = std::move(conns_);
  conns_.clear();
  conns.clear();
  auto acceptors = std::move(acceptors_);
  acceptors_.clear();
  acceptors.clear();
  active_.store(0);
}

void Worker::onNetworkChange(config::Duration timeout) {
  asio::post(io_, [this, timeout] {
    for (auto& [name, pool] : upstreams_) pool->onNetworkChange(timeout);
    router_.onNetworkChange(timeout);
  });
}

}  // namespace h2gate
