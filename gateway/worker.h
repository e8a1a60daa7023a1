// One worker: one thread, one event loop, the app connections it accepted.
// Workers share nothing but the read-only listener contexts; each accepts on
// its own duplicate of every listening socket.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include <asio.hpp>

#include "gateway/downstream/downstream_connection.h"
#include "gateway/downstream/listener_context.h"
#include "gateway/downstream/listener_stats.h"
#include "gateway/metrics/registry.h"
#include "gateway/upstream/pool.h"

namespace h2gate {

class Worker {
 public:
  explicit Worker(uint32_t index);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Before start(): a connection pool for this cluster, pre-connected when
  // the worker starts.
  void addCluster(const config::Cluster& cluster, std::shared_ptr<net::TlsContext> tls,
                  std::shared_ptr<upstream::ClusterHealth> health);
  // Before start(): accept on `fd` (a listening socket this worker now owns).
  void addListener(const downstream::ListenerContext& ctx, const asio::ip::tcp& protocol, int fd);
  void start();
  // Thread-safe. Stop accepting, close idle app connections, let the rest
  // finish; `on_idle` runs (on the worker thread) once none is left.
  void drain(std::function<void()> on_idle);
  // Thread-safe. Cut every connection still open.
  void forceClose();
  // Thread-safe. The network changed: every pool confirms its upstream
  // connections (UpstreamPool::onNetworkChange) on the worker's thread.
  void onNetworkChange(config::Duration timeout);
  // Thread-safe. Ends the event loop and joins the thread.
  void stop();
  size_t activeConnections() const { return active_.load(); }

 private:
  struct Acceptor {
    const downstream::ListenerContext* ctx;
    downstream::ListenerStats* stats;
    asio::ip::tcp::acceptor acceptor;
    asio::steady_timer retry;
  };
  void accept(Acceptor& a);
  void onConnectionClosed(uint64_t id);
  void checkIdle();

  // Destruction order matters: connections and acceptors (which hold sockets
  // registered with io_) are declared after io_, so they die before it.
  uint32_t index_;
  // This worker's metric cells; written only by its thread.
  metrics::Shard& shard_;
  // Before io_: app connections kept alive by pending handlers use them
  // until io_ is destroyed.
  std::vector<std::unique_ptr<downstream::ListenerStats>> listener_stats_;
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard_;
  // Pools before connections: app connections refer to them.
  upstream::Upstreams upstreams_;
  std::vector<std::unique_ptr<Acceptor>> acceptors_;
  std::unordered_map<uint64_t, std::shared_ptr<downstream::DownstreamConnection>> conns_;
  std::atomic<size_t> active_{0};
  std::function<void()> on_idle_;
  bool draining_ = false;
  std::thread thread_;
};

}  // namespace h2gate
