// Upstream connections to one cluster, for one worker.
//
// With h2 every request becomes a stream on a shared connection; a new
// connection opens only when every open one is at min(peer's
// SETTINGS_MAX_CONCURRENT_STREAMS, max_concurrent_streams). With HTTP/1.1
// (ALPN said so, or no ALPN) every CONNECT gets its own connection and
// absolute-form requests reuse idle keep-alive ones. At most
// max_connections exist (circuit breaker); beyond that requests wait in a
// bounded queue, and get 503 when their wait times out. What ALPN gave is
// remembered, so the next request does not guess; a reconnect re-learns it.
// A proxy that wants NTLM (auth/proxy_auth.h) is reached over HTTP/1.1 only.
//
// max_requests (circuit breaker) bounds the requests and tunnels in progress
// on the cluster, waiting or on a connection, across every worker's pool:
// one count shared by all (net::ConnectionLimit). A request beyond it
// gets 503 at once, before it queues. Its slot is taken when the request is
// opened and given back exactly once when it ends, however it ends (see
// ClusterTunnel); a retry onto another connection keeps the slot it has.
//
// Idle HTTP/1.1 keep-alive connections (h1_idle_) are looked after while
// they wait: one unused for the cluster's idle_timeout is closed (before the
// proxy's own timeout closes it under a request: squid 2 min, nginx 75 s),
// and each is watched for readability, so a proxy closing it (FIN, reset,
// close_notify) or sending bytes nobody asked for gets it closed and dropped
// at once instead of handed to the next request. The watch is a readiness
// wait on the TCP socket, which consumes nothing; only when it fires while
// the connection is still idle does the pool read (without blocking) to see
// what came. A connection taken for a request has its wait cancelled first,
// and a wait that completed meanwhile finds its connection gone from the
// pool and does nothing: no byte of the next response is ever taken by it.
// h2 connections are not timed out when idle: the pool keeps one open on
// purpose, and the keepalive PING (http2.connection_keepalive) proves it
// alive or closes it.
//
// Endpoints (several per cluster): a new connection goes to the next
// endpoint, round robin, that is not down; a new stream to the open h2
// connection with the fewest streams (ties: the earlier endpoint). An
// endpoint whose connect or TLS handshake fails, or whose connection dies
// (no PING answer, an error), is down for a back-off (kBackoffMin doubling
// to kBackoffMax) and retried in the background when it ends. Waiting
// requests move on to the next endpoint. When every endpoint is down, a new
// request does not wait for a back-off to end: it probes one down endpoint
// at once (the one whose back-off ends first among those with no attempt
// in flight; at most one attempt per endpoint at a time) and waits for
// that attempt, so a proxy that is back serves the first request after its
// restart. When the probe fails too (or every down endpoint has an attempt
// in flight that fails), the waiting requests get 503 with each endpoint's
// last error. Every
// outcome is reported to the cluster's ClusterHealth (shared by all
// workers, for /ready and h2gate_upstream_endpoint_up). For h2 the pool
// keeps one usable connection open (after a loss, or a GOAWAY, it opens a
// replacement), so the next request does not wait for TCP and TLS.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <asio.hpp>

#include "config/config.h"
#include "gateway/net/connection_limit.h"
#include "gateway/net/tls_context.h"
#include "gateway/upstream/auth/proxy_auth.h"
#include "gateway/upstream/connector.h"
#include "gateway/upstream/h2_connection.h"
#include "gateway/upstream/health.h"
#include "gateway/upstream/pending_tunnel.h"

namespace h2gate::upstream {

class ClusterTunnel;

class UpstreamPool : public H2Connection::Owner, public std::enable_shared_from_this<UpstreamPool> {
 public:
  // Requests waiting for a connection beyond this get 503 at once.
  static constexpr size_t kMaxWaiting = 4096;
  static constexpr std::chrono::milliseconds kBackoffMin{500};
  static constexpr std::chrono::seconds kBackoffMax{30};
  // "cluster X is at max_requests" is logged at most this often (per
  // cluster, across workers).
  static constexpr std::chrono::seconds kRefusalLogInterval{10};

