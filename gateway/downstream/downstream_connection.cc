#include "gateway/downstream/downstream_connection.h"
#include "gateway/net/address.h"

#include <cstdio>

#include "filters/pac.h"
#include "gateway/http1/codec.h"
#include "gateway/log.h"
#include "gateway/net/socket_tuning.h"
#include "gateway/upstream/direct_tunnel.h"

namespace h2gate::downstream {
namespace {

constexpr size_t kReadSize = 64 * 1024;
// Pieces one write() gathers without allocating (writev beyond: a vector).
constexpr size_t kInlinePieces = 16;
// After an error reply, how long we keep reading (and discarding) what the app
// still sends, so closing does not turn into a RST that eats our reply.
constexpr auto kLingerTime = std::chrono::seconds(2);
// At most one "listener is at max_connections" line per listener this often.
constexpr auto kRefusalLogInterval = std::chrono::seconds(10);

const char* stateName(int s) {
  static constexpr const char* kNames[] = {"reading_head",   "connecting", "request_body",
                                           "await_response", "tunnel",     "closed"};
  return kNames[s];
}

}  // namespace

DownstreamConnection::DownstreamConnection(asio::ip::tcp::socket socket,
                                           const ListenerContext& listener, ListenerStats& stats,
                                           upstream::Upstreams& upstreams, uint64_t id,
                                           CloseHook on_close)
    : socket_(std::move(socket)),
      listener_(listener),
      stats_(stats),
      upstreams_(upstreams),
      id_(id),
      on_close_(std::move(on_close)),
      timer_(socket_.get_executor()) {}

DownstreamConnection::~DownstreamConnection() {
  if (connection_counted_) stats_.connections_active.sub();
  releaseSlot();
  H2G_LOG(Trace, id_, 0, "connection object destroyed");
}

ListenerStats::Route* DownstreamConnection::route() {
  if (route_ || info_.protocol.empty()) return route_;
  route_ = &stats_.route(info_.cluster.empty() ? "direct" : info_.cluster, info_.protocol);
  if (unrouted_up_ > 0) {
    route_->up.add(unrouted_up_);
    unrouted_up_ = 0;
  }
  return route_;
}

void DownstreamConnection::countUp(size_t n) {
  info_.bytes_up += n;
  if (ListenerStats::Route* r = route())
    r->up.add(n);
  else
    unrouted_up_ += n;
}

void DownstreamConnection::countDown(size_t n) {
  info_.bytes_down += n;
  if (ListenerStats::Route* r = route()) {
    r->down.add(n);
    if (!first_byte_ && head_.is_connect) {
      first_byte_ = true;
      r->ttfb_connect.observe(std::chrono::steady_clock::now() - info_.start);
    }
  }
}

void DownstreamConnection::setState(State s) {
  H2G_LOG(
      Trace, id_, requests_,
      "state " << stateName(static_cast<int>(state_)) << " -> " << stateName(static_cast<int>(s)));
  state_ = s;
}

void DownstreamConnection::start() {
  asio::error_code ec;
  socket_.non_blocking(true, ec);
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  tuner_ = net::tuneSocket(socket_, listener_.send_buffer, id_);
  const auto remote = socket_.remote_endpoint(ec);
  peer_ = ec ? std::string("unknown") : net::endpointText(remote);
  stats_.connections.add();
  stats_.connections_active.add();
  connection_counted_ = true;
  parser_ = std::make_unique<http1::Parser>(http1::Parser::Kind::Request, listener_.limits);
  H2G_LOG(Debug, id_, 0, "accepted from " << peer_ << " on listener " << listener_.name);
  ConnectionLimit& limit = *listener_.open_connections;
  if (!limit.tryAcquire(listener_.max_connections)) {
    // Refuse politely: an answer the app can show, then close. Accepting
    // goes on; each refused connection lives only for the lingering close.
    if (const uint64_t n = limit.noteRefusal(Clock::now(), kRefusalLogInterval))
      H2G_LOG(Warn, id_, 0,
              "listener " << listener_.name << " is at max_connections ("
                          << listener_.max_connections << "): new app connections get 503 (" << n
                          << " refused since the last report)");
    replyError(503, Result::Rejected,
               "too many connections to listener " + listener_.name + " (max_connections " +
                   std::to_string(listener_.max_connections) + "); try again later",
               log::Level::Debug);
    return;
  }
  slot_ = listener_.open_connections;
  // The first request's head is timed from the accept (request_headers_timeout).
  head_started_ = true;
  head_since_ = Clock::now();
  armTimer();
  readMore();
}

void DownstreamConnection::releaseSlot() {
  if (!slot_) return;
  slot_->release();
  slot_.reset();
}

void DownstreamConnection::readMore() {
  if (reading_ || app_eof_ || state_ == State::Closed) return;
  if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
  if (in_ && in_end_ == kReadSize) return;  // full: the consumer has not caught up
  reading_ = true;
  if (in_end_ == 0 && last_read_drained_) {
    // Nothing held and the socket was empty: wait without a buffer.
    in_.reset();
    socket_.async_wait(
        asio::socket_base::wait_read,
        [self = shared_from_this()](const asio::error_code& ec) { self->onReadable(ec); });
    return;
  }
  if (!in_) in_.reset(new char[kReadSize]);
  socket_.async_read_some(
      asio::buffer(in_.get() + in_end_, kReadSize - in_end_),
      [self = shared_from_this()](const asio::error_code& ec, size_t n) { self->onRead(ec, n); });
}

void DownstreamConnection::onReadable(const asio::error_code& ec) {
  if (ec) return onRead(ec, 0);
  if (state_ == State::Closed) return onRead(ec, 0);  // onRead goes on with the close
  if (!in_) in_.reset(new char[kReadSize]);
  asio::error_code rec;
  const size_t n = socket_.read_some(asio::buffer(in_.get() + in_end_, kReadSize - in_end_), rec);
  if (rec == asio::error::would_block || rec == asio::error::try_again) {
    reading_ = false;  // a spurious wake-up
    last_read_drained_ = true;
    return readMore();
  }
  onRead(rec, n);
}

void DownstreamConnection::onRead(const asio::error_code& ec, size_t n) {
  reading_ = false;
  if (!ec) last_read_drained_ = in_end_ + n < kReadSize;
  if (state_ == State::Closed) {
    // A read from before close(): carry on with the lingering close.
    if (ec) return finalClose();
    return lingerRead();
  }
  if (ec == asio::error::eof) return onAppEof();
  if (ec) {
    H2G_LOG(Debug, id_, requests_, "read from app failed: " << ec.message());
    if (request_open_ && info_.result == Result::Ok) {
      info_.result = Result::DownstreamReset;
      info_.reason = "app connection failed: " + ec.message();
    }
    close(true);
    return;
  }
  in_end_ += n;
  if (state_ == State::RequestBody) touchStream();
  if (state_ == State::ReadingHead) {
    head_bytes_ = true;
    if (!head_started_) {
      // The first byte of the next head: request_headers_timeout from now.
      head_started_ = true;
      head_since_ = Clock::now();
      armTimer();
    }
  }
  process();
}

void DownstreamConnection::process() {
  switch (state_) {
    case State::ReadingHead: {
      if (in_begin_ == in_end_) {
        readMore();
        return;
      }
      http1::Event ev;
      do {
        // The first event may be the completion of the previous bodyless
        // request (the parser paused at its head): step over it.
        size_t used = 0;
        ev = parser_->feed(inData() + in_begin_, in_end_ - in_begin_, &used, &body_out_);
        in_begin_ += used;
      } while (ev == http1::Event::MessageComplete && in_begin_ < in_end_);
      body_out_.clear();
      if (ev == http1::Event::HeadComplete) return handleHead();
      if (ev == http1::Event::Error)
        return replyError(parser_->errorStatus(), Result::BadRequest, parser_->errorReason());
      readMore();  // everything was consumed
      return;
    }
    case State::RequestBody:
      return processBody();
    case State::Tunnel:
      return pumpTunnel();
    case State::Connecting:
    case State::AwaitResponse:
    case State::Closed:
      return;  // bytes wait in in_ until the state changes
  }
}

void DownstreamConnection::beginRequest(RequestHead head) {
  ++requests_;
  request_open_ = true;
  head_ = std::move(head);
  info_ = StreamInfo{};
  tried_.clear();
  info_.connection_id = id_;
  info_.stream_id = requests_;
  info_.listener_name = listener_.name;
  info_.client = peer_;
  info_.start = std::chrono::steady_clock::now();
  info_.start_wall = std::chrono::system_clock::now();
  route_ = nullptr;
  unrouted_up_ = 0;
  first_byte_ = false;
}

void DownstreamConnection::handleHead() {
  head_started_ = head_bytes_ = false;
  beginRequest(std::move(parser_->request()));
  body_out_.clear();
  sending_up_ = false;
  request_done_ = response_started_ = response_done_ = false;
  out_framing_ = BodyFraming::None;
  keep_alive_ = head_.keep_alive && !draining_;

  if (std::string err = http1::parseTarget(head_); !err.empty()) {
    if (isPacRequest()) return replyPac();
    return replyError(400, Result::BadRequest, std::move(err));
  }
  // A request from here on: counted as started (by kind, which parseTarget
  // knows) and, in finishRequest(), as finished.
  request_counted_ = true;
  (head_.is_connect ? stats_.started_connect : stats_.started_forward).add();
  (head_.is_connect ? stats_.active_connect : stats_.active_forward).add();
  H2G_LOG(Debug, id_, requests_, head_.method << " " << head_.target);

  bool expect_continue = false;
  if (const Header* e = findHeader(head_.headers, "expect")) {
    if (!iequals(e->value, "100-continue"))
      return replyError(417, Result::BadRequest, "unsupported Expect: " + e->value);
    expect_continue = !head_.is_connect && head_.framing != BodyFraming::None;
  }

  for (const auto& f : listener_.filters)
    if (f->onRequestHead(head_, info_) == filters::FilterStatus::Stop) break;
  if (info_.status != 0) {
    const int status = info_.status;
    return replyError(status, Result::Rejected,
                      info_.reason.empty() ? "rejected by policy" : info_.reason);
  }
  std::shared_ptr<upstream::Tunnel> tunnel = makeTunnel();
  if (!tunnel) return;  // replied
  if (expect_continue) write({"HTTP/1.1 100 Continue\r\n\r\n"}, nullptr);
  response_wait_since_ = Clock::now();  // connect_response_timeout from here
  touchStream();                        // and stream_idle_timeout
  startRequest(std::move(tunnel));
}

std::shared_ptr<upstream::Tunnel> DownstreamConnection::makeTunnel() {
  if (info_.cluster.empty()) {
    return std::make_shared<upstream::DirectTunnel>(
        static_cast<asio::io_context&>(socket_.get_executor().context()),
        listener_.direct_connect_timeout, id_, requests_, listener_.send_buffer,
        &listener_.filters);
  }
  auto pool = upstreams_.find(info_.cluster);
  if (pool == upstreams_.end()) {
    replyError(502, Result::ConnectFailed, "no upstream cluster '" + info_.cluster + "'");
    return nullptr;
  }
  return pool->second->newTunnel(id_, requests_);
}

void DownstreamConnection::startRequest(std::shared_ptr<upstream::Tunnel> tunnel) {
  tunnel_ = std::move(tunnel);
  if (head_.is_connect) {
    setState(State::Connecting);
    armTimer();
    tunnel_->open(head_, info_, *this);
    return;
  }
  const bool has_body = head_.framing != BodyFraming::None;
  setState(has_body ? State::RequestBody : State::AwaitResponse);
  armTimer();
  tunnel_->open(head_, info_, *this);
  if (!tunnel_) return;  // failed at once
  if (has_body) {
    processBody();
  } else {
    request_done_ = true;
    tunnel_->endOfRequest();
  }
}

void DownstreamConnection::processBody() {
  if (sending_up_ || state_ != State::RequestBody) return;
  bool last = false;
  while (body_out_.empty() && !last) {
    if (in_begin_ == in_end_) {
      if (app_eof_) {
        info_.result = Result::DownstreamReset;
        info_.reason = "app closed the connection in the middle of the request body";
        close(true);
      } else {
        readMore();
      }
      return;
    }
    size_t used = 0;
    const http1::Event ev =
        parser_->feed(inData() + in_begin_, in_end_ - in_begin_, &used, &body_out_);
    in_begin_ += used;
    if (ev == http1::Event::Error) {
      if (!response_started_)
        return replyError(400, Result::BadRequest, "bad request body: " + parser_->errorReason());
      info_.result = Result::BadRequest;
      info_.reason = "bad request body: " + parser_->errorReason();
      close(true);
      return;
    }
    if (ev == http1::Event::MessageComplete) last = true;
  }
  auto after = [self = shared_from_this(), last] {
    self->sending_up_ = false;
    self->body_out_.clear();
    if (self->state_ != State::RequestBody) return;
    self->touchStream();  // the upstream took the chunk
    if (!last) return self->processBody();
    self->request_done_ = true;
    self->response_wait_since_ = Clock::now();  // the whole request is up: a full wait
    self->setState(State::AwaitResponse);
    self->armTimer();
    self->tunnel_->endOfRequest();
  };
  if (body_out_.empty()) return after();
  sending_up_ = true;
  // The upstream has connect_response_timeout to take this chunk.
  response_wait_since_ = Clock::now();
  armTimer();
  countUp(body_out_.size());
  tunnel_->send(body_out_, std::move(after));
}

void DownstreamConnection::pumpTunnel() {
  if (sending_up_ || state_ != State::Tunnel) return;
  if (in_begin_ < in_end_) {
    sending_up_ = true;
    const std::string_view bytes(inData() + in_begin_, in_end_ - in_begin_);
    countUp(bytes.size());
    touchTunnel();
    tunnel_->send(bytes, [self = shared_from_this()] {
      self->sending_up_ = false;
      self->in_begin_ = self->in_end_ = 0;
      self->pumpTunnel();
    });
    return;
  }
  if (!app_eof_) return readMore();
  if (!request_done_) {
    // The app's FIN goes on to the destination; the other direction may go on.
    request_done_ = true;
    H2G_LOG(Debug, id_, requests_, "app half-closed the tunnel");
    tunnel_->endOfRequest();
  }
  maybeFinishTunnel();
}

void DownstreamConnection::onAppEof() {
  app_eof_ = true;
  switch (state_) {
    case State::ReadingHead:
      if (parser_->inHead() || in_begin_ < in_end_)
        H2G_LOG(Debug, id_, 0, "app closed in the middle of a request head");
      return close(false);
    case State::RequestBody:
      return processBody();
    case State::Tunnel:
      return pumpTunnel();
    case State::Connecting:     // pumpTunnel() passes the FIN on once open
    case State::AwaitResponse:  // a half-close after the request is fine
      keep_alive_ = false;
      return;
    case State::Closed:
      return;
  }
}

void DownstreamConnection::onResponseHead(ResponseHead head) {
  if (state_ == State::Closed) return;
  info_.status = head.status;
  response_started_ = true;
  touchStream();
  if (head_.is_connect && head.status / 100 == 2) {
    info_.status = 200;
    if (ListenerStats::Route* r = route())
      r->tunnel_setup.observe(std::chrono::steady_clock::now() - info_.start);
    H2G_LOG(Debug, id_, requests_, "tunnel to " << head_.authority() << " established");
    write({"HTTP/1.1 200 Connection established\r\n\r\n"}, nullptr);
    setState(State::Tunnel);
    touchTunnel();
    armTimer();  // tunnel_idle_timeout
    pumpTunnel();
    return;
  }
  if (head_.is_connect) {
    keep_alive_ = false;  // a refused CONNECT ends the connection
    // The proxy's answer is relayed, but no tunnel came of it.
    info_.result = Result::ConnectFailed;
    if (info_.reason.empty())
      info_.reason = "proxy refused the tunnel with status " + std::to_string(head.status);
  }
  if (head.framing == BodyFraming::ContentLength || head.framing == BodyFraming::None) {
    out_framing_ = head.framing;
  } else if (head_.http_minor >= 1) {
    out_framing_ = BodyFraming::Chunked;
  } else {
    out_framing_ = BodyFraming::UntilClose;  // HTTP/1.0 app: the close ends the body
    keep_alive_ = false;
  }
  // An answer before the request body was read leaves the connection out of
  // sync: close after it.
  if (!request_done_) keep_alive_ = false;
  std::string out;
  http1::appendResponseHead(out, head, out_framing_, keep_alive_);
  write({out}, nullptr);
  if (ListenerStats::Route* r = route(); r && !first_byte_) {
    first_byte_ = true;
    r->ttfb_forward.observe(std::chrono::steady_clock::now() - info_.start);
  }
}

void DownstreamConnection::onResponseData(std::string_view data, upstream::Done done) {
  onResponseDataV(&data, 1, std::move(done));
}

void DownstreamConnection::onResponseDataV(const std::string_view* pieces, size_t n,
                                           upstream::Done done) {
  if (state_ == State::Closed) return;
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += pieces[i].size();
  countDown(total);
  if (state_ == State::Tunnel)
    touchTunnel();
  else
    touchStream();
  if (state_ == State::Tunnel || out_framing_ != BodyFraming::Chunked) {
    write(pieces, n, std::move(done));
    return;
  }
  // One chunk for all of them.
  char header[24];
  const int h = std::snprintf(header, sizeof header, "%zx\r\n", total);
  writeAround(std::string_view(header, static_cast<size_t>(h)), pieces, n, "\r\n", std::move(done));
}

void DownstreamConnection::writeAround(std::string_view before, const std::string_view* pieces,
                                       size_t n, std::string_view after, upstream::Done done) {
  auto fill = [&](auto& all) {
    size_t k = 0;
    if (!before.empty()) all[k++] = before;
    for (size_t i = 0; i < n; ++i) all[k++] = pieces[i];
    if (!after.empty()) all[k++] = after;
    write(all.data(), k, std::move(done));
  };
  if (n + 2 <= kInlinePieces) {
    std::array<std::string_view, kInlinePieces> all;
    fill(all);
  } else {
    std::vector<std::string_view> all(n + 2);
    fill(all);
  }
}

void DownstreamConnection::onResponseHeadV(ResponseHead head, const std::string_view* pieces,
                                           size_t n, upstream::Done done) {
  hold_ = true;
  onResponseHead(std::move(head));
  hold_ = false;
  if (state_ == State::Closed) return;
  if (n > 0)
    onResponseDataV(pieces, n, std::move(done));  // takes held_ along
  else if (!held_.empty())
    write(nullptr, 0, nullptr);
}

void DownstreamConnection::onResponseEnd() {
  if (state_ == State::Closed) return;
  response_done_ = true;
  if (state_ == State::Tunnel) {
    H2G_LOG(Debug, id_, requests_, "destination half-closed the tunnel");
    shutdown_after_write_ = true;
    startAsyncWrite();
    maybeFinishTunnel();
    return;
  }
  if (out_framing_ == BodyFraming::Chunked) write({"0\r\n\r\n"}, nullptr);
  if (!request_done_) keep_alive_ = false;
  if (keep_alive_ && !draining_ && !app_eof_) return nextRequest();
  closeAfterWrites();
}

void DownstreamConnection::onFailed(int status, Result result, std::string reason) {
  if (state_ == State::Closed) return;
  tunnel_.reset();  // it already aborted itself
  if (canFallBack(result)) return fallBack(status, std::move(reason));
  if (!tried_.empty()) reason = tried_ + "; then " + routeName(info_.cluster) + ": " + reason;
  replyError(status, result, std::move(reason));
}

std::string DownstreamConnection::routeName(const std::string& cluster) {
  return cluster.empty() ? std::string("DIRECT") : "cluster '" + cluster + "'";
}

bool DownstreamConnection::canFallBack(Result result) const {
  if (info_.fallbacks.empty() || response_started_) return false;
  // Only what can be sent again exactly as it was: a tunnel (the app's bytes
  // wait in in_ until it opens) or a request without a body.
  if (!head_.is_connect && head_.framing != BodyFraming::None) return false;
  // The request never reached a proxy that could have acted on it.
  return result == Result::ConnectFailed || result == Result::ConnectTimeout ||
         result == Result::DnsFailed;
}

void DownstreamConnection::fallBack(int status, std::string reason) {
  std::string next = std::move(info_.fallbacks.front());
  info_.fallbacks.erase(info_.fallbacks.begin());
  H2G_LOG(Info, id_, requests_,
          head_.method << " " << head_.target << ": " << routeName(info_.cluster) << " failed ("
                       << status << ", " << reason << "); falling back to " << routeName(next));
  stats_.fallback(info_.cluster.empty() ? "direct" : info_.cluster, next.empty() ? "direct" : next);
  tried_ += (tried_.empty() ? "" : "; then ") + routeName(info_.cluster) + ": " + reason;
  info_.cluster = std::move(next);
  info_.protocol.clear();
  info_.upstream.clear();
  route_ = nullptr;
  // Not from inside the failed tunnel's callback, which may run inside its
  // open(). The connect_response_timeout keeps running from the first try.
  asio::post(socket_.get_executor(), [self = shared_from_this(), request = requests_] {
    if (self->state_ == State::Closed || self->requests_ != request || self->tunnel_) return;
    if (std::shared_ptr<upstream::Tunnel> t = self->makeTunnel()) self->startRequest(std::move(t));
  });
}

void DownstreamConnection::onReset(Result result, std::string reason) {
  if (state_ == State::Closed) return;
  H2G_LOG(Info, id_, requests_, head_.method << " " << head_.target << " broken: " << reason);
  tunnel_.reset();
  info_.result = result;
  info_.reason = std::move(reason);
  close(true);
}

void DownstreamConnection::maybeFinishTunnel() {
  if (state_ != State::Tunnel) return;
  if (request_done_ && response_done_) {
    closeAfterWrites();
  } else if (request_done_ || response_done_) {
    armHalfCloseTimer();
  }
}

void DownstreamConnection::nextRequest() {
  finishRequest();
  tunnel_.reset();
  // No current request: an error reply before the next head completes (408)
  // must not take the last request's response for its own.
  request_done_ = response_started_ = response_done_ = false;
  setState(State::ReadingHead);
  // A pipelined head already in in_ is timed as a head; else the wait is idle.
  idle_since_ = head_since_ = Clock::now();
  head_started_ = head_bytes_ = in_begin_ < in_end_;
  armTimer();
  process();  // a pipelined request may already be in in_
}

void DownstreamConnection::finishRequest() {
  if (!request_open_) return;
  request_open_ = false;
  if (request_counted_) {
    request_counted_ = false;
    route();  // publishes bytes taken before the protocol was known
    (head_.is_connect ? stats_.active_connect : stats_.active_forward).sub();
    // "none": the request ended before a route or protocol was chosen.
    const std::string cluster = !info_.cluster.empty()       ? info_.cluster
                                : info_.protocol == "direct" ? "direct"
                                                             : "none";
    stats_.finished(cluster, info_.protocol.empty() ? "none" : info_.protocol, head_.is_connect,
                    info_.result);
  }
  for (const auto& f : listener_.filters) f->onComplete(head_, info_);
}

bool DownstreamConnection::isPacRequest() const {
  if (!listener_.serve_pac || (head_.method != "GET" && head_.method != "HEAD")) return false;
  const std::string_view path = std::string_view(head_.target).substr(0, head_.target.find('?'));
  return path == filters::kPacPath;
}

void DownstreamConnection::replyPac() {
  H2G_LOG(Debug, id_, requests_, "serving the PAC file");
  info_.status = 200;
  response_started_ = true;
  keep_alive_ = false;
  const std::string head =
      "HTTP/1.1 200 OK\r\nContent-Type: " + std::string(filters::kPacContentType) +
      "\r\nContent-Length: " + std::to_string(listener_.pac.size()) +
      "\r\nConnection: close\r\n\r\n";
  write({head, head_.method == "HEAD" ? std::string_view() : listener_.pac}, nullptr);
  closeAfterWrites();
}

void DownstreamConnection::replyError(int status, Result result, std::string reason,
                                      log::Level level) {
  if (state_ == State::Closed) return;
  if (!request_open_) {
    // The head never completed: account the failure as a request of its own.
    beginRequest(RequestHead{});
  }
  if (log::enabled(level)) {
    std::ostringstream os;
    os << status << " for " << (head_.method.empty() ? "-" : head_.method) << " "
       << (head_.target.empty() ? "-" : head_.target) << ": " << reason;
    log::write(level, id_, requests_, os.str());
  }
  info_.status = status;
  info_.result = result;
  info_.reason = reason;
  stats_.errorReply(status);
  if (tunnel_) {
    tunnel_->abort();
    tunnel_.reset();
  }
  if (response_started_) {
    close(true);  // too late for an error response
    return;
  }
  response_started_ = true;
  keep_alive_ = false;
  write({http1::errorResponse(status, reason, /*close=*/true, info_.reply_headers)}, nullptr);
  closeAfterWrites();
}

void DownstreamConnection::drain() {
  draining_ = true;
  if (state_ == State::ReadingHead && !parser_->inHead() && in_begin_ == in_end_ && !request_open_)
    close(false);
}

void DownstreamConnection::forceClose() {
  if (state_ == State::Closed) return;
  if (request_open_) {
    info_.result = Result::Drained;
    info_.reason = "cut by shutdown after the drain timeout";
  }
  close(true);
}

void DownstreamConnection::write(const std::string_view* pieces, size_t n_pieces,
                                 upstream::Done done) {
  if (state_ == State::Closed || write_failed_) return;
  if (hold_) {
    for (size_t i = 0; i < n_pieces; ++i) held_.append(pieces[i]);
    if (done) done();  // copied
    return;
  }
  if (!held_.empty()) {
    // The held bytes first, in the same writev.
    const std::string held = std::move(held_);
    held_.clear();
    return writeAround(held, pieces, n_pieces, {}, std::move(done));
  }
  size_t total = 0;
  for (size_t i = 0; i < n_pieces; ++i) total += pieces[i].size();
  size_t written = 0;
  if (!writing_ && out_.empty()) {
    // Direct dispatch: the socket takes what it can now (one writev for all
    // pieces); only the rest is copied.
    asio::error_code ec;
    auto send = [&](auto& bufs) {  // unused entries stay empty
      for (size_t i = 0; i < n_pieces; ++i)
        bufs[i] = asio::buffer(pieces[i].data(), pieces[i].size());
      return socket_.write_some(bufs, ec);
    };
    if (n_pieces <= kInlinePieces) {
      std::array<asio::const_buffer, kInlinePieces> bufs{};
      written = send(bufs);
    } else {
      std::vector<asio::const_buffer> bufs(n_pieces);
      written = send(bufs);
    }
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      written = 0;
    } else if (ec) {
      write_failed_ = true;
      H2G_LOG(Debug, id_, requests_, "write to app failed: " << ec.message());
      if (request_open_ && info_.result == Result::Ok) {
        info_.result = Result::DownstreamReset;
        info_.reason = "app connection failed: " + ec.message();
      }
      asio::post(socket_.get_executor(), [self = shared_from_this()] { self->close(true); });
      return;
    }
    if (written > 0) tuner_->afterSend();
    if (written == total) {
      if (done) done();
      return;
    }
  }
  size_t skip = written;
  for (size_t i = 0; i < n_pieces; ++i) {
    const std::string_view p = pieces[i];
    if (skip >= p.size()) {
      skip -= p.size();
      continue;
    }
    out_.append(p.substr(skip));
    skip = 0;
  }
  out_total_ += total - written;
  if (done) out_waiters_.emplace_back(out_total_, std::move(done));
  startAsyncWrite();
}

