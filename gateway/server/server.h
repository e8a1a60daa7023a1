// The process: listeners bound once, workers, the admin endpoint, signals.
//
// The main thread runs its own event loop for signals and the admin
// listener; each worker runs one loop on its own thread. SIGTERM/SIGINT:
// stop accepting, let app connections finish up to drain_timeout, then cut
// them; a second signal cuts at once. run() returns the exit code.
//
// Reload (SIGHUP, POST /reload): the Reloader builds the configuration again
// (same file, same flags) on the config thread, so the admin endpoint
// (/healthz) keeps answering while a big file is parsed. A new config is
// staged completely (filters, TLS contexts, listening sockets) before
// anything changes, so an invalid one is rejected as a whole and the running
// one stays. A valid one takes effect for new app connections and requests;
// each worker swaps listeners and pools on its own thread, and what is open
// keeps what it started with. A reload asked for while one runs waits for it
// and then reads the file again (several such waiters share that one).
//
// Memory of a replaced configuration: listener contexts (filters) and the
// clusters given to pools are kept alive by what uses them (connections,
// pools); the Server keeps a reference too, checks every second which ones
// nothing else holds any more, and frees those on the config thread (a big
// acl takes a while to free), so neither the main thread nor a worker
// stalls.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include <asio.hpp>

#include "config/config.h"
#include "config/loader.h"
#include "filters/served_pac.h"
#include "gateway/downstream/listener_context.h"
#include "gateway/net/network_monitor.h"
#include "gateway/net/tls_context.h"
#include "gateway/server/admin.h"
#include "gateway/server/own_addresses.h"
#include "gateway/server/server_signals.h"
#include "gateway/upstream/health.h"
#include "gateway/worker/worker.h"

namespace h2gate::filters {
class PacRoute;
}  // namespace h2gate::filters

namespace h2gate {

class Server {
 public:
  // Builds the configuration again for a reload; empty when there is no
  // file to re-read (flags only, the built-in default).
  // Runs on the config thread.
  using Reloader = std::function<config::LoadResult()>;
  explicit Server(config::Bootstrap bootstrap, Reloader reloader = nullptr);
  ~Server();

  // Builds filters, binds listeners and the admin endpoint, starts workers.
  // Returns an error message (the process should exit 1) or "".
  std::string start();
  // Blocks until shutdown is complete. Returns the exit code.
  int run();

 private:
  // One listening socket, owned by the main thread; each worker accepts on
  // its own dup() of it.
  struct Bound {
    uint64_t id;      // names the socket to the workers across reloads
    std::string key;  // reload::addressKey() of the configured address
    size_t listener;  // index in the current config's listeners (and listeners_)
    asio::ip::tcp::acceptor acceptor;
  };
  using ListenerContexts = std::vector<std::shared_ptr<const downstream::ListenerContext>>;
  // A loaded configuration made ready off the main thread (prepare()): its
  // filters built (gateway/server/load_config.h) and their YAML dropped, each
  // listener's PAC rules collected (all but the proxy address, which needs
  // the bound port).
  struct Prepared {
    std::shared_ptr<config::Bootstrap> bootstrap;
    std::vector<filters::PacBuilder> pacs;  // index as in bootstrap->listeners
    std::vector<config::Problem> problems;  // not empty: rejected
  };
  static Prepared prepare(config::LoadResult loaded);
  // Once the contexts hold the filters: the Bootstrap stays plain data.
  static void releaseFilters(config::Bootstrap& b);
  // One context per listener of `p` (filters init()ed, PAC file made, the
  // own-address filter added). `ports[i]` is the port listener i is bound
  // to (its configured one, or the one the OS chose for port 0); `own` the
  // sockets the new configuration will have. Returns an error message or "".
  std::string buildListeners(const Prepared& p, const std::vector<uint16_t>& ports,
                             const std::shared_ptr<const OwnAddresses>& own, ListenerContexts& out);
  // A listening socket of the configuration being built, and its listener.
  struct OwnSocket {
    asio::ip::tcp::endpoint endpoint;
    std::string listener;
  };
  // `sockets` and the admin endpoint.
  std::shared_ptr<const OwnAddresses> ownAddresses(const std::vector<OwnSocket>& sockets) const;
  // Binds and listens (not yet accepting). An optional address that cannot
  // be bound is skipped (nullopt and no error); otherwise *error is set.
  std::optional<Bound> bindListener(const config::Listener& l, size_t index,
                                    const config::SocketAddress& addr, bool optional,
                                    std::string* error);
  void logListening(const Bound& b, const config::Listener& l);
  // The cluster's TLS context; null without TLS, or null with *error set.
  std::shared_ptr<net::TlsContext> buildTls(const config::Cluster& c, std::string* error);
  void logCluster(const config::Cluster& c);
  struct ReloadOutcome {
    int status;           // as POST /reload answers: 200, 400, 409, 503
    std::string message;  // one line on success; the errors otherwise
  };
  using ReloadDone = std::function<void(const ReloadOutcome&)>;
  // Main thread only. `trigger` ("SIGHUP", "POST /reload") is for the log;
  // `done` (may be null) gets the outcome, on the main thread, once the
  // reload that read the file after this call is over.
  void requestReload(std::string trigger, ReloadDone done);
  struct Waiter {
    std::string trigger;
    ReloadDone done;
  };
  void startReload(std::vector<Waiter> waiters);
  // On the main thread, with what the config thread prepared.
  void finishReload(Prepared next);
  ReloadOutcome applyReload(Prepared& next);
  // Keeps `p` until nothing else holds it, then frees it on the config thread.
  void retire(std::shared_ptr<const void> p);
  void sweepRetired();
  void waitForSignal();
  // When net::listenerPerWorker() is false (Windows): accept on bound_'s
  // socket `id` on the main loop, each connection into the next worker's
  // loop (round robin), until the socket is closed or the server drains.
  void acceptFor(uint64_t id);
  Bound* findBound(uint64_t id);
  // Stop accepting and drain (`name`: what asked, for the log). Again while
  // draining: close every connection now.
  void beginShutdown(const std::string& name);
  void onWorkerIdle();
  // Network changes and resumes (server_network.cc): started by start()
  // unless h2gate.network_change_timeout is 0s; each change makes every
  // worker's pools confirm their upstream connections.
  void startNetworkMonitor();
  void onNetworkChange(const std::string& reason);
  std::string serverInfo() const;
  // The admin endpoints (server_admin.cc).
  void adminRequest(const Admin::Request& request, Admin::Respond respond);
  Admin::Reply adminReply(const Admin::Request& request);
  // GET /proxy.pac[?listener=NAME]: the PAC file of that listener (default
  // the first).
  Admin::Reply pacReply(std::string_view query) const;
  // GET /pac: every PAC route's source, script in use, fetch time, hash
  // (?listener=NAME&route=N narrows; &text=1 adds the file).
  Admin::Reply pacStatusReply(std::string_view query) const;
  // GET /pac/eval?url=URL[&listener=NAME]: what the PAC answers (loopback
  // peers only; it runs the PAC file and its DNS calls).
  void pacEval(const Admin::Request& request, Admin::Respond respond);
  // The routes that follow a PAC file, of every current listener.
  std::vector<std::pair<std::string, std::shared_ptr<filters::PacRoute>>> pacRoutes() const;
  // 200-worthy, or why not in one line.
  std::pair<bool, std::string> readiness() const;
  std::string clustersText() const;
  // Families computed at scrape time: build info, readiness, endpoint
  // health, reloads, process figures.
  void appendMetrics(std::vector<prometheus::MetricFamily>& out) const;
  // The PAC routes' figures (h2gate_pac_*).
  void appendPacMetrics(std::vector<prometheus::MetricFamily>& out) const;

