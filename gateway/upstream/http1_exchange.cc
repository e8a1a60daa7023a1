#include "gateway/upstream/http1_exchange.h"

#include <cstdio>
#include <memory>

#include "gateway/base/log.h"

namespace h2gate::upstream {
namespace {
constexpr size_t kHttp1ReadSize = 64 * 1024;
}

Http1Exchange::Http1Exchange(std::unique_ptr<Transport> transport, Kind kind,
                             std::string head_bytes, uint64_t conn_id, uint64_t stream_id,
                             Release release)
    : transport_(std::move(transport)),
      kind_(kind),
      conn_id_(conn_id),
      stream_id_(stream_id),
      release_(std::move(release)),
      send_(kind == Kind::ProxyConnect ? Send::Held : Send::Open),
      head_bytes_(std::move(head_bytes)) {}

void Http1Exchange::moveTo(Phase to) {
  movePhase(kPhases, phase_, to, conn_id_, stream_id_);
}

void Http1Exchange::moveTo(Send to) {
  movePhase(kSend, send_, to, conn_id_, stream_id_);
}

void Http1Exchange::setAuth(AuthHooks hooks) {
  auth_ = std::move(hooks);
  if (auth_.handshake) moveTo(Send::Negotiate);
}

void Http1Exchange::open(const RequestHead& head, StreamInfo& info, TunnelCallbacks& callbacks) {
  head_ = &head;
  info_ = &info;
  callbacks_ = &callbacks;
  // readNow() reads without blocking (TLS transports are non-blocking already).
  asio::error_code ec;
  transport_->socket().non_blocking(true, ec);
  if (kind_ != Kind::DirectConnect) {
    parser_ = std::make_unique<http1::Parser>(http1::Parser::Kind::Response, http1::Limits{});
    parser_->expectNoBody(head.method == "HEAD");
    parser_->expectConnectResponse(kind_ == Kind::ProxyConnect);
  }
  if (kind_ == Kind::DirectConnect) {
    moveTo(Phase::Tunnel);
    ResponseHead ok;
    ok.status = 200;
    ok.reason = "Connection established";
    callbacks_->onResponseHead(std::move(ok));
    if (ended()) return;  // the app let go
  }
  flush();
  readMore();
}

void Http1Exchange::send(std::string_view data, Done done) {
  pending_ = data;
  pending_done_ = std::move(done);
  flush();
}

void Http1Exchange::endOfRequest() {
  end_pending_ = true;
  flush();
}

// Writes, in order: the head, the pending buffer (chunk-framed when the
// request body is chunked), the end of the request. One write in flight.
void Http1Exchange::flush() {
  if (writing_ || ended()) return;
  std::vector<asio::const_buffer> bufs;
  const bool chunked = !head_->is_connect && head_->framing == BodyFraming::Chunked;
  bool with_data = false;
  bool with_end = false;
  const bool with_head = !head_bytes_.empty();
  if (with_head) {
    // Set aside while it is written: a head for the next authentication leg
    // may be queued in head_bytes_ before this write completes.
    head_in_flight_ = std::move(head_bytes_);
    head_bytes_.clear();
    bufs.push_back(asio::buffer(head_in_flight_));
  }
  // Tunnel bytes wait until the proxy said yes to the CONNECT; a body waits
  // while the proxy authenticates the connection (an NTLM negotiate leg, a
  // 407 being read before the next leg).
  const bool body_allowed =
      (send_ == Send::Open || send_ == Send::Body) && phase_ != Phase::AuthDrain;
  if (pending_done_ && body_allowed) {
    with_data = true;
    if (chunked && !pending_.empty()) {
      const int n =
          std::snprintf(chunk_header_.data(), chunk_header_.size(), "%zx\r\n", pending_.size());
      bufs.push_back(asio::buffer(chunk_header_.data(), static_cast<size_t>(n)));
      bufs.push_back(asio::buffer(pending_));
      bufs.push_back(asio::buffer("\r\n", 2));
    } else if (!pending_.empty()) {
      bufs.push_back(asio::buffer(pending_));
    }
  } else if (end_pending_ && body_allowed && !pending_done_) {
    with_end = true;
    if (chunked) bufs.push_back(asio::buffer("0\r\n\r\n", 5));
  }
  if (with_data) moveTo(Send::Body);
  if (bufs.empty()) {
    if (with_end) endSent();
    if (with_data) {
      Done d = std::move(pending_done_);
      pending_done_ = nullptr;
      pending_ = {};
      d();
    }
    return;
  }
  writing_ = true;
  transport_->asyncWrite(bufs, [self = shared_from_this(), with_head, with_data, with_end](
                                   const asio::error_code& ec, size_t) {
    self->writing_ = false;
    if (self->ended()) return;
    if (ec) {
      const std::string reason = "writing to " + self->info_->upstream + " failed: " + ec.message();
      if (!self->answered())
        self->failBeforeAnswer(Result::UpstreamReset, reason);
      else
        self->reset(Result::UpstreamReset, reason);
      return;
    }
    if (with_head) config::wipe(self->head_in_flight_);  // it may hold credentials
    if (with_end) self->endSent();
    if (with_data) {
      Done d = std::move(self->pending_done_);
      self->pending_done_ = nullptr;
      self->pending_ = {};
      d();  // may call send()/endOfRequest() again
    }
    self->flush();
  });
}

void Http1Exchange::endSent() {
  moveTo(send_ == Send::Body ? Send::Ended : Send::EndedEmpty);
  // A tunnel passes the app's FIN on; the other direction stays open.
  if (head_->is_connect) transport_->shutdownSend();
}

void Http1Exchange::readMore() {
  if (ended()) return;
  if (last_read_drained_) {
    // Nothing is waiting on the socket: wait for readability without a buffer.
    read_buf_.reset();
    transport_->asyncWaitReadable([self = shared_from_this()](const asio::error_code& ec) {
      if (self->ended()) return;
      if (ec) return self->onReadDone(ec, 0);
      self->readNow();
    });
    return;
  }
  if (!read_buf_) read_buf_ = std::make_unique_for_overwrite<char[]>(kHttp1ReadSize);
  transport_->asyncReadSome(asio::buffer(read_buf_.get(), kHttp1ReadSize),
                            [self = shared_from_this()](const asio::error_code& ec, size_t n) {
                              if (self->ended()) return;
                              self->onReadDone(ec, n);
                            });
}

void Http1Exchange::readNow() {
  if (!read_buf_) read_buf_ = std::make_unique_for_overwrite<char[]>(kHttp1ReadSize);
  asio::error_code ec;
  const size_t n = transport_->readSomeNow(asio::buffer(read_buf_.get(), kHttp1ReadSize), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) {
    // A spurious wake-up, or TLS records that carried no data (a session
    // ticket): wait again.
    last_read_drained_ = true;
    return readMore();
  }
  onReadDone(ec, n);
}

void Http1Exchange::onReadDone(const asio::error_code& ec, size_t n) {
  if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) return onEof();
  if (ec) {
    const std::string reason = "reading from " + info_->upstream + " failed: " + ec.message();
    if (!answered())
      failBeforeAnswer(Result::UpstreamReset, reason);
    else
      reset(Result::UpstreamReset, reason);
    return;
  }
  // A short read found the socket empty (a TLS read returns one record:
  // then only if nothing more is buffered).
  last_read_drained_ = n < kHttp1ReadSize && !transport_->hasBufferedInput();
  onRead(n);
}

