// A request routed to a cluster (one UpstreamPool): waits in the pool until
// a connection can take it, then becomes an H2Stream on an H2Connection or
// an Http1Exchange on a Transport, which it opens with the saved request and
// hands what the app sent meanwhile (PendingTunnel). gateway/README.md, The
// data path, draws where it sits.
//
// It holds a slot of the cluster's max_requests from open() until it ends:
// it fails (the slot goes back before the app is told), is aborted, or is
// dropped by the app connection when the request is over (destructor). The
// app connection holds the only owning reference, so the destructor runs
// when the request ends. The pool holds it weakly while it waits; the
// stream or exchange it becomes calls it back (a retry, an answer to
// authenticate) through weak references and posted handlers, never from
// inside their own callbacks.
//
// A request the proxy refused, or whose connection died before anything was
// sent either way, goes to another connection, at most kMaxRetries times,
// keeping its slot.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <asio.hpp>

#include "gateway/net/connection_limit.h"
#include "gateway/upstream/auth/proxy_auth.h"
#include "gateway/upstream/h2_connection.h"
#include "gateway/upstream/http1_exchange.h"
#include "gateway/upstream/pending_tunnel.h"

namespace h2gate::upstream {

class UpstreamPool;

class ClusterTunnel : public PendingTunnel, public std::enable_shared_from_this<ClusterTunnel> {
 public:
  ClusterTunnel(std::shared_ptr<UpstreamPool> pool, uint64_t conn_id, uint64_t stream_id);
  ~ClusterTunnel() override;

  void open(const RequestHead& head, StreamInfo& info, TunnelCallbacks& callbacks) override;
  void abort() override;

  // For the pool.
  // In the pool's wait queue, not failed or aborted.
  bool waiting() const { return waiting_ && callbacks_; }
  // Wants a connection of its own, not a kept-alive one (a CONNECT, or a
  // request whose kept-alive connection died under it).
  bool wantsNewConnection() const { return head_->is_connect || fresh_; }
  // A retry kept off the endpoint whose proxy answered its CONNECT with
  // 502/503/504 (until the pool clears it: no other endpoint to be had).
  std::optional<size_t> avoid() const { return avoid_; }
  void clearAvoid() { avoid_.reset(); }
  // Hands the request a stream on `conn` (credentials first, when the
  // cluster authenticates).
  void attachH2(const std::shared_ptr<H2Connection>& conn, size_t endpoint);
  // Hands the request an HTTP/1.1 connection; `release` gives it back to
  // the pool (kept alive or closed) when the exchange ends, or unused when
  // the request goes away first. `reused`: kept alive from an earlier
  // request (the request may go again on a new one if the proxy closed it
  // meanwhile).
  void attachH1(std::unique_ptr<Transport> transport, std::string peer, size_t endpoint,
                Http1Exchange::Release release, bool reused);
  // The pool cannot serve it (every proxy down, its queue full).
  void poolFailed(int status, Result result, const std::string& reason);

 private:
  // An HTTP/1.1 connection handed to this request while its credentials
  // are made: given back to the pool unused if the request goes away first.
  struct HeldConnection {
    std::unique_ptr<Transport> transport;
    std::string peer;
    Http1Exchange::Release release;
    bool reused = false;  // kept alive from an earlier request
    ~HeldConnection();
  };

  void openH2(const std::shared_ptr<H2Connection>& conn, size_t endpoint, auth::Prepared prepared);
  void openH1(const std::shared_ptr<HeldConnection>& held, auth::Prepared prepared);
  // The request head for an HTTP/1.1 proxy, with `authorization` (the
  // cluster's credentials, "" none); `handshake`: an NTLM negotiate leg,
  // which announces no body (it follows with the next leg).
  std::string h1Head(const std::string& authorization, bool handshake) const;
  // Queues the request again, after the stream or exchange that asked for
  // it has stopped (not from inside its callback).
  void retryPosted();
  void retry();
  // Gives the max_requests slot back; only the first call does.
  void releaseSlot();
  void setWaiting(bool w);
  // Into the pool's queue, timed by its queue timeout.
  void wait();

  std::shared_ptr<UpstreamPool> pool_;
  asio::steady_timer timer_;
  uint64_t conn_id_;
  uint64_t stream_id_;
  bool waiting_ = false;
  // The cluster's max_requests count while this holds a slot of it.
  std::shared_ptr<net::ConnectionLimit> slot_;
  // A request the proxy refused, or whose connection died before anything
  // was sent either way, goes to another connection at most this often.
  static constexpr int kMaxRetries = 2;
  int retries_ = 0;
  bool fresh_ = false;  // see wantsNewConnection()
  // A CONNECT answered 502/503/504 was sent to another proxy (once), which
  // must not be the endpoint that answered.
  bool answer_retried_ = false;
  std::optional<size_t> avoid_;
  // The cluster's authentication for this request (null: none, or the
  // request carries its own Proxy-Authorization).
  std::shared_ptr<auth::RequestAuth> auth_;
};

}  // namespace h2gate::upstream