void DownstreamConnection::startAsyncWrite() {
  if (writing_ || state_ == State::Closed) return;
  if (out_.empty()) {
    if (shutdown_after_write_) {
      shutdown_after_write_ = false;
      asio::error_code ec;
      socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
    }
    if (close_after_write_) close(false);
    return;
  }
  writing_ = true;
  in_flight_.swap(out_);
  out_.clear();
  asio::async_write(
      socket_, asio::buffer(in_flight_),
      [self = shared_from_this()](const asio::error_code& ec, size_t n) {
        self->writing_ = false;
        if (self->state_ == State::Closed) return;
        if (ec) {
          H2G_LOG(Debug, self->id_, self->requests_, "write to app failed: " << ec.message());
          if (self->request_open_ && self->info_.result == Result::Ok) {
            self->info_.result = Result::DownstreamReset;
            self->info_.reason = "app connection failed: " + ec.message();
          }
          self->close(true);
          return;
        }
        self->out_flushed_ += n;
        self->in_flight_.clear();
        // The app took bytes.
        if (self->state_ == State::Tunnel)
          self->touchTunnel();
        else
          self->touchStream();
        self->tuner_->afterSend();
        // Waiters are in queue order: run those now satisfied.
        size_t k = 0;
        while (k < self->out_waiters_.size() && self->out_waiters_[k].first <= self->out_flushed_)
          ++k;
        std::vector<std::pair<uint64_t, upstream::Done>> ready(
            std::make_move_iterator(self->out_waiters_.begin()),
            std::make_move_iterator(self->out_waiters_.begin() + static_cast<ptrdiff_t>(k)));
        self->out_waiters_.erase(self->out_waiters_.begin(),
                                 self->out_waiters_.begin() + static_cast<ptrdiff_t>(k));
        for (auto& [offset, d] : ready) {
          if (self->state_ == State::Closed) return;
          d();
        }
        self->startAsyncWrite();
      });
}