  // The configuration in effect (its filters' YAML dropped: dropFilterYaml).
  // Nothing else refers into it: contexts own their filters, pools their
  // cluster (clusters_).
  std::shared_ptr<const config::Bootstrap> bootstrap_;
  Reloader reloader_;
  // What start() builds from; empty after it.
  Prepared start_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::system_clock::time_point started_wall_;
  asio::io_context main_io_;
  ServerSignals signals_;
  asio::steady_timer drain_timer_;
  std::unique_ptr<Admin> admin_;
  // The current listener contexts (index as in bootstrap_->listeners).
  // Workers' acceptors and connections hold them too (shared_ptr), so a
  // context replaced by a reload lives until its last connection ends.
  ListenerContexts listeners_;
  // One TLS context per cluster (by name), shared by the workers' pools.
  std::unordered_map<std::string, std::shared_ptr<net::TlsContext>> tls_;
  // tls_ files' contents (reload::tlsFilesFingerprint) when last built: a
  // reload rebuilds a cluster whose files changed.
  std::unordered_map<std::string, std::string> tls_files_;
  // Endpoint health per cluster (order as in bootstrap_->clusters), shared
  // with every worker's pool. Main thread only (admin, scrapes, reload).
  std::vector<std::shared_ptr<upstream::ClusterHealth>> health_;
  // Requests in progress per cluster (by name), against its max_requests;
  // shared with every worker's pool. Kept across a reload by name, even when
  // the cluster changed: requests still on the old pools count against the
  // new limit. Main thread only.
  std::unordered_map<std::string, std::shared_ptr<net::ConnectionLimit>> cluster_requests_;
  size_t metrics_source_ = 0;  // in metrics::Registry::global()
  std::atomic<uint64_t> reloads_ok_{0};
  std::atomic<uint64_t> reloads_failed_{0};
  std::atomic<uint64_t> network_changes_{0};
  std::vector<Bound> bound_;
  uint64_t next_socket_id_ = 1;
  std::vector<std::unique_ptr<Worker>> workers_;
  size_t idle_workers_ = 0;
  size_t next_worker_ = 0;             // acceptFor()'s round robin
  std::atomic<bool> draining_{false};  // read by scrapes
  // The cluster each worker's pool of that name was given (by name).
  std::unordered_map<std::string, std::shared_ptr<const config::Cluster>> clusters_;
  // Replaced contexts, clusters and configurations, until nothing else
  // holds them (see above).
  std::vector<std::shared_ptr<const void>> retired_;
  asio::steady_timer retired_timer_{main_io_};
  // Reloads: the one reading or being applied, and those asked for since.
  bool reload_running_ = false;
  std::vector<Waiter> reload_waiters_;
  std::vector<Waiter> reload_queued_;
  // The config thread: loads and prepares configurations, renders
  // /config_dump, frees retired objects. Stopped first by ~Server.
  asio::io_context config_io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> config_guard_;
  std::thread config_thread_;
  // Last: destroyed first, while workers_ (its callback's) and main_io_
  // (its timers' and socket's) still exist.
  std::unique_ptr<net::NetworkMonitor> network_monitor_;
};

}  // namespace h2gate
