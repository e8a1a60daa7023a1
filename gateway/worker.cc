#include "gateway/worker.h"

#include "gateway/connection_id.h"
#include "gateway/log.h"

namespace h2gate {

Worker::Worker(uint32_t index) : index_(index), shard_(metrics::Registry::global().newShard()) {
  guard_.emplace(io_.get_executor());
}

Worker::~Worker() {
  stop();
}

void Worker::addListener(const downstream::ListenerContext& ctx, const asio::ip::tcp& protocol,
                         int fd) {
  downstream::ListenerStats* stats = nullptr;
  for (const auto& a : acceptors_)
    if (a->ctx == &ctx) stats = a->stats;  // the listener's other address
  if (!stats)
    stats =
        listener_stats_.emplace_back(std::make_unique<downstream::ListenerStats>(shard_, ctx.name))
            .get();
  auto a = std::unique_ptr<Acceptor>(
      new Acceptor{&ctx, stats, asio::ip::tcp::acceptor(io_), asio::steady_timer(io_)});
  a->acceptor.assign(protocol, fd);
  acceptors_.push_back(std::move(a));
}

void Worker::addCluster(const config::Cluster& cluster, std::shared_ptr<net::TlsContext> tls,
                        std::shared_ptr<upstream::ClusterHealth> health) {
  upstreams_[cluster.name] = std::make_shared<upstream::UpstreamPool>(
      io_, cluster, std::move(tls), index_, shard_, std::move(health));
}

void Worker::start() {
  for (auto& a : acceptors_) accept(*a);
  for (auto& [name, pool] : upstreams_) asio::post(io_, [p = pool] { p->preconnect(); });
  thread_ = std::thread([this] {
    H2G_LOG(Debug, 0, 0, "worker " << index_ << " running");
    io_.run();
  });
}

void Worker::accept(Acceptor& a) {
  a.acceptor.async_accept([this, &a](const asio::error_code& ec, asio::ip::tcp::socket socket) {
    if (draining_ || ec == asio::error::operation_aborted) return;
    if (ec) {
      // EMFILE and friends: back off instead of spinning.
      H2G_LOG(Warn, 0, 0, "accept on listener " << a.ctx->name << " failed: " << ec.message());
      a.retry.expires_after(std::chrono::milliseconds(100));
      a.retry.async_wait([this, &a](const asio::error_code& e) {
        if (!e && !draining_) accept(a);
      });
      return;
    }
    const uint64_t id = nextConnectionId();
    auto conn = std::make_shared<downstream::DownstreamConnection>(
        std::move(socket), *a.ctx, *a.stats, upstreams_, id,
        [this](uint64_t closed) { onConnectionClosed(closed); });
    conns_.emplace(id, conn);
    active_.store(conns_.size());
    conn->start();
    accept(a);
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

void Worker::onNetworkChange(config::Duration timeout) {
  asio::post(io_, [this, timeout] {
    for (auto& [name, pool] : upstreams_) pool->onNetworkChange(timeout);
  });
}

}  // namespace h2gate