void DownstreamConnection::closeAfterWrites() {
  close_after_write_ = true;
  startAsyncWrite();
}

void DownstreamConnection::close(bool abortive) {
  if (state_ == State::Closed) return;
  if (request_open_ && info_.result == Result::Ok && !(response_done_ && request_done_) &&
      info_.status < 400 && state_ != State::ReadingHead) {
    info_.result = Result::DownstreamReset;
    if (info_.reason.empty()) info_.reason = "app connection closed before the request completed";
  }
  finishRequest();
  setState(State::Closed);
  if (tunnel_) {
    tunnel_->abort();
    tunnel_.reset();
  }
  out_waiters_.clear();
  asio::error_code ec;
  if (abortive) {
    socket_.set_option(asio::socket_base::linger(true, 0), ec);
    finalClose();
    return;
  }
  // Graceful: send our FIN, then read and drop whatever the app still sends
  // for a moment, so the kernel does not answer it with a RST that could
  // destroy the reply we just wrote.
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  linger_until_ = Clock::now() + kLingerTime;
  armTimer();
  lingerRead();
}

void DownstreamConnection::lingerRead() {
  if (reading_ || closed_for_good_) return;
  if (app_eof_) return finalClose();
  reading_ = true;
  if (!in_) in_.reset(new char[kReadSize]);
  socket_.async_read_some(asio::buffer(in_.get(), kReadSize),
                          [self = shared_from_this()](const asio::error_code& ec, size_t) {
                            self->reading_ = false;
                            if (ec) return self->finalClose();
                            self->lingerRead();
                          });
}

void DownstreamConnection::finalClose() {
  if (closed_for_good_) return;
  closed_for_good_ = true;
  if (connection_counted_) {
    connection_counted_ = false;
    stats_.connections_active.sub();
  }
  releaseSlot();
  asio::error_code ec;
  ++timer_generation_;  // a wait already completed must not act
  timer_expiry_ = Clock::time_point::max();
  timer_.cancel();
  socket_.close(ec);
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->on_close_(self->id_); });
}

}  // namespace h2gate::downstream
