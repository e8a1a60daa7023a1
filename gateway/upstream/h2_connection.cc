#include "gateway/upstream/h2_connection.h"

#include <charconv>
#include <cstring>
#include <random>
#include <sstream>

#include "gateway/base/log.h"
#include "gateway/upstream/proxy_request.h"

namespace h2gate::upstream {
namespace {

// One read gathers every TLS record already there, up to this much, so the
// DATA of a stream reaches its app in few large writes.
constexpr size_t kH2ReadSize = 256 * 1024;
constexpr size_t kMaxWriteBatch = 256 * 1024;
// SO_SNDBUF is sampled for its gauge at most this often.
constexpr auto kSendBufferSampleInterval = std::chrono::seconds(1);

// "5s", "0.25s": a duration for messages.
std::string seconds(config::Duration d) {
  std::ostringstream out;
  out << std::chrono::duration<double>(d).count() << "s";
  return out.str();
}

nghttp2_nv makeNv(const std::string& name, const std::string& value, uint8_t flags = 0) {
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                    value.size(), static_cast<uint8_t>(NGHTTP2_NV_FLAG_NONE | flags)};
}

}  // namespace

// ---------------------------------------------------------------------------
// H2Connection

H2Connection::H2Connection(std::unique_ptr<Transport> transport, const config::Cluster& cluster,
                           uint64_t id, std::string peer, Owner* owner,
                           std::shared_ptr<EndpointStats> stats)
    : transport_(std::move(transport)),
      cluster_(cluster),
      id_(id),
      peer_(std::move(peer)),
      owner_(owner),
      write_error_timer_(transport_->socket().get_executor()),
      stats_(std::move(stats)),
      gauges_(*stats_),
      ping_timer_(transport_->socket().get_executor()),
      ping_deadline_(transport_->socket().get_executor()) {}

void H2Connection::moveTo(Session to) {
  movePhase(kSession, session_phase_, to, id_, 0);
}
void H2Connection::moveTo(Ping to) {
  movePhase(kPing, ping_, to, id_, 0);
}
void H2Connection::moveTo(Input to) {
  movePhase(kInput, input_, to, id_, 0);
}
void H2Connection::moveTo(Output to) {
  movePhase(kOutput, output_, to, id_, 0);
}

H2Connection::~H2Connection() {
  if (counted()) {
    stats_->h2_active.sub();
    stats_->streams.sub(static_cast<int64_t>(streams_.size()));
  }
  if (session_) nghttp2_session_del(session_);
}

std::string H2Connection::start() {
  nghttp2_session_callbacks* cbs;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, &H2Connection::onBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(cbs, &H2Connection::onHeader);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, &H2Connection::onFrameRecv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &H2Connection::onDataChunkRecv);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &H2Connection::onStreamClose);
  nghttp2_session_callbacks_set_send_data_callback(cbs, &H2Connection::onSendData);
  nghttp2_option* opt;
  nghttp2_option_new(&opt);
  // The window is given back by consume() once the app took the bytes.
  nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_option_set_peer_max_concurrent_streams(opt, cluster_.http2.max_concurrent_streams);
  const int rv = nghttp2_session_client_new2(&session_, cbs, this, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cbs);
  if (rv != 0) return std::string("nghttp2_session_client_new2: ") + nghttp2_strerror(rv);

  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, cluster_.http2.initial_stream_window_size},
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100},
  };
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  nghttp2_session_set_local_window_size(
      session_, NGHTTP2_FLAG_NONE, 0,
      static_cast<int32_t>(cluster_.http2.initial_connection_window_size));
  read_buf_.resize(kH2ReadSize);
  // Many tunnels' bulk data: one recv takes up to kH2ReadSize of TLS records.
  transport_->keepBuffers(kH2ReadSize);
  // onRead takes the records already there without waiting (readSomeNow).
  asio::error_code nb_ec;
  transport_->socket().non_blocking(true, nb_ec);
  if (nb_ec) return "making the proxy socket non-blocking: " + nb_ec.message();
  H2G_LOG(Info, id_, 0,
          "h2 connection to proxy " << peer_ << " (cluster " << cluster_.name << ") established");
  moveTo(Session::Starting);
  stats_->h2_active.add();
  stats_->h2_opened.add();
  sampleSendBuffer();
  last_read_ = std::chrono::steady_clock::now();
  const auto& ka = cluster_.http2.connection_keepalive;
  sendPing(ka ? std::optional(ka->timeout) : std::nullopt);
  scheduleKeepalive();
  flush();
  readMore();
  return {};
}

