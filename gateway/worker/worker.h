// One worker: one thread, one event loop, the app connections it accepted.
// Workers share nothing but the read-only listener contexts; each accepts on
// its own duplicate of every listening socket. A reload (reconfigure())
// swaps listeners and pools on the worker's own thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <asio.hpp>

#include "gateway/downstream/downstream_connection.h"
#include "gateway/downstream/listener_context.h"
#include "gateway/downstream/listener_stats.h"
#include "gateway/metrics/registry.h"
#include "gateway/net/accept_backoff.h"
#include "gateway/net/owned_socket.h"
#include "gateway/upstream/pool.h"
#include "gateway/upstream/router.h"

namespace h2gate {

class Worker {
 public:
  explicit Worker(uint32_t index);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Before start(): a connection pool for this cluster, pre-connected when
  // the worker starts. The pool holds `cluster` until it is destroyed (its
  // connections refer to it); the Server frees the cluster once nothing else
  // holds it. `requests` is the cluster's max_requests count, shared by
  // every worker.
  void addCluster(std::shared_ptr<const config::Cluster> cluster,
                  std::shared_ptr<net::TlsContext> tls,
                  std::shared_ptr<upstream::ClusterHealth> health,
                  std::shared_ptr<net::ConnectionLimit> requests);
  // Before start(): accept on `socket` (a listening socket this worker now owns)
  // for listener `ctx`. `socket_id` names the socket across reloads (see
  // Reconfigure); the listener's other addresses share its ListenerStats.
  void addListener(std::shared_ptr<const downstream::ListenerContext> ctx, uint64_t socket_id,
                   const asio::ip::tcp& protocol, net::OwnedSocket socket);

  // When net::listenerPerWorker() is false (Windows): a connection the
  // Server accepted into this worker's event loop (io()) for listener
  // `ctx`. Any thread. Closed at once if the worker is draining.
  void adopt(asio::ip::tcp::socket socket, std::shared_ptr<const downstream::ListenerContext> ctx);
  asio::io_context& io() { return io_; }

  // A configuration reload, as one worker applies it.
  struct Reconfigure {
    // The complete set of sockets to accept on from now. With an fd: a new
    // listening socket this worker now owns (closed unused if the worker
    // is draining or gone); without: one it accepts on already (socket_id),
    // whose new connections get `ctx` from now. Sockets not listed stop
    // accepting; their open connections finish with the context they
    // started with.
    struct Socket {
      uint64_t socket_id = 0;
      std::shared_ptr<const downstream::ListenerContext> ctx;
      asio::ip::tcp protocol = asio::ip::tcp::v4();
      net::OwnedSocket fd;
    };
    // A new pool replacing (or adding) the one for cluster->name; it holds
    // `cluster` like addCluster's.
    struct Pool {
      std::shared_ptr<const config::Cluster> cluster;
      std::shared_ptr<net::TlsContext> tls;
      std::shared_ptr<upstream::ClusterHealth> health;
      std::shared_ptr<net::ConnectionLimit> requests;  // as addCluster's
    };
    std::vector<Socket> sockets;
    std::vector<Pool> pools;
    std::vector<std::string> removed_clusters;  // no new requests; open ones finish
  };
  // Thread-safe; applied on the worker's thread, in order with drain().
  // Replaced pools stop opening connections; tunnels and requests already
  // on them keep them (shared_ptr) until they end.
  void reconfigure(Reconfigure update);
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
  // After stop(), on the thread that owns the Worker: lets go of its app
  // connections and acceptors, and so of the listener contexts they hold,
  // while io_ still exists (see ~Server).
  void releaseContexts();
  size_t activeConnections() const { return active_.load(); }

 private:
  struct Acceptor {
    uint64_t socket_id;
    // Connections accepted here keep this context alive (see accept()).
    std::shared_ptr<const downstream::ListenerContext> ctx;
    downstream::ListenerStats* stats;
    asio::ip::tcp::acceptor acceptor;
    asio::steady_timer retry;
    net::AcceptBackoff backoff{};
  };
  // A pool that holds `cluster` as long as it exists.
  std::shared_ptr<upstream::UpstreamPool> newPool(std::shared_ptr<const config::Cluster> cluster,
                                                  std::shared_ptr<net::TlsContext> tls,
                                                  std::shared_ptr<upstream::ClusterHealth> health,
                                                  std::shared_ptr<net::ConnectionLimit> requests);
  // The listener's cells (one ListenerStats per listener name, kept for the
  // worker's life so connections of a removed listener can still count).
  downstream::ListenerStats& statsFor(const std::string& listener);
  void applyReconfigure(Reconfigure& update);
  // A pool no longer used for new requests: shut down (its h2 connections
  // close as their last streams end) and kept in retired_ until nothing
  // uses it and its connections are gone, so it is there to close them.
  void retire(std::shared_ptr<upstream::UpstreamPool> pool);
  void sweepRetired();
  // Pending accepts hold the Acceptor: one closed by a reload may still
  // complete with a connection.
  void accept(const std::shared_ptr<Acceptor>& a);
  // False when the client is in none of the listener's source ranges: the
  // socket is closed before any byte is read, counted and logged (at most
  // once per source address per net::RefusalLog::kInterval).
  bool admit(asio::ip::tcp::socket& socket, const downstream::ListenerContext& ctx,
             downstream::ListenerStats& stats);
  // An accepted app connection, on the worker's thread.
  void startConnection(asio::ip::tcp::socket socket,
                       const std::shared_ptr<const downstream::ListenerContext>& ctx,
                       downstream::ListenerStats& stats);
  void onConnectionClosed(uint64_t id);
  void checkIdle();

  // Destruction order matters: connections and acceptors (which hold sockets
  // registered with io_) are declared after io_, so they die before it.
  uint32_t index_;
  // This worker's metric cells; written only by its thread.
  metrics::Shard& shard_;
  // Before io_: app connections kept alive by pending handlers use them
  // until io_ is destroyed.
  std::unordered_map<std::string, std::unique_ptr<downstream::ListenerStats>> listener_stats_;
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard_;
  // Pools before connections: app connections refer to them.
  upstream::Upstreams upstreams_;
  // Routes requests over upstreams_ and direct connections.
  upstream::WorkerRouter router_{io_, upstreams_, shard_, index_};
  std::vector<std::shared_ptr<upstream::UpstreamPool>> retired_;
  asio::steady_timer retired_timer_{io_};
  std::vector<std::shared_ptr<Acceptor>> acceptors_;
  std::unordered_map<uint64_t, std::shared_ptr<downstream::DownstreamConnection>> conns_;
  std::atomic<size_t> active_{0};
  std::function<void()> on_idle_;
  bool draining_ = false;
  std::thread thread_;
};

}  // namespace h2gate
