#include "gateway/upstream/router.h"

#include "gateway/log.h"
#include "gateway/metrics/registry.h"
#include "gateway/upstream/direct_tunnel.h"
#include "gateway/upstream/pool.h"

namespace h2gate::upstream {
namespace {

// A request with somewhere to go when its route fails: the current route's
// tunnel inside, the app's callbacks outside. Every call passes straight
// through (no copy, no allocation per chunk) except a failure that allows a
// fallback: then the failed tunnel is dropped and the next route's opened
// in its place, from a posted handler (the failure may come from inside the
// failed tunnel's open()), with the request's end replayed. The app side
// sees none of it; its connect_response_timeout keeps running from the
// first try.
//
// Lifetime: owned by the app side (and by a posted fallback while one is
// pending). After abort() it calls nothing and opens nothing.
class FallbackTunnel final : public Tunnel,
                             public TunnelCallbacks,
                             public std::enable_shared_from_this<FallbackTunnel> {
 public:
  FallbackTunnel(WorkerRouter& router, std::shared_ptr<Tunnel> first, const DirectOptions& direct)
      : router_(router), inner_(std::move(first)), direct_(direct) {}

  // Tunnel
  void open(const RequestHead& head, StreamInfo& info, TunnelCallbacks& callbacks) override {
    head_ = &head;
    info_ = &info;
    callbacks_ = &callbacks;
    inner_->open(head, info, *this);
  }
  // A tunnel is always there: the app side sends a CONNECT's bytes after the
  // response head and a request body at once, and neither falls back.
  void send(std::string_view data, Done done) override { inner_->send(data, std::move(done)); }
  void endOfRequest() override {
    ended_ = true;
    if (inner_) inner_->endOfRequest();
  }
  void abort() override {
    callbacks_ = nullptr;
    if (std::shared_ptr<Tunnel> t = std::move(inner_)) t->abort();
  }

  // TunnelCallbacks: the current route's, passed on.
  void onResponseHead(ResponseHead head) override {
    started_ = true;
    callbacks_->onResponseHead(std::move(head));
  }
  void onResponseData(std::string_view data, Done done) override {
    callbacks_->onResponseData(data, std::move(done));
  }
  bool acceptsDataV() const override { return callbacks_ && callbacks_->acceptsDataV(); }
  void onResponseDataV(const std::string_view* pieces, size_t n, Done done) override {
    callbacks_->onResponseDataV(pieces, n, std::move(done));
  }
  void onResponseHeadV(ResponseHead head, const std::string_view* pieces, size_t n,
                       Done done) override {
    started_ = true;
    callbacks_->onResponseHeadV(std::move(head), pieces, n, std::move(done));
  }
  void onResponseEnd() override { callbacks_->onResponseEnd(); }
  void onFailed(int status, Result result, std::string reason) override {
    inner_.reset();  // it already aborted itself
    if (canFallBack(result)) return fallBack(status, std::move(reason));
    if (!tried_.empty())
      reason = tried_ + "; then " + WorkerRouter::routeName(info_->cluster) + ": " + reason;
    callbacks_->onFailed(status, result, std::move(reason));
  }
  void onReset(Result result, std::string reason) override {
    callbacks_->onReset(result, std::move(reason));
  }

 private:
  // Whether a failure of the current route may go on to the next one.
  bool canFallBack(Result result) const {
    if (info_->fallbacks.empty() || started_) return false;
    // Only what can be sent again exactly as it was: a tunnel (the app's
    // bytes wait on the app side until it opens) or a request without a
    // body.
    if (!head_->is_connect && head_->framing != BodyFraming::None) return false;
    // The request never reached a proxy that could have acted on it.
    return result == Result::ConnectFailed || result == Result::ConnectTimeout ||
           result == Result::DnsFailed;
  }

  void fallBack(int status, std::string reason) {
    std::string next = std::move(info_->fallbacks.front());
    info_->fallbacks.erase(info_->fallbacks.begin());
    H2G_LOG(Info, info_->connection_id, info_->stream_id,
            head_->method << " " << head_->target << ": " << WorkerRouter::routeName(info_->cluster)
                          << " failed (" << status << ", " << reason << "); falling back to "
                          << WorkerRouter::routeName(next));
    router_.countFallback(*info_, info_->cluster, next);
    tried_ +=
        (tried_.empty() ? "" : "; then ") + WorkerRouter::routeName(info_->cluster) + ": " + reason;
    info_->cluster = std::move(next);
    info_->protocol.clear();
    info_->upstream.clear();
    asio::post(router_.io(), [self = shared_from_this()] { self->openNext(); });
  }

  void openNext() {
    if (!callbacks_) return;  // aborted meanwhile
    inner_ = router_.open(info_->cluster, *info_, direct_);
    if (!inner_)
      return callbacks_->onFailed(502, Result::ConnectFailed,
                                  "no upstream cluster '" + info_->cluster + "'");
    inner_->open(*head_, *info_, *this);
    // The request's end, if the app side gave it to the route that failed.
    if (inner_ && ended_) inner_->endOfRequest();
  }

  WorkerRouter& router_;
  std::shared_ptr<Tunnel> inner_;  // null between a failure and the next route
  const DirectOptions direct_;
  const RequestHead* head_ = nullptr;
  StreamInfo* info_ = nullptr;
  TunnelCallbacks* callbacks_ = nullptr;  // null once aborted
  std::string tried_;                     // routes that failed, with why
  bool ended_ = false;                    // endOfRequest() came
  bool started_ = false;                  // a response head went to the app side
};

}  // namespace

WorkerRouter::WorkerRouter(asio::io_context& io, const Upstreams& upstreams, metrics::Shard& shard)
    : io_(io), upstreams_(upstreams), shard_(shard) {}

std::shared_ptr<Tunnel> WorkerRouter::route(StreamInfo& info, const DirectOptions& direct,
                                            std::string* error) {
  std::shared_ptr<Tunnel> first = open(info.cluster, info, direct);
  if (!first) {
    *error = "no upstream cluster '" + info.cluster + "'";
    return nullptr;
  }
  if (info.fallbacks.empty()) return first;
  return std::make_shared<FallbackTunnel>(*this, std::move(first), direct);
}

std::shared_ptr<Tunnel> WorkerRouter::open(const std::string& route, const StreamInfo& info,
                                           const DirectOptions& direct) {
  if (route.empty()) {
    return std::make_shared<DirectTunnel>(io_, direct.connect_timeout, info.connection_id,
                                          info.stream_id, direct.send_buffer, direct.policy);
  }
  auto pool = upstreams_.find(route);
  if (pool == upstreams_.end()) return nullptr;
  return pool->second->newTunnel(info.connection_id, info.stream_id);
}

std::string WorkerRouter::routeName(const std::string& route) {
  return route.empty() ? std::string("DIRECT") : "cluster '" + route + "'";
}

void WorkerRouter::countFallback(const StreamInfo& info, const std::string& from,
                                 const std::string& to) {
  shard_
      .counter(metrics::Family::RouteFallbacks,
               {info.listener_name, from.empty() ? "direct" : from, to.empty() ? "direct" : to})
      .add();
}

}  // namespace h2gate::upstream