void H2Connection::sendPing(std::optional<config::Duration> deadline) {
  if (closed()) return;
  const auto now = std::chrono::steady_clock::now();
  if (ping_ == Ping::None) {
    uint8_t opaque[8];
    const uint64_t seq = ++ping_seq_;
    std::memcpy(opaque, &seq, sizeof opaque);
    if (nghttp2_submit_ping(session_, NGHTTP2_FLAG_NONE, opaque) != 0) return;
    moveTo(Ping::Out);
    ping_sent_ = now;
  }
  if (!deadline) return;
  // The earliest deadline wins (a probe may shorten a keepalive's).
  const auto at = now + *deadline;
  if (ping_deadline_at_ > now && ping_deadline_at_ <= at) return;
  ping_deadline_at_ = at;
  ping_deadline_.expires_at(at);
  ping_deadline_.async_wait([weak = weak_from_this(), d = *deadline](const asio::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || self->ping_ == Ping::None) return;
    H2G_LOG(Warn, self->id_, 0,
            "proxy " << self->peer_ << " did not answer a PING within " << seconds(d));
    self->close("no answer to PING within " + seconds(d) + ": connection presumed dead");
  });
}

void H2Connection::scheduleKeepalive() {
  const auto& ka = cluster_.http2.connection_keepalive;
  if (closed() || !ka) return;
  // ±15% jitter, so many connections (and many sidecars) do not PING in step.
  static thread_local std::minstd_rand rng(std::random_device{}());
  const double f = std::uniform_real_distribution<double>(0.85, 1.15)(rng);
  const auto wait = std::chrono::duration_cast<config::Duration>(ka->interval * f);
  ping_timer_.expires_after(wait);
  ping_timer_.async_wait([weak = weak_from_this()](const asio::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || self->closed()) return;
    self->sendPing(self->cluster_.http2.connection_keepalive->timeout);
    self->flush();
    self->scheduleKeepalive();
  });
}

bool H2Connection::idleTooLong() const {
  const auto& ka = cluster_.http2.connection_keepalive;
  return ka && ping_ != Ping::Probe && std::chrono::steady_clock::now() - last_read_ > ka->interval;
}

void H2Connection::probe(config::Duration timeout) {
  if (closed()) return;
  H2G_LOG(Debug, id_, 0, "confirming the connection to " << peer_ << " with a PING");
  sendPing(timeout);
  if (ping_ != Ping::None) moveTo(Ping::Probe);  // its answer lets new streams in
  flush();
}

void H2Connection::onPingAck(const uint8_t* opaque) {
  uint64_t seq = 0;
  std::memcpy(&seq, opaque, sizeof seq);
  if (ping_ == Ping::None || seq != ping_seq_) return;  // not ours, or stale
  const bool probe = ping_ == Ping::Probe;
  moveTo(Ping::None);
  ping_deadline_.cancel();
  ping_deadline_at_ = {};
  const auto rtt = std::chrono::steady_clock::now() - ping_sent_;
  stats_->ping_rtt.observe(rtt);
  gauges_.pingRtt(rtt);
  const double ms = std::chrono::duration<double, std::milli>(rtt).count();
  H2G_LOG(Trace, id_, 0, "PING round trip to " << peer_ << ": " << ms << " ms");
  if (probe && owner_) owner_->onCapacityChanged(*this);
}

void H2Connection::sampleSendBuffer() {
  sndbuf_sampled_ = std::chrono::steady_clock::now();
  asio::socket_base::send_buffer_size size;
  asio::error_code ec;
  transport_->socket().get_option(size, ec);
  if (!ec) gauges_.sendBuffer(size.value());
}

void H2Connection::forget(int32_t stream_id) {
  if (streams_.erase(stream_id) > 0) stats_->streams.sub();
}

void H2Connection::markUploadStalls() {
  // Called when nghttp2 has nothing to send: any stream still holding app
  // bytes waits for the proxy's WINDOW_UPDATE (stream or connection).
  for (size_t i = 0; i < uploads_pending_.size();) {
    auto it = streams_.find(uploads_pending_[i]);
    if (it == streams_.end() || !it->second->hasPendingUpload()) {
      if (it != streams_.end()) it->second->upload_listed_ = false;
      uploads_pending_[i] = uploads_pending_.back();
      uploads_pending_.pop_back();
      continue;
    }
    it->second->setUploadStalled(true);
    ++i;
  }
}

