#include "gateway/downstream/downstream_connection.h"

#include <cstdio>

#include "filters/served_pac.h"
#include "gateway/base/log.h"
#include "gateway/http1/codec.h"

namespace h2gate::downstream {
namespace {

// At most one "listener is at max_connections" line per listener this often.
constexpr auto kRefusalLogInterval = std::chrono::seconds(10);

}  // namespace

DownstreamConnection::DownstreamConnection(asio::ip::tcp::socket socket,
                                           const ListenerContext& listener, ListenerStats& stats,
                                           upstream::Router& router, uint64_t id,
                                           CloseHook on_close)
    : socket_(std::move(socket)),
      listener_(listener),
      stats_(stats),
      router_(router),
      id_(id),
      on_close_(std::move(on_close)),
      timer_(socket_.executor()) {}

DownstreamConnection::~DownstreamConnection() {
  // Counted from start() until the socket is closed for good.
  if (phase_ != Phase::New && phase_ != Phase::Gone) stats_.connections_active.sub();
  releaseSlot();
  H2G_LOG(Trace, id_, 0, "connection object destroyed");
}

ListenerStats::Route* DownstreamConnection::route() {
  if (route_ || info_.protocol.empty()) return route_;
  route_ = &stats_.route(info_.cluster.empty() ? std::string_view("direct") : info_.cluster,
                         info_.protocol);
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

void DownstreamConnection::moveTo(Phase to) {
  upstream::movePhase(kPhases, phase_, to, id_, requests_);
}
void DownstreamConnection::moveTo(Up to) {
  upstream::movePhase(kUp, up_, to, id_, requests_);
}
void DownstreamConnection::moveTo(Down to) {
  upstream::movePhase(kDown, down_, to, id_, requests_);
}

void DownstreamConnection::start() {
  socket_.start(weak_from_this(), listener_.send_buffer, id_);
  stats_.connections.add();
  stats_.connections_active.add();  // until onAppClosed() (or the destructor)
  parser_ = std::make_unique<http1::Parser>(http1::Parser::Kind::Request, listener_.limits);
  H2G_LOG(Debug, id_, 0, "accepted from " << socket_.peer() << " on listener " << listener_.name);
  net::ConnectionLimit& limit = *listener_.open_connections;
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
  head_since_ = Clock::now();
  moveTo(Phase::AwaitFirst);
  armTimer();
  socket_.read();
}

void DownstreamConnection::releaseSlot() {
  if (!slot_) return;
  slot_->release();
  slot_.reset();
}

void DownstreamConnection::onAppBytes() {
  if (phase_ == Phase::RequestBody) touchStream();
  if (phase_ == Phase::Idle) {
    // The first byte of the next head: request_headers_timeout from now.
    head_since_ = Clock::now();
    moveTo(Phase::Head);
    armTimer();
  } else if (phase_ == Phase::AwaitFirst) {
    moveTo(Phase::Head);  // timed from the accept already
  }
  process();
}

void DownstreamConnection::onAppError(const asio::error_code& ec, AppSocket::Failure what) {
  H2G_LOG(Debug, id_, requests_,
          (what == AppSocket::Failure::Read ? "read from app failed: " : "write to app failed: ")
              << ec.message());
  if (requestOpen() && info_.result == Result::Ok) {
    info_.result = Result::DownstreamReset;
    info_.reason = "app connection failed: " + ec.message();
  }
  if (what == AppSocket::Failure::WriteNow) {
    // Inside a write of ours: close once it has returned.
    asio::post(socket_.executor(), [self = shared_from_this()] { self->close(true); });
    return;
  }
  close(true);
}

void DownstreamConnection::onAppTook() {
  if (inTunnel())
    touchTunnel();
  else
    touchStream();
}

void DownstreamConnection::onAppWritesDone() {
  close(false);
}

void DownstreamConnection::onAppClosed() {
  stats_.connections_active.sub();
  moveTo(Phase::Gone);
  releaseSlot();
  ++timer_generation_;  // a wait already completed must not act
  timer_expiry_ = Clock::time_point::max();
  timer_.cancel();
  asio::post(socket_.executor(), [self = shared_from_this()] { self->on_close_(self->id_); });
}

void DownstreamConnection::process() {
  switch (phase_) {
    case Phase::AwaitFirst:
    case Phase::Idle:
    case Phase::Head: {
      if (socket_.buffered().empty()) {
        socket_.read();
        return;
      }
      http1::Event ev;
      do {
        // The first event may be the completion of the previous bodyless
        // request (the parser paused at its head): step over it.
        const std::string_view in = socket_.buffered();
        size_t used = 0;
        ev = parser_->feed(in.data(), in.size(), &used, &body_out_);
        socket_.consume(used);
      } while (ev == http1::Event::MessageComplete && !socket_.buffered().empty());
      body_out_.clear();
      if (ev == http1::Event::HeadComplete) return handleHead();
      if (ev == http1::Event::Error)
        return replyError(parser_->errorStatus(), Result::BadRequest, parser_->errorReason());
      socket_.read();  // everything was consumed
      return;
    }
    case Phase::RequestBody:
      return processBody();
    case Phase::Tunnel:
    case Phase::HalfClosed:
    case Phase::TunnelClosing:
      return pumpTunnel();
    case Phase::New:
    case Phase::Deciding:
    case Phase::Connecting:
    case Phase::AwaitResponse:
    case Phase::Refused:
    case Phase::Replying:
    case Phase::Closed:
    case Phase::Gone:
      return;  // bytes wait in the socket's buffer until the phase changes
  }
}

void DownstreamConnection::beginRequest(RequestHead head) {
  ++requests_;
  head_ = std::move(head);
  info_ = StreamInfo{};
  info_.connection_id = id_;
  info_.stream_id = requests_;
  info_.listener_name = listener_.name;
  info_.client = socket_.peer();
  info_.start = std::chrono::steady_clock::now();
  info_.start_wall = std::chrono::system_clock::now();
  route_ = nullptr;
  unrouted_up_ = 0;
  first_byte_ = false;
}

void DownstreamConnection::handleHead() {
  beginRequest(std::move(parser_->request()));
  moveTo(Phase::Deciding);
  body_out_.clear();
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
  std::string error;
  std::shared_ptr<upstream::Tunnel> tunnel = router_.route(info_, listener_.direct(), &error);
  if (!tunnel) return replyError(502, Result::ConnectFailed, std::move(error));
  if (expect_continue) socket_.write({"HTTP/1.1 100 Continue\r\n\r\n"}, nullptr);
  response_wait_since_ = Clock::now();  // connect_response_timeout from here
  touchStream();                        // and stream_idle_timeout
  startRequest(std::move(tunnel));
}

void DownstreamConnection::startRequest(std::shared_ptr<upstream::Tunnel> tunnel) {
  tunnel_ = std::move(tunnel);
  if (head_.is_connect) {
    moveTo(Phase::Connecting);
    armTimer();
    tunnel_->open(head_, info_, *this);
    return;
  }
  const bool has_body = head_.framing != BodyFraming::None;
  moveTo(has_body ? Phase::RequestBody : Phase::AwaitResponse);
  armTimer();
  tunnel_->open(head_, info_, *this);
  if (!tunnel_) return;  // failed at once
  if (has_body) {
    processBody();
  } else {
    moveTo(Up::Done);
    tunnel_->endOfRequest();
  }
}

void DownstreamConnection::processBody() {
  if (up_ == Up::Sending || phase_ != Phase::RequestBody) return;
  bool last = false;
  while (body_out_.empty() && !last) {
    // Fed even when nothing is buffered: a body of Content-Length: 0 ends
    // with no byte after the head.
    const std::string_view in = socket_.buffered();
    size_t used = 0;
    const http1::Event ev = parser_->feed(in.data(), in.size(), &used, &body_out_);
    socket_.consume(used);
    if (ev == http1::Event::NeedMore && in.empty()) {
      if (socket_.eof()) {
        info_.result = Result::DownstreamReset;
        info_.reason = "app closed the connection in the middle of the request body";
        close(true);
      } else {
        socket_.read();
      }
      return;
    }
    if (ev == http1::Event::Error) {
      if (down_ == Down::Awaiting)
        return replyError(400, Result::BadRequest, "bad request body: " + parser_->errorReason());
      info_.result = Result::BadRequest;
      info_.reason = "bad request body: " + parser_->errorReason();
      close(true);
      return;
    }
    if (ev == http1::Event::MessageComplete) last = true;
  }
  auto after = [self = shared_from_this(), last] {
    self->moveTo(Up::Open);
    self->body_out_.clear();
    if (self->phase_ != Phase::RequestBody) return;
    self->touchStream();  // the upstream took the chunk
    if (!last) return self->processBody();
    self->moveTo(Up::Done);
    self->response_wait_since_ = Clock::now();  // the whole request is up: a full wait
    self->moveTo(Phase::AwaitResponse);
    self->armTimer();
    self->tunnel_->endOfRequest();
  };
  if (body_out_.empty()) return after();
  moveTo(Up::Sending);
  // The upstream has connect_response_timeout to take this chunk.
  response_wait_since_ = Clock::now();
  armTimer();
  countUp(body_out_.size());
  tunnel_->send(body_out_, std::move(after));
}

void DownstreamConnection::pumpTunnel() {
  if (up_ == Up::Sending || !inTunnel()) return;
  if (const std::string_view bytes = socket_.buffered(); !bytes.empty()) {
    // Straight from the socket's buffer, which holds still until consumed.
    moveTo(Up::Sending);
    countUp(bytes.size());
    touchTunnel();
    tunnel_->send(bytes, [self = shared_from_this(), n = bytes.size()] {
      self->moveTo(Up::Open);
      self->socket_.consume(n);
      self->pumpTunnel();
    });
    return;
  }
  if (!socket_.eof()) return socket_.read();
  // The app's FIN goes on to the destination; the other direction may go
  // on. Not once the tunnel is closing: the upstream side is cancelled.
  if (up_ == Up::Open && phase_ != Phase::TunnelClosing) {
    moveTo(Up::Done);
    H2G_LOG(Debug, id_, requests_, "app half-closed the tunnel");
    tunnel_->endOfRequest();
  }
  maybeFinishTunnel();
}

void DownstreamConnection::onAppEof() {
  switch (phase_) {
    case Phase::AwaitFirst:
    case Phase::Idle:
    case Phase::Head:
      if (parser_->inHead() || !socket_.buffered().empty())
        H2G_LOG(Debug, id_, 0, "app closed in the middle of a request head");
      return close(false);
    case Phase::RequestBody:  // the body's reader and the tunnel's pump
    case Phase::Tunnel:       // see the end of the input themselves
    case Phase::HalfClosed:
    case Phase::TunnelClosing:
      return process();
    case Phase::Connecting:     // pumpTunnel() passes the FIN on once open
    case Phase::AwaitResponse:  // a half-close after the request is fine
    case Phase::Refused:
    case Phase::Replying:  // the answer goes out, then the close
      keep_alive_ = false;
      return;
    case Phase::New:
    case Phase::Deciding:
    case Phase::Closed:
    case Phase::Gone:
      return;
  }
}

void DownstreamConnection::onResponseHead(ResponseHead head) {
  if (closing()) return;
  info_.status = head.status;
  moveTo(Down::Started);
  touchStream();
  if (head_.is_connect && head.status / 100 == 2) {
    info_.status = 200;
    if (ListenerStats::Route* r = route())
      r->tunnel_setup.observe(std::chrono::steady_clock::now() - info_.start);
    H2G_LOG(Debug, id_, requests_, "tunnel to " << head_.authority() << " established");
    socket_.write({"HTTP/1.1 200 Connection established\r\n\r\n"}, nullptr);
    moveTo(Phase::Tunnel);
    touchTunnel();
    armTimer();  // tunnel_idle_timeout
    pumpTunnel();
    return;
  }
  if (head_.is_connect) {
    keep_alive_ = false;  // a refused CONNECT ends the connection
    moveTo(Phase::Refused);
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
  if (up_ != Up::Done) keep_alive_ = false;
  std::string out;
  http1::appendResponseHead(out, head, out_framing_, keep_alive_);
  socket_.write({out}, nullptr);
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
  if (closing()) return;
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += pieces[i].size();
  countDown(total);
  if (inTunnel())
    touchTunnel();
  else
    touchStream();
  if (inTunnel() || out_framing_ != BodyFraming::Chunked) {
    socket_.write(pieces, n, std::move(done));
    return;
  }
  // One chunk for all of them.
  char header[24];
  const int h = std::snprintf(header, sizeof header, "%zx\r\n", total);
  socket_.writeAround(std::string_view(header, static_cast<size_t>(h)), pieces, n, "\r\n",
                      std::move(done));
}

void DownstreamConnection::onResponseHeadV(ResponseHead head, const std::string_view* pieces,
                                           size_t n, upstream::Done done) {
  socket_.hold(true);
  onResponseHead(std::move(head));
  socket_.hold(false);
  if (closing()) return;
  if (n > 0)
    onResponseDataV(pieces, n, std::move(done));  // takes the held head along
  else
    socket_.flushHeld();
}

void DownstreamConnection::onResponseEnd() {
  if (closing()) return;
  moveTo(Down::Done);
  if (inTunnel()) {
    H2G_LOG(Debug, id_, requests_, "destination half-closed the tunnel");
    socket_.shutdownAfterWrites();
    maybeFinishTunnel();
    return;
  }
  if (out_framing_ == BodyFraming::Chunked) socket_.write({"0\r\n\r\n"}, nullptr);
  if (up_ != Up::Done) keep_alive_ = false;
  if (keep_alive_ && !draining_ && !socket_.eof()) return nextRequest();
  socket_.closeAfterWrites();
}

void DownstreamConnection::onFailed(int status, Result result, std::string reason) {
  if (closing()) return;
  tunnel_.reset();  // it already aborted itself
  replyError(status, result, std::move(reason));
}

void DownstreamConnection::onReset(Result result, std::string reason) {
  if (closing()) return;
  H2G_LOG(Info, id_, requests_, head_.method << " " << head_.target << " broken: " << reason);
  tunnel_.reset();
  info_.result = result;
  info_.reason = std::move(reason);
  close(true);
}

void DownstreamConnection::maybeFinishTunnel() {
  if (phase_ != Phase::Tunnel && phase_ != Phase::HalfClosed) return;
  if (up_ == Up::Done && down_ == Down::Done) {
    moveTo(Phase::TunnelClosing);
    socket_.closeAfterWrites();
  } else if (up_ == Up::Done || down_ == Down::Done) {
    armHalfCloseTimer();
  }
}

void DownstreamConnection::nextRequest() {
  finishRequest();
  tunnel_.reset();
  // No current request: an error reply before the next head completes (408)
  // must not take the last request's response for its own.
  moveTo(Up::Open);
  moveTo(Down::Awaiting);
  // A pipelined head already buffered is timed as a head; else the wait is idle.
  idle_since_ = head_since_ = Clock::now();
  moveTo(socket_.buffered().empty() ? Phase::Idle : Phase::Head);
  armTimer();
  process();  // a pipelined request may already be buffered
}

void DownstreamConnection::finishRequest() {
  // Once: the phase moves on right after (nextRequest(), close()).
  if (!requestOpen()) return;
  if (request_counted_) {
    request_counted_ = false;
    route();  // publishes bytes taken before the protocol was known
    (head_.is_connect ? stats_.active_connect : stats_.active_forward).sub();
    // "none": the request ended before a route or protocol was chosen.
    // (Every branch a string_view: a std::string one would make the
    // expression a temporary std::string that this view would outlive.)
    const std::string_view cluster = !info_.cluster.empty()       ? std::string_view(info_.cluster)
                                     : info_.protocol == "direct" ? std::string_view("direct")
                                                                  : std::string_view("none");
    stats_.finished(cluster, info_.protocol.empty() ? std::string_view("none") : info_.protocol,
                    head_.is_connect, info_.result);
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
  moveTo(Down::Started);
  keep_alive_ = false;
  moveTo(Phase::Replying);
  touchStream();
  const std::string head =
      "HTTP/1.1 200 OK\r\nContent-Type: " + std::string(filters::kPacContentType) +
      "\r\nContent-Length: " + std::to_string(listener_.pac.size()) +
      "\r\nConnection: close\r\n\r\n";
  socket_.write({head, head_.method == "HEAD" ? std::string_view() : listener_.pac}, nullptr);
  socket_.closeAfterWrites();
  if (phase_ == Phase::Replying) armTimer();  // stream_idle_timeout while the app reads it
}

void DownstreamConnection::replyError(int status, Result result, std::string reason,
                                      log::Level level) {
  if (closing()) return;
  if (!requestOpen()) {
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
  if (down_ != Down::Awaiting) {
    close(true);  // too late for an error response
    return;
  }
  moveTo(Down::Started);
  keep_alive_ = false;
  moveTo(Phase::Replying);
  touchStream();
  socket_.write({http1::errorResponse(status, reason, /*close=*/true, info_.reply_headers)},
                nullptr);
  socket_.closeAfterWrites();
  if (phase_ == Phase::Replying) armTimer();  // stream_idle_timeout while the app reads it
}

void DownstreamConnection::drain() {
  draining_ = true;
  if (readingHead() && !parser_->inHead() && socket_.buffered().empty()) close(false);
}

void DownstreamConnection::forceClose() {
  if (closing()) return;
  if (requestOpen()) {
    info_.result = Result::Drained;
    info_.reason = "cut by shutdown after the drain timeout";
  }
  close(true);
}

void DownstreamConnection::close(bool abortive) {
  if (closing()) return;
  // A tunnel a timeout closed, and h2gate's own answers, end normally.
  if (requestOpen() && info_.result == Result::Ok && !(up_ == Up::Done && down_ == Down::Done) &&
      info_.status < 400 && phase_ != Phase::TunnelClosing && phase_ != Phase::Replying) {
    info_.result = Result::DownstreamReset;
    if (info_.reason.empty()) info_.reason = "app connection closed before the request completed";
  }
  finishRequest();
  moveTo(Phase::Closed);
  if (tunnel_) {
    tunnel_->abort();
    tunnel_.reset();
  }
  socket_.close(abortive);  // then onAppClosed()
}

}  // namespace h2gate::downstream
