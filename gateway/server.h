// The process: listeners bound once, workers, the admin endpoint, signals.
//
// The main thread runs its own event loop for signals and the admin
// listener; each worker runs one loop on its own thread. SIGTERM/SIGINT:
// stop accepting, let app connections finish up to drain_timeout, then cut
// them; a second signal cuts at once. run() returns the exit code.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <asio.hpp>

#include "config/config.h"
#include "gateway/admin.h"
#include "gateway/downstream/listener_context.h"
#include "gateway/net/tls_context.h"
#include "gateway/upstream/health.h"
#include "gateway/worker.h"

namespace h2gate {

class Server {
 public:
  explicit Server(config::Bootstrap bootstrap);
  ~Server();

  // Builds filters, binds listeners and the admin endpoint, starts workers.
  // Returns an error message (the process should exit 1) or "".
  std::string start();
  // Blocks until shutdown is complete. Returns the exit code.
  int run();

 private:
  std::string buildListeners();
  std::string bindListener(const config::Listener& l, downstream::ListenerContext& ctx,
                           const config::SocketAddress& addr, bool optional);
  void beginShutdown(int signal_number);
  void onWorkerIdle();
  std::string serverInfo() const;
  // The admin endpoints (server_admin.cc).
  Admin::Reply adminReply(std::string_view path) const;
  // 200-worthy, or why not in one line.
  std::pair<bool, std::string> readiness() const;
  std::string clustersText() const;
  // Families computed at scrape time: build info, readiness, endpoint
  // health, reloads, process figures.
  void appendMetrics(std::vector<prometheus::MetricFamily>& out) const;

  config::Bootstrap bootstrap_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::system_clock::time_point started_wall_;
  asio::io_context main_io_;
  asio::signal_set signals_;
  asio::steady_timer drain_timer_;
  std::unique_ptr<Admin> admin_;
  // Listener contexts are referenced by workers' connections: declared before
  // workers_ so they outlive them.
  std::vector<std::unique_ptr<downstream::ListenerContext>> listeners_;
  // One TLS context per cluster (by name), shared by the workers' pools.
  std::unordered_map<std::string, std::shared_ptr<net::TlsContext>> tls_;
  // Endpoint health per cluster (order as in bootstrap_.clusters), shared
  // with every worker's pool.
  std::vector<std::shared_ptr<upstream::ClusterHealth>> health_;
  size_t metrics_source_ = 0;  // in metrics::Registry::global()
  std::atomic<uint64_t> reloads_ok_{0};
  std::atomic<uint64_t> reloads_failed_{0};
  struct Bound {
    downstream::ListenerContext* ctx;
    asio::ip::tcp::acceptor acceptor;
  };
  std::vector<Bound> bound_;
  std::vector<std::unique_ptr<Worker>> workers_;
  size_t idle_workers_ = 0;
  std::atomic<bool> draining_{false};  // read by scrapes
};

}  // namespace h2gate
