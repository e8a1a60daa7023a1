#include "gateway/upstream/cluster_tunnel.h"

#include <utility>

#include "config/dump.h"
#include "gateway/base/log.h"
#include "gateway/http1/codec.h"
#include "gateway/upstream/pool.h"
#include "gateway/upstream/proxy_request.h"

namespace h2gate::upstream {

ClusterTunnel::ClusterTunnel(std::shared_ptr<UpstreamPool> pool, uint64_t conn_id,
                             uint64_t stream_id)
    : pool_(std::move(pool)),
      timer_(pool_->executorContext()),
      conn_id_(conn_id),
      stream_id_(stream_id) {}

ClusterTunnel::~ClusterTunnel() {
  setWaiting(false);
  releaseSlot();
}

void ClusterTunnel::open(const RequestHead& head, StreamInfo& info, TunnelCallbacks& callbacks) {
  save(head, info, callbacks);
  if (pool_->auth() && !carriesAuthorization(head, info, pool_->cluster()))
    auth_ = std::make_shared<auth::RequestAuth>(
        pool_->auth(), conn_id_, stream_id_, !head.is_connect && head.framing != BodyFraming::None);
  slot_ = pool_->acquireRequest(conn_id_, stream_id_);
  if (!slot_) {
    auto self = shared_from_this();  // the app may drop its reference in onFailed
    pool_->stats().overflows.add();
    fail(503, Result::Rejected, pool_->maxRequestsReason());
    return;
  }
  wait();
}

void ClusterTunnel::abort() {
  setWaiting(false);
  timer_.cancel();
  releaseSlot();
  PendingTunnel::abort();
}

void ClusterTunnel::attachH2(const std::shared_ptr<H2Connection>& conn, size_t endpoint) {
  setWaiting(false);
  timer_.cancel();
  if (!auth_) return openH2(conn, endpoint, {});
  // The credentials first (a Kerberos token may take a moment, made off
  // the event loop), then the stream.
  std::weak_ptr<ClusterTunnel> weak = weak_from_this();
  auth_->prepare(endpoint, /*h2=*/true, /*connection_authenticated=*/false,
                 [weak, conn, endpoint](auth::Prepared p) {
                   if (auto self = weak.lock()) self->openH2(conn, endpoint, std::move(p));
                 });
}

void ClusterTunnel::openH2(const std::shared_ptr<H2Connection>& conn, size_t endpoint,
                           auth::Prepared prepared) {
  if (!callbacks_) return;  // aborted meanwhile
  if (conn->closed()) return retry();
  auto stream = std::make_shared<H2Stream>(conn, conn_id_, stream_id_);
  std::weak_ptr<ClusterTunnel> weak = weak_from_this();
  if (auth_) {
    stream->setAuthorization(std::move(prepared.authorization));
    stream->setAuthHook([weak](const ResponseHead& head, bool can_retry) {
      auto self = weak.lock();
      if (!self || !self->auth_) return auth::Verdict{};
      auth::Verdict v = self->auth_->onResponse(head, can_retry, /*same_connection=*/false);
      if (v.kind == auth::Verdict::Kind::Retry) self->retryPosted();
      return v;
    });
  }
  if (retries_ < kMaxRetries) {
    stream->setRetryHook([weak] {
      if (auto self = weak.lock()) self->retry();
    });
  }
  // A CONNECT this proxy answers with 502/503/504 goes once to another
  // proxy of the cluster, when one is up.
  if (head_->is_connect && !answer_retried_) {
    stream->setAnswerRetryHook([weak, endpoint] {
      auto self = weak.lock();
      if (!self || !self->pool_->otherEndpointUp(endpoint)) return false;
      self->answer_retried_ = true;
      self->avoid_ = endpoint;
      // Not from inside the stream's nghttp2 callback: the stream resets
      // itself first, then the request queues again.
      self->retryPosted();
      return true;
    });
  }
  attach(std::move(stream));
}

void ClusterTunnel::attachH1(std::unique_ptr<Transport> transport, std::string peer,
                             size_t endpoint, Http1Exchange::Release release, bool reused) {
  setWaiting(false);
  timer_.cancel();
  auto held = std::make_shared<HeldConnection>();
  held->transport = std::move(transport);
  held->peer = std::move(peer);
  held->release = std::move(release);
  held->reused = reused;
  if (!auth_) return openH1(held, {});
  const bool authenticated = held->transport->authenticated();
  std::weak_ptr<ClusterTunnel> weak = weak_from_this();
  auth_->prepare(endpoint, /*h2=*/false, authenticated, [weak, held](auth::Prepared p) {
    if (auto self = weak.lock()) self->openH1(held, std::move(p));
  });
}

void ClusterTunnel::poolFailed(int status, Result result, const std::string& reason) {
  setWaiting(false);
  timer_.cancel();
  releaseSlot();
  fail(status, result, reason);
}

ClusterTunnel::HeldConnection::~HeldConnection() {
  if (release) release(std::move(transport), Http1Close::Incomplete);
}

std::string ClusterTunnel::h1Head(const std::string& authorization, bool handshake) const {
  const RequestHead& h = *head_;
  std::string bytes;
  Headers fwd = forwardedHeaders(h, *info_, pool_->cluster(), /*lowercase=*/false, authorization);
  if (h.is_connect) {
    bytes = "CONNECT " + h.authority() + " HTTP/1.1\r\nHost: " + h.authority() + "\r\n";
  } else {
    // Host from the target, not the app (RFC 9112 §3.2.2), as for h2's :authority.
    bytes = h.method + " " + h.target + " HTTP/1.1\r\nHost: " + http1::hostHeader(h) + "\r\n";
    if (handshake && h.framing != BodyFraming::None)
      bytes += "Content-Length: 0\r\n";
    else if (h.framing == BodyFraming::ContentLength)
      bytes += "Content-Length: " + std::to_string(h.content_length) + "\r\n";
    else if (h.framing == BodyFraming::Chunked)
      bytes += "Transfer-Encoding: chunked\r\n";
  }
  for (Header& x : fwd) {
    bytes += x.name + ": " + x.value + "\r\n";
    config::wipe(x.value);  // credentials among them
  }
  bytes += "\r\n";
  return bytes;
}

void ClusterTunnel::openH1(const std::shared_ptr<HeldConnection>& held, auth::Prepared prepared) {
  if (!callbacks_) return;  // aborted meanwhile: ~HeldConnection gives it back
  std::string peer = std::move(held->peer);
  info_->protocol = "http1";
  if (peer.empty()) {
    asio::error_code ec;
    const auto ep = held->transport->socket().remote_endpoint(ec);
    if (!ec) peer = ep.address().to_string() + ":" + std::to_string(ep.port());
  }
  info_->upstream = std::move(peer);
  const RequestHead& h = *head_;
  auto exchange = std::make_shared<Http1Exchange>(
      std::move(held->transport),
      h.is_connect ? Http1Exchange::Kind::ProxyConnect : Http1Exchange::Kind::Request,
      h1Head(prepared.authorization, prepared.handshake), conn_id_, stream_id_,
      std::move(held->release));
  held->release = nullptr;
  if (held->reused && retries_ < kMaxRetries) {
    std::weak_ptr<ClusterTunnel> weak = weak_from_this();
    exchange->setRetryHook([weak] {
      auto self = weak.lock();
      if (!self) return;
      self->fresh_ = true;  // not another kept-alive one: it may be as stale
      self->retryPosted();
    });
  }
  if (auth_) {
    std::weak_ptr<ClusterTunnel> weak = weak_from_this();
    Http1Exchange::AuthHooks hooks;
    hooks.handshake = prepared.handshake;
    hooks.on_response = [weak](const ResponseHead& head, bool can_retry, bool keep_alive) {
      auto self = weak.lock();
      if (!self || !self->auth_) return auth::Verdict{};
      auth::Verdict v = self->auth_->onResponse(head, can_retry, keep_alive);
      if (v.kind == auth::Verdict::Kind::Retry) self->retryPosted();
      return v;
    };
    hooks.head = [weak](const std::string& authorization, bool handshake) {
      auto self = weak.lock();
      return self ? self->h1Head(authorization, handshake) : std::string();
    };
    exchange->setAuth(std::move(hooks));
  }
  attach(std::move(exchange));
}

void ClusterTunnel::retryPosted() {
  std::weak_ptr<ClusterTunnel> weak = weak_from_this();
  asio::post(timer_.get_executor(), [weak] {
    if (auto s = weak.lock()) s->retry();
  });
}

void ClusterTunnel::releaseSlot() {
  if (!slot_) return;
  slot_->release();
  slot_.reset();
}

void ClusterTunnel::setWaiting(bool w) {
  if (w == waiting_) return;
  waiting_ = w;
  if (w)
    pool_->stats().waiting.add();
  else
    pool_->stats().waiting.sub();
}

void ClusterTunnel::wait() {
  setWaiting(true);
  timer_.expires_after(pool_->queueTimeout());
  std::weak_ptr<ClusterTunnel> weak = weak_from_this();
  timer_.async_wait([weak](const asio::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || !self->waiting_) return;
    self->setWaiting(false);
    self->releaseSlot();
    self->pool_->stats().queue_timeouts.add();
    H2G_LOG(
        Info, self->conn_id_, self->stream_id_,
        "no connection to cluster " << self->pool_->cluster().name << " became available in time");
    self->fail(503, Result::ConnectTimeout,
               "no connection to upstream cluster '" + self->pool_->cluster().name +
                   "' became available in time (max_connections reached or proxy slow)");
  });
  pool_->enqueue(shared_from_this());
}

void ClusterTunnel::retry() {
  if (!callbacks_) return;  // aborted meanwhile
  ++retries_;
  inner_.reset();
  wait();
}

}  // namespace h2gate::upstream