bool H2Connection::acceptsStreams() const {
  if ((session_phase_ != Session::Starting && session_phase_ != Session::Ready) ||
      ping_ == Ping::Probe)
    return false;
  const uint32_t peer_limit =
      nghttp2_session_get_remote_settings(session_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
  const uint32_t limit = std::min(peer_limit, cluster_.http2.max_concurrent_streams);
  return streams_.size() < limit;
}

H2Stream* H2Connection::streamOf(int32_t stream_id) const {
  return static_cast<H2Stream*>(nghttp2_session_get_stream_user_data(session_, stream_id));
}

int32_t H2Connection::submit(H2Stream* stream, const std::vector<nghttp2_nv>& nva, bool with_body) {
  if (closed()) return NGHTTP2_ERR_INVALID_STATE;
  nghttp2_data_provider provider{};
  provider.source.ptr = nullptr;  // looked up by stream user data: see readData
  provider.read_callback = &H2Connection::readData;
  const int32_t id = nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(),
                                            with_body ? &provider : nullptr, stream);
  if (id > 0 && streams_.emplace(id, stream).second) stats_->streams.add();
  return id;
}

void H2Connection::resumeData(int32_t stream_id) {
  if (closed()) return;
  nghttp2_session_resume_data(session_, stream_id);
  flush();
}

void H2Connection::consume(int32_t stream_id, size_t n) {
  if (closed() || n == 0) return;
  // For a stream that is already gone this returns only the connection
  // window, which is exactly what must not leak.
  if (nghttp2_session_consume(session_, stream_id, n) != 0)
    nghttp2_session_consume_connection(session_, n);
  flush();
}

void H2Connection::resetStream(int32_t stream_id, uint32_t error_code) {
  if (closed()) return;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream_id, error_code);
  flush();
}

void H2Connection::detach(int32_t stream_id) {
  if (closed()) return;
  nghttp2_session_set_stream_user_data(session_, stream_id, nullptr);
  forget(stream_id);
}

void H2Connection::readMore() {
  if (closed()) return;
  moveTo(Input::Reading);
  transport_->asyncReadSome(
      asio::buffer(read_buf_),
      [self = shared_from_this()](const asio::error_code& ec, size_t n) { self->onRead(ec, n); });
}

void H2Connection::onRead(const asio::error_code& ec, size_t n) {
  if (closed()) return;
  if (ec) {
    std::string why = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated
                          ? "proxy closed the connection"
                      : ec.category() == asio::error::get_ssl_category()
                          ? "TLS error from proxy: " + ec.message()
                          : "reading from proxy failed: " + ec.message();
    if (!write_error_.empty()) why += " (writing: " + write_error_ + ")";
    // A plain close (EOF) is not a failure by itself; a reset or TLS error
    // is, and so is a close before HTTP/2 even started (e.g. a rejected
    // client certificate).
    const bool plain = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
    close(why, !plain || !established());
    return;
  }
  auto self = shared_from_this();  // callbacks may drop the pool's reference
  last_read_ = std::chrono::steady_clock::now();
  // Take the records that have already arrived too (the socket is
  // non-blocking): one mem_recv, and one write per stream to its app.
  asio::error_code more_ec;
  while (read_buf_.size() - n >= 16 * 1024) {
    const size_t m =
        transport_->readSomeNow(asio::buffer(read_buf_.data() + n, read_buf_.size() - n), more_ec);
    if (more_ec || m == 0) break;
    n += m;
  }
  moveTo(Input::Receiving);
  const ssize_t rv = nghttp2_session_mem_recv(session_, read_buf_.data(), n);
  if (rv < 0) {
    batched_.clear();
    close(std::string("HTTP/2 error from proxy: ") + nghttp2_strerror(static_cast<int>(rv)));
    return;
  }
  if (!closed()) moveTo(Input::Delivering);
  deliverBatched();  // before read_buf_ is reused
  if (closed()) return;
  flushNow();
  if (more_ec && more_ec != asio::error::would_block && more_ec != asio::error::try_again)
    return onRead(more_ec, 0);  // EOF or an error behind the data: as from a read
  readMore();
}

void H2Connection::deliverBatched() {
  std::vector<std::weak_ptr<H2Stream>> streams;
  streams.swap(batched_);
  for (auto& w : streams)
    if (auto s = w.lock()) s->deliverBatch();
}

void H2Connection::flush() {
  if (receiving()) return;  // onRead flushes after mem_recv
  // A write in flight flushes again when it completes. Otherwise once, after
  // whatever else is ready now ran: the frames of all the streams that
  // acted meanwhile go out in one TLS write, and the proxy reads them at once.
  if (output_ != Output::Idle || closed()) return;
  moveTo(Output::Posted);
  asio::post(executor(), [self = shared_from_this()] {
    if (self->output_ == Output::Posted) self->moveTo(Output::Idle);
    self->flushNow();
  });
}