void Http1Exchange::relay(size_t offset, size_t n) {
  if (offset >= n) return readMore();
  callbacks_->onResponseData(std::string_view(read_buf_.get() + offset, n - offset),
                             [self = shared_from_this()] { self->readMore(); });
}

void Http1Exchange::onRead(size_t n) {
  if (n > 0 && phase_ == Phase::Awaiting) moveTo(Phase::Answering);
  if (tunnel()) return relay(0, n);
  body_.clear();
  size_t off = 0;
  bool message_done = false;
  for (;;) {
    size_t used = 0;
    const http1::Event ev = parser_->feed(read_buf_.get() + off, n - off, &used, &body_);
    off += used;
    if (ev == http1::Event::HeadComplete) {
      const ResponseHead& r = parser_->response();
      if (r.status >= 100 && r.status < 200) {
        // Interim responses (100 Continue…) are ours to swallow: the app got
        // its own 100 Continue from h2gate.
        moveTo(Phase::Interim);
        continue;
      }
      if (auth_.on_response) {
        auth::Verdict v = auth_.on_response(r, !bodyStarted(), r.keep_alive);
        if (v.kind == auth::Verdict::Kind::Retry) {
          H2G_LOG(Debug, conn_id_, stream_id_,
                  "proxy " << info_->upstream << " wants authentication: queued again with it");
          abort();  // closes the connection; the hook queues the request again
          return;
        }
        if (v.kind == auth::Verdict::Kind::Fail) {
          fail(502, Result::ConnectFailed, v.reason);
          return;
        }
        if (v.kind == auth::Verdict::Kind::Continue) {
          // The 407's body is read and dropped, then the next leg goes out:
          // with its body held again for a negotiate leg. A request that
          // went whole (no body) has nothing more to hold.
          moveTo(Phase::AuthDrain);
          if (!requestEnded()) moveTo(v.handshake ? Send::Negotiate : openOrHeld());
          next_head_ = auth_.head(v.authorization, v.handshake);
          body_.clear();
          continue;
        }
        if (v.connection_authenticated) transport_->markAuthenticated();
        auth_.on_response = nullptr;
      }
      error_answer_ = bodyStarted() && r.status >= 400;
      if (kind_ == Kind::ProxyConnect && r.status / 100 == 2) {
        H2G_LOG(Debug, conn_id_, stream_id_,
                "proxy " << info_->upstream << " opened the tunnel: " << r.status);
        moveTo(Phase::Tunnel);
        if (send_ == Send::Held) moveTo(Send::Open);
        ResponseHead ok = r;
        callbacks_->onResponseHead(std::move(ok));
        if (ended()) return;  // the app let go
        flush();              // tunnel bytes the app sent early
        return relay(off, n);
      }
      moveTo(Phase::Body);
      callbacks_->onResponseHead(r);
      if (ended()) return;
    } else if (ev == http1::Event::MessageComplete) {
      if (phase_ == Phase::Interim) {
        moveTo(Phase::Answering);
        continue;
      }
      if (phase_ == Phase::AuthDrain) {
        body_.clear();
        nextLeg();
        if (ended()) return;
        continue;  // what else came is the start of the next answer
      }
      message_done = true;
      break;
    } else if (ev == http1::Event::Error) {
      const std::string reason =
          "bad response from " + info_->upstream + ": " + parser_->errorReason();
      if (!answered())
        fail(502, Result::UpstreamReset, reason);
      else
        reset(Result::UpstreamReset, reason);
      return;
    } else if (off >= n) {
      break;  // NeedMore / Body with everything consumed
    }
  }
  if (phase_ == Phase::AuthDrain) {
    body_.clear();
    return readMore();
  }
  deliverBody(message_done);
}