  // Built before the worker's thread starts or on it: `shard` is the
  // worker's. `requests` counts the cluster's requests in progress against
  // max_requests; every worker's pool of the cluster shares it.
  UpstreamPool(asio::io_context& io, const config::Cluster& cluster,
               std::shared_ptr<net::TlsContext> tls, uint32_t worker, metrics::Shard& shard,
               std::shared_ptr<ClusterHealth> health,
               std::shared_ptr<net::ConnectionLimit> requests);
  ~UpstreamPool() override;

  std::shared_ptr<Tunnel> newTunnel(uint64_t conn_id, uint64_t stream_id);
  // Opens one connection ahead of the first request (learns ALPN too).
  void preconnect();
  // Opens nothing new; closes idle connections. Busy ones finish with their
  // requests; an h2 connection closes when its last stream ends (a pool
  // replaced by a reload must not keep its proxy connection open forever).
  void shutdown();
  // The machine's network changed (or it resumed from suspend): every h2
  // connection must answer a PING within `timeout` or is closed and
  // replaced (H2Connection::probe); idle HTTP/1.1 keep-alive connections,
  // which cannot be probed, are closed; endpoints down from failures on the
  // old network get a fresh chance; and a pool left without a connection
  // opens one, so the next request does not pay for the discovery. A
  // connection lost within `timeout` lost its path, not its proxy: it does
  // not take its endpoint down.
  void onNetworkChange(config::Duration timeout);

  // For ClusterTunnel.
  // A slot of max_requests: the shared count, which the caller MUST
  // release() exactly once when the request ends; null when the cluster is
  // at max_requests (counted in overflows, logged at most every
  // kRefusalLogInterval).
  std::shared_ptr<net::ConnectionLimit> acquireRequest(uint64_t conn_id, uint64_t stream_id);
  // What a request refused by acquireRequest() is told.
  std::string maxRequestsReason() const;
  void enqueue(const std::shared_ptr<ClusterTunnel>& tunnel);
  void dispatch();
  config::Duration queueTimeout() const;
  // Some endpoint other than `endpoint` is not down.
  bool otherEndpointUp(size_t endpoint) const;
  const config::Cluster& cluster() const { return cluster_; }
  asio::io_context& executorContext() { return io_; }
  const ClusterStats& stats() const { return *cluster_stats_; }
  // The cluster's authentication to its proxies; null when it has none.
  const std::shared_ptr<auth::ProxyAuth>& auth() const { return auth_; }

  // H2Connection::Owner
  void onCapacityChanged(H2Connection& conn) override;
  void onConnectionClosed(H2Connection& conn, const std::string& reason, bool failed) override;

  // Introspection for logs and tests.
  size_t h2Connections() const { return h2_.size(); }

 private:
  struct H2Entry {
    std::shared_ptr<H2Connection> conn;
    size_t endpoint;
  };
  struct H1Idle {
    size_t endpoint;
    std::unique_ptr<Transport> transport;
    uint64_t id;  // of this idle period: the watch and the timer find it by this
    std::chrono::steady_clock::time_point since;
  };
  // To `endpoint`, or to the next endpoint that is not down; with `probe`
  // (a request is waiting), when every endpoint is down, to the down one
  // picked by pickEndpoint(). False when no attempt was started (every
  // endpoint down, and, with `probe`, each has an attempt in flight; or
  // shutting down).
  bool openConnection(std::optional<size_t> endpoint = std::nullopt, bool probe = false);
  std::optional<size_t> pickEndpoint(bool probe);
  // A connection attempt to `endpoint` is in flight.
  bool connectingTo(size_t endpoint) const;
  // `verified`: a connection attempt failed. A connection that died is down
  // but unverified: the path may have died, not the proxy (a NAT, a
  // network change), so when no endpoint is up a request may still try it.
  void markDown(size_t endpoint, const std::string& reason, bool verified);
  void markUp(size_t endpoint);
  // h2: make sure a usable connection exists or is being opened; to
  // `prefer` when it is not down (after a loss: find out whether that proxy
  // is still there).
  void ensureConnection(std::optional<size_t> prefer = std::nullopt);
  // "all N proxies of cluster X are down: A: why; B: why"
  std::string allDownReason() const;
  void onConnected(const std::shared_ptr<Connector>& connector, size_t endpoint,
                   ConnectOutcome outcome);
  // Hands an HTTP/1.1 connection to a waiting request.
  // `reused`: a kept-alive connection from h1_idle_ (the request may go
  // again on a new one if the proxy closed it meanwhile).
  void attachH1(const std::shared_ptr<ClusterTunnel>& t, size_t endpoint,
                std::unique_ptr<Transport> transport, std::string peer, bool reused);
  void onH1Released(size_t endpoint, std::unique_ptr<Transport> transport, Http1Close why);
  // Puts a keep-alive connection in h1_idle_, watched and timed (see above).
  void addIdleH1(size_t endpoint, std::unique_ptr<Transport> transport);
  // Takes the most recently used idle connection for a request; its watch
  // is cancelled. h1_idle_ MUST NOT be empty.
  H1Idle takeIdleH1();
  void watchIdleH1(H1Idle& idle);
  void onIdleH1Readable(uint64_t id, const asio::error_code& ec);
  // idle_timer_ for the oldest idle connection's deadline (none when 0s).
  void armIdleTimer();
  void onIdleTimer();
  void closeIdleH1(H1Idle& idle, Http1Close why);
  // Closes the h2 connections that carry no stream and are not wanted:
  // all of them when shutting down, else those to proxies that want NTLM.
  void closeIdleH2();