void H2Connection::flushNow() {
  phaseRule(!receiving(), kInput.machine, "frames packed inside nghttp2_session_mem_recv", id_, 0);
  phaseRule(output_ != Output::Packing, kOutput.machine,
            "frames packed inside nghttp2_session_mem_send", id_, 0);
  if (output_ == Output::Writing || output_ == Output::Packing || closed()) return;
  moveTo(Output::Packing);
  out_.clear();
  // Frames, and DATA straight from the apps' buffers (onSendData), up to
  // kMaxWriteBatch bytes: one TLS write.
  send_paused_ = false;
  while (out_.size() < kMaxWriteBatch) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) {
      moveTo(Output::Idle);
      close(std::string("HTTP/2 send error: ") + nghttp2_strerror(static_cast<int>(n)));
      return;
    }
    if (n == 0) {
      if (!send_paused_ && !uploads_pending_.empty()) markUploadStalls();
      break;
    }
    out_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
  }
  if (out_.empty()) {
    moveTo(Output::Idle);
    if (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_))
      close("HTTP/2 session finished", /*failed=*/false);
    return;
  }
  moveTo(Output::Writing);
  transport_->asyncWrite(
      asio::buffer(out_), [self = shared_from_this()](const asio::error_code& ec, size_t) {
        self->moveTo(Output::Idle);
        if (self->closed()) return;
        if (ec) {
          self->onWriteError(ec);
          return;
        }
        if (std::chrono::steady_clock::now() - self->sndbuf_sampled_ >= kSendBufferSampleInterval)
          self->sampleSendBuffer();
        self->flushNow();
      });
}

void H2Connection::onWriteError(const asio::error_code& ec) {
  write_error_ = ec.message();
  if (established()) return close("writing to proxy failed: " + write_error_);
  // Before the proxy's first SETTINGS a failed write usually means the
  // proxy dropped us right after the handshake (with TLS 1.3, a rejected
  // client certificate shows up only now): the pending read carries its
  // alert, which says why far better than EPIPE. Give it a moment.
  write_error_timer_.expires_after(std::chrono::seconds(2));
  write_error_timer_.async_wait([self = shared_from_this()](const asio::error_code& e) {
    if (!e) self->close("writing to proxy failed: " + self->write_error_);
  });
}

void H2Connection::close(const std::string& reason, bool failed) {
  if (closed()) return;
  const bool established = this->established();
  const bool counted = this->counted();
  moveTo(Session::Closed);
  if (input_ != Input::Idle) moveTo(Input::Idle);
  write_error_timer_.cancel();
  ping_timer_.cancel();
  ping_deadline_.cancel();
  auto self = shared_from_this();
  const std::string why =
      established ? reason : "proxy closed the connection before HTTP/2 started: " + reason;
  H2G_LOG(Info, id_, 0, "h2 connection to proxy " << peer_ << " closed: " << why);
  // Streams learn first (they may still be in the table), then the pool.
  auto streams = streams_;
  streams_.clear();
  if (counted) {
    stats_->h2_active.sub();
    stats_->streams.sub(static_cast<int64_t>(streams.size()));
  }
  for (auto& [id, s] : streams) s->onConnectionClosed(why, established);
  transport_->close();
  if (owner_) owner_->onConnectionClosed(*this, why, failed);
}

int H2Connection::onBeginHeaders(nghttp2_session*, const nghttp2_frame*, void*) {
  return 0;
}

int H2Connection::onHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                           size_t namelen, const uint8_t* value, size_t valuelen, uint8_t,
                           void* user) {
  auto* c = static_cast<H2Connection*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  if (H2Stream* s = c->streamOf(frame->hd.stream_id))
    s->onHeader(std::string_view(reinterpret_cast<const char*>(name), namelen),
                std::string_view(reinterpret_cast<const char*>(value), valuelen));
  return 0;
}

int H2Connection::onFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto* c = static_cast<H2Connection*>(user);
  switch (frame->hd.type) {
    case NGHTTP2_HEADERS: {
      H2Stream* s = c->streamOf(frame->hd.stream_id);
      if (!s) break;
      const bool end = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;
      // nghttp2 files the final response after a 1xx under HCAT_HEADERS,
      // as it does trailers.
      if (frame->headers.cat == NGHTTP2_HCAT_RESPONSE ||
          (frame->headers.cat == NGHTTP2_HCAT_HEADERS && s->awaitsFinalHead()))
        s->onHeadersDone(end);
      // Trailers end the stream too (their fields are dropped). Look the
      // stream up again: the app side may have let go of it meanwhile.
      if (end)
        if (H2Stream* again = c->streamOf(frame->hd.stream_id)) again->onEndStream();
      break;
    }
    case NGHTTP2_DATA:
      if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
        if (H2Stream* s = c->streamOf(frame->hd.stream_id)) s->onEndStream();
      break;
    case NGHTTP2_SETTINGS:
      if (!(frame->hd.flags & NGHTTP2_FLAG_ACK) && c->session_phase_ == Session::Starting)
        c->moveTo(Session::Ready);
      if (c->owner_) c->owner_->onCapacityChanged(*c);
      break;
    case NGHTTP2_PING:
      if (frame->hd.flags & NGHTTP2_FLAG_ACK) c->onPingAck(frame->ping.opaque_data);
      break;
    case NGHTTP2_GOAWAY:
      c->moveTo(Session::Draining);
      c->stats_->goaways.add();
      H2G_LOG(Info, c->id_, 0,
              "GOAWAY from proxy " << c->peer_ << ": last stream " << frame->goaway.last_stream_id
                                   << ", error " << nghttp2_http2_strerror(frame->goaway.error_code)
                                   << "; new requests go to another connection");
      if (c->owner_) c->owner_->onCapacityChanged(*c);
      break;
    default:
      break;
  }
  return 0;
}