void Http1Exchange::nextLeg() {
  moveTo(Phase::Answering);
  parser_ = std::make_unique<http1::Parser>(http1::Parser::Kind::Response, http1::Limits{});
  parser_->expectNoBody(head_->method == "HEAD");
  parser_->expectConnectResponse(kind_ == Kind::ProxyConnect);
  head_bytes_ = std::move(next_head_);
  config::wipe(next_head_);
  flush();
}

void Http1Exchange::deliverBody(bool message_done) {
  if (message_done) moveTo(Phase::Complete);
  auto after = [self = shared_from_this(), message_done] {
    if (self->ended()) return;
    if (message_done)
      self->finishExchange();
    else
      self->readMore();
  };
  if (body_.empty()) return after();
  callbacks_->onResponseData(body_, std::move(after));
}

void Http1Exchange::finishExchange() {
  TunnelCallbacks* cb = callbacks_;
  callbacks_ = nullptr;
  // Reusable only if both messages completed cleanly on a keep-alive
  // connection (see Release).
  // A CONNECT the proxy refused was all sent with its head.
  const bool complete =
      !writing_ && (requestEnded() || (kind_ == Kind::ProxyConnect && head_bytes_.empty()));
  const bool reusable = release_ && parser_ && parser_->keepAlive() && complete && !error_answer_;
  if (reusable) {
    moveTo(Phase::Kept);
    released(std::move(transport_), Http1Close::Response);
  } else {
    moveTo(Phase::Closed);
    const Http1Close why = !complete       ? Http1Close::Incomplete
                           : error_answer_ ? Http1Close::ErrorAnswer
                                           : Http1Close::Response;
    if (release_ && why != Http1Close::Response)
      H2G_LOG(Debug, conn_id_, stream_id_,
              "connection to " << info_->upstream << " not kept: "
                               << (why == Http1Close::ErrorAnswer
                                       ? "an error status answered the request body (the proxy "
                                         "may not have read all of it)"
                                       : "the request was not completely sent"));
    transport_->close();
    released(nullptr, why);
  }
  cb->onResponseEnd();
}