  size_t connectionCount() const;
  // The first connection with room. One idle for longer than the keepalive
  // interval is confirmed with a PING first (probe()) and skipped until the
  // answer comes; no answer closes it and the request goes elsewhere.
  // `avoid`: skip the connections to that endpoint (a retry after its proxy
  // answered a CONNECT with 502/503/504). Sets *endpoint to the chosen
  // connection's endpoint.
  std::shared_ptr<H2Connection> pickH2(std::optional<size_t> avoid = std::nullopt,
                                       size_t* endpoint = nullptr);
  // For a retry that must not go back to endpoint `avoid`: true when a
  // connection to another endpoint is on its way (one being opened, or one
  // opened now); false when no other endpoint can be tried.
  bool connectAvoiding(size_t avoid);
  bool anyProbing() const;
  // The endpoint the next connection goes to is known to speak HTTP/1.1.
  bool knownHttp1() const;
  // Its proxy wants NTLM, which HTTP/2 cannot carry: new connections to it
  // offer only http/1.1, and its h2 connections take no new streams (an
  // idle one is closed).
  void requireHttp1(size_t endpoint);
  void failWaiting(int status, Result result, const std::string& reason);

  asio::io_context& io_;
  const config::Cluster& cluster_;
  std::shared_ptr<net::TlsContext> tls_;
  uint32_t worker_;
  std::shared_ptr<ClusterStats> cluster_stats_;
  std::vector<std::shared_ptr<EndpointStats>> endpoint_stats_;  // index as in cluster_.endpoints
  std::shared_ptr<ClusterHealth> health_;
  std::shared_ptr<net::ConnectionLimit> requests_;  // max_requests, all workers
  std::vector<H2Entry> h2_;
  std::vector<std::shared_ptr<Connector>> connecting_;
  size_t h1_busy_ = 0;           // HTTP/1.1 connections carrying a request
  std::vector<H1Idle> h1_idle_;  // keep-alive, for absolute-form; oldest first
  uint64_t next_idle_id_ = 1;
  asio::steady_timer idle_timer_;  // idle_timeout of h1_idle_.front()
  struct Backoff {
    bool down = false;
    bool verified = false;               // down because an attempt failed (see markDown)
    std::chrono::milliseconds delay{0};  // of the current (or last) down period
    std::chrono::steady_clock::time_point until{};
    std::string last_error;
    std::unique_ptr<asio::steady_timer> retry;  // background attempt when `until` comes
    // The attempt in flight was started for a waiting request while the
    // endpoint was down (before `until`): see openConnection().
    bool probing = false;
  };
  std::vector<Backoff> backoff_;  // index as in cluster_.endpoints
  std::deque<std::weak_ptr<ClusterTunnel>> waiting_;
  // What ALPN gave each endpoint (index as in cluster_.endpoints) on its
  // last handshake; unset until the first. Re-learnt on every connection.
  std::vector<std::optional<std::string>> endpoint_alpn_;
  size_t next_endpoint_ = 0;
  bool shutting_down_ = false;
  // h2 connections confirming themselves after a network change (by
  // H2Connection::id()), until the PING's deadline; see onNetworkChange().
  std::unordered_map<uint64_t, std::chrono::steady_clock::time_point> network_probes_;
  std::shared_ptr<auth::ProxyAuth> auth_;
};

}  // namespace h2gate::upstream