int H2Connection::onDataChunkRecv(nghttp2_session* session, uint8_t, int32_t stream_id,
                                  const uint8_t* data, size_t len, void* user) {
  auto* c = static_cast<H2Connection*>(user);
  if (H2Stream* s = c->streamOf(stream_id)) {
    s->onData(data, len);
  } else {
    // Nobody wants these bytes any more: give the window back at once.
    nghttp2_session_consume(session, stream_id, len);
  }
  return 0;
}

int H2Connection::onStreamClose(nghttp2_session*, int32_t stream_id, uint32_t error_code,
                                void* user) {
  auto* c = static_cast<H2Connection*>(user);
  H2Stream* s = c->streamOf(stream_id);
  c->forget(stream_id);
  if (s) s->onClose(error_code);
  if (c->owner_) c->owner_->onCapacityChanged(*c);
  return 0;
}

int H2Connection::onSendData(nghttp2_session*, nghttp2_frame* frame, const uint8_t* framehd,
                             size_t length, nghttp2_data_source*, void* user) {
  auto* c = static_cast<H2Connection*>(user);
  H2Stream* s = c->streamOf(frame->hd.stream_id);
  // readData() saw the stream a moment ago, in this same mem_send.
  if (!s) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // nghttp2 resets the stream
  c->out_.append(reinterpret_cast<const char*>(framehd), 9);
  const size_t padlen = frame->data.padlen;  // 0: we never pad, but follow the contract
  if (padlen > 0) c->out_.push_back(static_cast<char>(padlen - 1));
  s->takePending(length, c->out_);
  if (padlen > 1) c->out_.append(padlen - 1, '\0');
  if (c->out_.size() < kMaxWriteBatch) return 0;
  c->send_paused_ = true;  // a full batch: mem_send stops here
  return NGHTTP2_ERR_PAUSE;
}

ssize_t H2Connection::readData(nghttp2_session*, int32_t stream_id, uint8_t* buf, size_t len,
                               uint32_t* flags, nghttp2_data_source*, void* user) {
  auto* c = static_cast<H2Connection*>(user);
  H2Stream* s = c->streamOf(stream_id);
  if (!s) {
    // Detached after a clean finish (see H2Stream::release): end our side
    // with END_STREAM rather than a reset.
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    return 0;
  }
  return s->readData(buf, len, flags);
}

// ---------------------------------------------------------------------------
// H2Stream

H2Stream::H2Stream(std::shared_ptr<H2Connection> conn, uint64_t conn_id, uint64_t stream_id)
    : conn_(std::move(conn)), conn_id_(conn_id), app_stream_id_(stream_id) {}

void H2Stream::moveTo(Life to) {
  movePhase(kLife, life_, to, conn_id_, app_stream_id_);
}
void H2Stream::moveTo(Up to) {
  movePhase(kUp, up_, to, conn_id_, app_stream_id_);
}
void H2Stream::moveTo(Down to) {
  movePhase(kDown, down_, to, conn_id_, app_stream_id_);
}

H2Stream::~H2Stream() {
  endStalls();
  if (life_ == Life::Open) {
    moveTo(Life::Closed);
    release();
  }
  if (unconsumed_ > 0) conn_->consume(id_, unconsumed_);
}

void H2Stream::setUploadStalled(bool on) {
  const ClusterStats& cs = *conn_->stats().cluster;
  upload_stall_.set(on, cs.stalled_up, cs.stalled_ns_up);
}

void H2Stream::setDownloadStalled(bool on) {
  const ClusterStats& cs = *conn_->stats().cluster;
  download_stall_.set(on, cs.stalled_down, cs.stalled_ns_down);
}

void H2Stream::release() {
  // Nothing may call back into this object from now on.
  conn_->detach(id_);
  if (!finished())
    conn_->resetStream(id_, NGHTTP2_CANCEL);
  else
    conn_->resumeData(id_);  // both sides are done: let our END_STREAM go out
}