void Http1Exchange::onEof() {
  if (tunnel()) {
    // The far end finished sending; the app's direction may go on.
    moveTo(Phase::TunnelEnded);
    if (callbacks_) callbacks_->onResponseEnd();
    return;
  }
  body_.clear();
  if (phase_ == Phase::AuthDrain)
    return fail(502, Result::UpstreamReset,
                info_->upstream +
                    " closed the connection during the authentication handshake (NTLM needs it "
                    "kept open)");
  const http1::Event ev = parser_->finish();
  if (ev == http1::Event::MessageComplete && answered()) return deliverBody(true);
  const std::string reason =
      info_->upstream + " closed the connection " +
      (answered() ? "before the response was complete" : "without sending a response");
  if (!answered())
    failBeforeAnswer(Result::UpstreamReset, reason);
  else
    reset(Result::UpstreamReset, reason);
}

void Http1Exchange::failBeforeAnswer(Result result, const std::string& why) {
  if (retry_ && phase_ == Phase::Awaiting && !bodyStarted()) {
    H2G_LOG(Debug, conn_id_, stream_id_,
            "kept-alive connection to " << info_->upstream << " ended before an answer (" << why
                                        << "): the request goes again on a new connection");
    std::function<void()> retry = std::move(retry_);
    retry_ = nullptr;
    callbacks_ = nullptr;
    pending_done_ = nullptr;
    if (!ended()) {
      moveTo(Phase::Closed);
      transport_->close();
      released(nullptr, Http1Close::ProxyClosedIdle);
    }
    retry();
    return;
  }
  fail(502, result, why);
}

void Http1Exchange::fail(int status, Result result, std::string reason) {
  H2G_LOG(Debug, conn_id_, stream_id_, "http/1.1 exchange failed: " << reason);
  TunnelCallbacks* cb = callbacks_;
  abort();
  if (cb) cb->onFailed(status, result, std::move(reason));
}

void Http1Exchange::reset(Result result, std::string reason) {
  H2G_LOG(Debug, conn_id_, stream_id_, "http/1.1 exchange broken: " << reason);
  TunnelCallbacks* cb = callbacks_;
  abort();
  if (cb) cb->onReset(result, std::move(reason));
}

void Http1Exchange::abort() {
  callbacks_ = nullptr;
  pending_done_ = nullptr;
  if (ended()) return;
  if (transport_) transport_->close();
  close();
}

void Http1Exchange::close() {
  const Http1Close why = closeReason();
  moveTo(Phase::Closed);
  released(nullptr, why);
}

Http1Close Http1Exchange::closeReason() const {
  return tunnel() && kind_ == Kind::ProxyConnect ? Http1Close::Tunnel : Http1Close::Incomplete;
}

void Http1Exchange::released(std::unique_ptr<Transport> transport, Http1Close why) {
  if (!release_) return;
  Release r = std::move(release_);
  release_ = nullptr;
  r(std::move(transport), why);
}

Http1Exchange::~Http1Exchange() {
  config::wipe(head_bytes_);
  config::wipe(head_in_flight_);
  config::wipe(next_head_);
  if (!ended()) close();
}

}  // namespace h2gate::upstream