void H2Stream::open(const RequestHead& head, StreamInfo& info, TunnelCallbacks& callbacks) {
  head_ = &head;
  info_ = &info;
  callbacks_ = &callbacks;
  info.protocol = "h2";
  info.upstream = conn_->peer();

  // nghttp2 copies names and values during submit, so locals suffice.
  const std::string authority = head.authority();
  std::vector<std::pair<std::string, std::string>> fields;
  fields.emplace_back(":method", head.method);
  if (head.is_connect) {
    fields.emplace_back(":authority", authority);
  } else {
    fields.emplace_back(":scheme", "http");
    fields.emplace_back(":authority", authority);
    fields.emplace_back(":path", head.path);
    if (head.framing == BodyFraming::ContentLength)
      fields.emplace_back("content-length", std::to_string(head.content_length));
  }
  for (Header& h :
       forwardedHeaders(head, info, conn_->cluster(), /*lowercase=*/true, authorization_))
    fields.emplace_back(std::move(h.name), std::move(h.value));
  config::wipe(authorization_);
  std::vector<nghttp2_nv> nva;
  nva.reserve(fields.size());
  for (const auto& [n, v] : fields)
    nva.push_back(
        makeNv(n, v, isSensitiveHeader(n, info, conn_->cluster()) ? NGHTTP2_NV_FLAG_NO_INDEX : 0));

  const bool with_body = head.is_connect || head.framing != BodyFraming::None;
  if (!with_body) moveTo(Up::Ended);
  id_ = conn_->submit(this, nva, with_body);
  // nghttp2 has its copies (sent never-indexed): ours of the secrets go.
  for (auto& [n, v] : fields)
    if (isSensitiveHeader(n, info, conn_->cluster())) config::wipe(v);
  if (id_ <= 0) {
    TunnelCallbacks* cb = callbacks_;
    callbacks_ = nullptr;
    cb->onFailed(502, Result::ConnectFailed,
                 std::string("cannot open an HTTP/2 stream: ") + nghttp2_strerror(id_));
    return;
  }
  moveTo(Life::Open);
  H2G_LOG(Debug, conn_id_, app_stream_id_,
          "h2 stream " << id_ << " on upstream connection C" << conn_->id() << " for "
                       << head.method << " " << head.target);
  conn_->flush();
}

void H2Stream::send(std::string_view data, Done done) {
  if (closed()) {
    // The proxy ended the stream after its END_STREAM (RST_STREAM(NO_ERROR):
    // "stop sending", RFC 9113 §8.1). The app's bytes have nowhere to go;
    // acknowledge them so its side does not stall.
    std::weak_ptr<H2Stream> weak = weak_from_this();
    asio::post(conn_->executor(), [weak, d = std::move(done)] {
      if (auto s = weak.lock(); s && !s->aborted()) d();
    });
    return;
  }
  // Not while nghttp2 may be reading the previous buffer (releasePending()
  // hands `done` back from a posted handler).
  phaseRule(!conn_->packing(), kUp.machine, "bytes handed over while the connection packs frames",
            conn_id_, app_stream_id_);
  pending_ = data;
  pending_done_ = std::move(done);
  if (!upload_listed_ && !data.empty()) {
    upload_listed_ = true;
    conn_->noteUploadPending(id_);
  }
  if (up_ == Up::Deferred) {
    moveTo(Up::Open);
    conn_->resumeData(id_);
  }
}

void H2Stream::endOfRequest() {
  const bool deferred = up_ == Up::Deferred;
  moveTo(Up::Ended);
  if (deferred && !closed()) conn_->resumeData(id_);
}

ssize_t H2Stream::readData(uint8_t*, size_t len, uint32_t* flags) {
  if (pending_done_) {
    if (upload_stall_.on()) setUploadStalled(false);  // the window opened
    const size_t n = std::min(len, pending_.size());
    if (n > 0) {
      // No copy into nghttp2's frame: H2Connection::onSendData copies the
      // bytes straight from the app's buffer into the connection's output.
      *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
      return static_cast<ssize_t>(n);
    }
    releasePending();
    return 0;
  }
  if (up_ == Up::Ended) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    return 0;
  }
  moveTo(Up::Deferred);
  return NGHTTP2_ERR_DEFERRED;
}

void H2Stream::takePending(size_t n, std::string& out) {
  out.append(pending_.data(), n);
  pending_.remove_prefix(n);
  sent_ += n;
  if (pending_.empty()) releasePending();
}

void H2Stream::releasePending() {
  // The bytes are copied: the app may read more. Posted: called inside
  // nghttp2_session_mem_send, where send() must not come (it checks).
  Done d = std::move(pending_done_);
  pending_done_ = nullptr;
  std::weak_ptr<H2Stream> weak = weak_from_this();
  asio::post(conn_->executor(), [weak, d = std::move(d)] {
    if (auto s = weak.lock(); s && !s->aborted()) d();
  });
}

void H2Stream::onHeader(std::string_view name, std::string_view value) {
  if (name == ":status") {
    int status = 0;
    std::from_chars(value.data(), value.data() + value.size(), status);
    response_ = ResponseHead{};
    response_.headers.reserve(12);
    response_.status = status;
    return;
  }
  if (!name.empty() && name.front() == ':') return;
  response_.headers.push_back({std::string(name), std::string(value)});
}

void H2Stream::onHeadersDone(bool end_stream) {
  if (!callbacks_) return;
  if (response_.status >= 100 && response_.status < 200) return;  // interim
  if (head_->is_connect && sent_ == 0 && answer_retry_ &&
      (response_.status == 502 || response_.status == 503 || response_.status == 504)) {
    AnswerRetryHook hook = std::move(answer_retry_);
    if (hook()) {
      H2G_LOG(Info, conn_id_, app_stream_id_,
              "proxy " << conn_->peer() << " answered CONNECT " << head_->authority() << " with "
                       << response_.status << "; trying another proxy of cluster "
                       << conn_->cluster().name);
      retry_ = nullptr;
      abort();  // RST_STREAM; the request queues again (posted by the hook)
      return;
    }
  }
  if (auth_) {
    // Before anything reaches the app: a 407 may be answered with
    // credentials, a Kerberos mutual-authentication token must verify.
    AuthHook hook = std::move(auth_);
    auth_ = nullptr;
    const auth::Verdict v = hook(response_, sent_ == 0);
    if (v.kind == auth::Verdict::Kind::Retry) {
      H2G_LOG(Debug, conn_id_, app_stream_id_,
              "h2 stream " << id_ << ": proxy wants authentication; queued again with it");
      retry_ = nullptr;
      abort();  // RST_STREAM; the request queues again (posted by the hook)
      return;
    }
    if (v.kind == auth::Verdict::Kind::Fail) {
      TunnelCallbacks* cb = callbacks_;
      abort();
      cb->onFailed(502, Result::ConnectFailed, v.reason);
      return;
    }
  }
  ResponseHead head = std::move(response_);
  const Header* cl = findHeader(head.headers, "content-length");
  const bool no_body = end_stream || head_->method == "HEAD" || head.status == 204 ||
                       head.status == 304 || (head_->is_connect && head.status / 100 == 2);
  if (no_body && !(head_->is_connect && head.status / 100 == 2)) {
    head.framing = BodyFraming::None;
  } else if (cl) {
    head.framing = BodyFraming::ContentLength;
    std::from_chars(cl->value.data(), cl->value.data() + cl->value.size(), head.content_length);
  } else {
    head.framing = BodyFraming::Chunked;  // the app side decides how to frame
  }
  if (conn_->receiving() && callbacks_->acceptsDataV()) {
    // Held until the DATA this read also carried: the app then gets the head
    // and the first body bytes in one write (deliverBatch).
    joinBatch();
    held_head_ = std::move(head);
    moveTo(Down::HeadHeld);
    return;
  }
  moveTo(Down::Body);
  callbacks_->onResponseHead(std::move(head));
}

void H2Stream::joinBatch() {
  if (!batch_.empty() || down_ == Down::HeadHeld) return;  // in the list already
  conn_->batched_.push_back(weak_from_this());
}

void H2Stream::onData(const uint8_t* data, size_t len) {
  if (!callbacks_) {
    conn_->consume(id_, len);
    return;
  }
  unconsumed_ += len;
  const size_t window = conn_->cluster().http2.initial_stream_window_size;
  // The proxy cannot send more until the app takes some of these bytes.
  if (unconsumed_ >= window) setDownloadStalled(true);
  if (conn_->receiving()) {
    joinBatch();
    batch_.emplace_back(reinterpret_cast<const char*>(data), len);
    batch_bytes_ += len;
    return;
  }
  callbacks_->onResponseData(std::string_view(reinterpret_cast<const char*>(data), len),
                             consumeWhenDone(len));
}

Done H2Stream::consumeWhenDone(size_t len) {
  std::weak_ptr<H2Stream> weak = weak_from_this();
  return [weak, len] {
    auto s = weak.lock();
    if (!s || s->aborted()) return;  // abort()/~H2Stream consumed it already
    s->unconsumed_ -= len;
    if (s->download_stall_.on() &&
        s->unconsumed_ < s->conn_->cluster().http2.initial_stream_window_size)
      s->setDownloadStalled(false);
    s->conn_->consume(s->id_, len);
  };
}

void H2Stream::deliverBatch() {
  if (batch_.empty() && down_ != Down::HeadHeld) return;
  auto self = shared_from_this();  // the app may let go of it in a callback
  std::vector<std::string_view> pieces;
  pieces.swap(batch_);
  size_t left = batch_bytes_;
  batch_bytes_ = 0;
  if (down_ == Down::HeadHeld) {
    moveTo(Down::Body);
    if (callbacks_ && !aborted()) {
      // (Held only for callbacks that take pieces at once.)
      callbacks_->onResponseHeadV(std::move(held_head_), pieces.data(), pieces.size(),
                                  left > 0 ? consumeWhenDone(left) : nullptr);
      return;
    }
  }
  if (pieces.empty()) return;
  if (callbacks_ && !aborted() && callbacks_->acceptsDataV()) {
    callbacks_->onResponseDataV(pieces.data(), pieces.size(), consumeWhenDone(left));
    return;
  }
  for (std::string_view piece : pieces) {
    if (aborted()) return;  // abort() gave back the whole unconsumed window
    if (!callbacks_) break;
    left -= piece.size();
    callbacks_->onResponseData(piece, consumeWhenDone(piece.size()));
  }
  if (!aborted() && left > 0) {  // nobody takes the rest: give its window back
    unconsumed_ -= left;
    conn_->consume(id_, left);
  }
}

void H2Stream::onEndStream() {
  deliverBatch();  // the body before its end
  const bool answered = this->answered();
  moveTo(Down::Ended);
  if (!callbacks_) return;
  if (!answered) return;  // onClose reports the failure
  TunnelCallbacks* cb = callbacks_;
  if (head_->is_connect) {
    cb->onResponseEnd();  // the destination's FIN; our direction may go on
    return;
  }
  callbacks_ = nullptr;
  cb->onResponseEnd();
}

void H2Stream::onClose(uint32_t error_code) {
  deliverBatch();  // what arrived before the close still goes to the app
  if (life_ == Life::Open) moveTo(Life::Closed);
  endStalls();
  TunnelCallbacks* cb = callbacks_;
  callbacks_ = nullptr;
  if (!cb) return;
  // NO_ERROR is a clean end only after the proxy's END_STREAM (then a
  // RST_STREAM(NO_ERROR) merely stops our upload, RFC 9113 §8.1). Without
  // END_STREAM the response was cut short and the app MUST NOT take it as
  // complete (a CONNECT tunnel would otherwise be left open with no end).
  if (error_code == NGHTTP2_NO_ERROR && down_ == Down::Ended) return;
  // Refused (GOAWAY above last-stream-id, or REFUSED_STREAM): the proxy did
  // not process it, so with nothing sent either way it can go elsewhere.
  if (!answered() && sent_ == 0 && error_code == NGHTTP2_REFUSED_STREAM && retry_) {
    H2G_LOG(Info, conn_id_, app_stream_id_,
            "h2 stream " << id_ << " refused by the proxy; retrying on another connection");
    RetryHook r = std::move(retry_);
    r();
    return;
  }
  const std::string reason =
      error_code != NGHTTP2_NO_ERROR
          ? std::string("proxy reset the stream: ") + nghttp2_http2_strerror(error_code)
      : answered() ? "proxy closed the stream before the end of the response"
                   : "proxy closed the stream without a response";
  if (!answered())
    cb->onFailed(502, Result::UpstreamReset, reason);
  else
    cb->onReset(Result::UpstreamReset, reason);
}

void H2Stream::onConnectionClosed(const std::string& reason, bool established) {
  if (life_ == Life::Open) moveTo(Life::Closed);
  endStalls();
  TunnelCallbacks* cb = callbacks_;
  callbacks_ = nullptr;
  if (!cb) return;
  // Nothing reached the app and nothing left it: another connection (or
  // endpoint) can take the request as if this one had never been tried.
  if (!answered() && sent_ == 0 && retry_) {
    H2G_LOG(
        Info, conn_id_, app_stream_id_,
        "connection to proxy lost before the request was answered (" << reason << "); retrying");
    RetryHook r = std::move(retry_);
    r();  // may destroy this stream: nothing after it
    return;
  }
  const std::string why = "connection to proxy lost: " + reason;
  if (!answered())
    cb->onFailed(502, established ? Result::UpstreamReset : Result::ConnectFailed, why);
  else
    cb->onReset(Result::UpstreamReset, why);
}

void H2Stream::abort() {
  if (aborted()) return;
  const bool open = life_ == Life::Open;
  moveTo(Life::Aborted);
  endStalls();
  callbacks_ = nullptr;
  pending_done_ = nullptr;
  if (unconsumed_ > 0) {
    conn_->consume(id_, unconsumed_);
    unconsumed_ = 0;
  }
  // A tunnel whose both directions ended is closed with END_STREAM; only a
  // request cut short gets RST_STREAM (proxies count resets against us).
  if (open) release();
}

}  // namespace h2gate::upstream
