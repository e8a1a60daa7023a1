// One HTTP/2 connection to an upstream proxy, carrying many app requests and
// tunnels as streams (H2Stream, the Tunnel implementation for h2).
//
// Flow control (gateway/README.md, Flow control): automatic WINDOW_UPDATE
// is off. DATA for a stream goes straight to its app: the pieces one read
// from the proxy carried for the stream in one call
// (TunnelCallbacks::onResponseDataV, or onResponseHeadV with the head) to
// callbacks that take pieces at once (acceptsDataV), else one
// onResponseData per piece; the stream's window is given back only when
// the app socket took the bytes (the `done` callback). Bytes of streams
// that died are consumed at once, so the connection window never leaks.
// Frames are packed only by flushNow(), never inside
// nghttp2_session_mem_recv nor inside nghttp2_session_mem_send itself: the
// Input and Output phases below say where the connection is, and
// flushNow() reports (phaseRule()) a call at the wrong moment.
//
// Lifetime: the pool and every live H2Stream hold shared_ptrs. When an
// H2Stream dies it clears its nghttp2 stream user data (detach()).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nghttp2/nghttp2.h>

#include <asio.hpp>

#include "config/config.h"
#include "gateway/upstream/auth/proxy_auth.h"
#include "gateway/upstream/phase.h"
#include "gateway/upstream/transport.h"
#include "gateway/upstream/tunnel.h"
#include "gateway/upstream/upstream_stats.h"

namespace h2gate::upstream {

class H2Stream;

class H2Connection : public std::enable_shared_from_this<H2Connection> {
 public:
  // The pool's view of the connection.
  struct Owner {
    virtual ~Owner() = default;
    // Streams finished, SETTINGS changed the limit, or a GOAWAY came: the
    // pool may place waiting requests or open a replacement.
    virtual void onCapacityChanged(H2Connection& conn) = 0;
    // `failed`: it died (no PING answer, an error), as opposed to a plain
    // close by the proxy (EOF) or the end of a drained session.
    virtual void onConnectionClosed(H2Connection& conn, const std::string& reason, bool failed) = 0;
  };

  H2Connection(std::unique_ptr<Transport> transport, const config::Cluster& cluster, uint64_t id,
               std::string peer, Owner* owner, std::shared_ptr<EndpointStats> stats);
  ~H2Connection();
  H2Connection(const H2Connection&) = delete;
  H2Connection& operator=(const H2Connection&) = delete;

  // Sends the preface and SETTINGS, starts reading. Returns "" or an error.
  std::string start();
  // No GOAWAY, not closed, below min(peer's SETTINGS_MAX_CONCURRENT_STREAMS,
  // our max_concurrent_streams).
  // Not while a before-use PING (probe()) is unanswered.
  bool acceptsStreams() const;
  // Keepalive is on and nothing arrived from the proxy for longer than its
  // interval: confirm the connection with probe() before a new stream.
  bool idleTooLong() const;
  bool probing() const { return ping_ == Ping::Probe; }
  // Sends a PING (unless one is out) and declares the connection dead when
  // no answer comes within `timeout`. While it is unanswered the connection
  // takes no new streams; the answer calls Owner::onCapacityChanged. Used
  // before reuse after idling, and on network changes.
  void probe(config::Duration timeout);
  size_t activeStreams() const { return streams_.size(); }
  bool closed() const { return session_phase_ == Session::Closed; }
  uint64_t id() const { return id_; }
  const std::string& peer() const { return peer_; }
  const config::Cluster& cluster() const { return cluster_; }
  asio::any_io_executor executor() { return transport_->socket().get_executor(); }
  // The pool is going away: no more Owner calls.
  void detachOwner() { owner_ = nullptr; }
  // Tears the connection down; every stream gets onReset/onFailed (or is
  // retried). `failed` as in Owner::onConnectionClosed.
  void close(const std::string& reason, bool failed = true);

  // For H2Stream.
  int32_t submit(H2Stream* stream, const std::vector<nghttp2_nv>& nva, bool with_body);
  void resumeData(int32_t stream_id);
  void consume(int32_t stream_id, size_t n);
  void resetStream(int32_t stream_id, uint32_t error_code);
  void detach(int32_t stream_id);
  // Sends what nghttp2 has queued: soon (posted, so that the frames of
  // everything ready now share one TLS write); while receiving, once the
  // read is dispatched.
  void flush();
  // Inside nghttp2_session_mem_send: its data callbacks read the streams'
  // pending bytes.
  bool packing() const { return output_ == Output::Packing; }
  // The stream has app bytes to send: if nghttp2 then has nothing to send,
  // flow control holds them (see flush()).
  void noteUploadPending(int32_t stream_id) { uploads_pending_.push_back(stream_id); }
  const EndpointStats& stats() const { return *stats_; }

 private:
  // The connection's life.
  //   session   what it is                                      goes to
  //   new       start() has not run (or failed)                 starting, closed
  //   starting  preface and SETTINGS sent; the proxy's first    ready, closed
  //             SETTINGS not yet here (a failure now is the
  //             proxy refusing us: a failed connect)
  //   ready     HTTP/2 works                                    draining, closed
  //   draining  GOAWAY came: no new streams, the others finish  closed
  //   closed    torn down; every stream was told                -
  enum class Session : uint8_t { New, Starting, Ready, Draining, Closed };
  static constexpr PhaseTable<Session, 5> kSession{
      "h2 connection",
      {{
          {Session::New, "new", nextPhases(Session::Starting, Session::Closed)},
          {Session::Starting, "starting", nextPhases(Session::Ready, Session::Closed)},
          {Session::Ready, "ready", nextPhases(Session::Draining, Session::Closed)},
          {Session::Draining, "draining", nextPhases(Session::Closed)},
          {Session::Closed, "closed", nextPhases()},
      }}};
  static_assert(kSession.wellFormed());
  // The PING out, if any.
  //   ping   what is out                                        goes to
  //   none   nothing                                            out, probe
  //   out    a keepalive PING (or the first, for the RTT)       none, probe
  //   probe  a PING that must be answered before the            none
  //          connection takes a new stream (probe())
  enum class Ping : uint8_t { None, Out, Probe };
  static constexpr PhaseTable<Ping, 3> kPing{
      "h2 connection ping",
      {{
          {Ping::None, "none", nextPhases(Ping::Out, Ping::Probe)},
          {Ping::Out, "out", nextPhases(Ping::None, Ping::Probe)},
          {Ping::Probe, "probe", nextPhases(Ping::None)},
      }}};
  static_assert(kPing.wellFormed());
  // Bytes from the proxy.
  //   input       where they are                                goes to
  //   idle        no read (before start(), after close())       reading
  //   reading     one read in flight                            receiving, idle
  //   receiving   inside nghttp2_session_mem_recv: streams      delivering, idle
  //               batch their DATA (views into read_buf_),
  //               flush() waits for the end of the read
  //   delivering  the batched DATA goes to the apps, then the   reading, idle
  //               frames this read caused are sent
  enum class Input : uint8_t { Idle, Reading, Receiving, Delivering };
  static constexpr PhaseTable<Input, 4> kInput{
      "h2 connection input",
      {{
          {Input::Idle, "idle", nextPhases(Input::Reading)},
          {Input::Reading, "reading", nextPhases(Input::Receiving, Input::Idle)},
          {Input::Receiving, "receiving", nextPhases(Input::Delivering, Input::Idle)},
          {Input::Delivering, "delivering", nextPhases(Input::Reading, Input::Idle)},
      }}};
  static_assert(kInput.wellFormed());
  // Frames to the proxy.
  //   output   what happens                                     goes to
  //   idle     nothing is being written                         posted, packing
  //   posted   a flush is posted: the frames of everything      idle, packing
  //            ready now leave in one write
  //   packing  inside nghttp2_session_mem_send (and its         idle, writing
  //            callbacks, which copy the apps' bytes into out_)
  //   writing  one write of out_ in flight                      idle
  enum class Output : uint8_t { Idle, Posted, Packing, Writing };
  static constexpr PhaseTable<Output, 4> kOutput{
      "h2 connection output",
      {{
          {Output::Idle, "idle", nextPhases(Output::Posted, Output::Packing)},
          {Output::Posted, "posted", nextPhases(Output::Idle, Output::Packing)},
          {Output::Packing, "packing", nextPhases(Output::Idle, Output::Writing)},
          {Output::Writing, "writing", nextPhases(Output::Idle)},
      }}};
  static_assert(kOutput.wellFormed());
  // The one place each machine's phase changes.
  void moveTo(Session to);
  void moveTo(Ping to);
  void moveTo(Input to);
  void moveTo(Output to);
  // HTTP/2 started: the proxy's SETTINGS came.
  bool established() const {
    return session_phase_ == Session::Ready || session_phase_ == Session::Draining;
  }
  // In the active-connections gauge: from a successful start() to close().
  bool counted() const {
    return session_phase_ != Session::New && session_phase_ != Session::Closed;
  }
  bool receiving() const { return input_ == Input::Receiving; }

  static int onBeginHeaders(nghttp2_session*, const nghttp2_frame*, void*);
  static int onHeader(nghttp2_session*, const nghttp2_frame*, const uint8_t*, size_t,
                      const uint8_t*, size_t, uint8_t, void*);
  static int onFrameRecv(nghttp2_session*, const nghttp2_frame*, void*);
  static int onDataChunkRecv(nghttp2_session*, uint8_t, int32_t, const uint8_t*, size_t, void*);
  static int onStreamClose(nghttp2_session*, int32_t, uint32_t, void*);
  static ssize_t readData(nghttp2_session*, int32_t, uint8_t*, size_t, uint32_t*,
                          nghttp2_data_source*, void*);
  // NGHTTP2_DATA_FLAG_NO_COPY: a DATA frame's header and payload go into
  // out_ from the app's buffer (one copy instead of two).
  static int onSendData(nghttp2_session*, nghttp2_frame*, const uint8_t*, size_t,
                        nghttp2_data_source*, void*);
  H2Stream* streamOf(int32_t stream_id) const;
  void onWriteError(const asio::error_code& ec);
  void readMore();
  void onRead(const asio::error_code& ec, size_t n);
  // Writes what nghttp2 has queued now (at most one write in flight).
  void flushNow();
  // Removes a stream from streams_ (and from the streams gauge).
  void forget(int32_t stream_id);
  // Streams still holding app bytes while nghttp2 has nothing to send are
  // blocked by the proxy's flow-control window.
  void markUploadStalls();
  // Keepalive (cluster connection_keepalive): a PING every interval with
  // ±15% jitter, each answered within `timeout` or the connection is closed
  // as dead. Every answer also gives the round trip for the metrics. With
  // keepalive off, only the first PING (for the RTT) is sent, without a
  // deadline.
  void sendPing(std::optional<config::Duration> deadline);
  void onPingAck(const uint8_t* opaque);
  void scheduleKeepalive();
  void sampleSendBuffer();

  std::unique_ptr<Transport> transport_;
  const config::Cluster& cluster_;
  const uint64_t id_;
  const std::string peer_;
  Owner* owner_;
  nghttp2_session* session_ = nullptr;
  std::unordered_map<int32_t, H2Stream*> streams_;  // open streams we created
  std::vector<uint8_t> read_buf_;
  std::string out_;  // frames being written; immutable while Output is writing
  Session session_phase_ = Session::New;
  Ping ping_ = Ping::None;
  Input input_ = Input::Idle;
  Output output_ = Output::Idle;
  // Set by onSendData when it filled out_ (mem_send returned 0 early), for
  // the flushNow() that called mem_send.
  bool send_paused_ = false;
  // Streams that got DATA during this mem_recv: their pieces (views into
  // read_buf_) go to their apps in one write each once it returns.
  std::vector<std::weak_ptr<H2Stream>> batched_;
  void deliverBatched();
  friend class H2Stream;  // batches its DATA in batched_ while receiving
  std::string write_error_;
  asio::steady_timer write_error_timer_;
  std::shared_ptr<EndpointStats> stats_;
  EndpointStats::ConnectionGauges gauges_;
  std::vector<int32_t> uploads_pending_;
  asio::steady_timer ping_timer_;     // the next keepalive PING
  asio::steady_timer ping_deadline_;  // the outstanding PING's answer
  uint64_t ping_seq_ = 0;
  std::chrono::steady_clock::time_point ping_sent_{};
  std::chrono::steady_clock::time_point ping_deadline_at_{};
  std::chrono::steady_clock::time_point last_read_{};
  std::chrono::steady_clock::time_point sndbuf_sampled_{};
};

// One app request or tunnel on an H2Connection.
class H2Stream : public Tunnel, public std::enable_shared_from_this<H2Stream> {
 public:
  // Called instead of onFailed when the proxy refused the stream before
  // answering (GOAWAY above last-stream-id, REFUSED_STREAM): the request may
  // go to another connection.
  using RetryHook = std::function<void()>;

  H2Stream(std::shared_ptr<H2Connection> conn, uint64_t conn_id, uint64_t stream_id);
  ~H2Stream() override;

  void setRetryHook(RetryHook hook) { retry_ = std::move(hook); }
  // Asked when the proxy answers this CONNECT with 502, 503 or 504 before any
  // byte went either way: true means the request goes to another proxy, and
  // this stream resets itself without telling the app.
  using AnswerRetryHook = std::function<bool()>;
  void setAnswerRetryHook(AnswerRetryHook hook) { answer_retry_ = std::move(hook); }
  // The cluster's Proxy-Authorization for this stream (auth::RequestAuth);
  // set before open(). Wiped once submitted.
  void setAuthorization(std::string value) { authorization_ = std::move(value); }
  // Asked with the proxy's final response head before the app sees it;
  // `can_retry`: nothing of the request beyond its head has left.
  // Deliver: as usual. Retry: the stream resets itself without telling the
  // app (the hook queues the request again). Fail: the app gets 502 with
  // the verdict's reason.
  using AuthHook = std::function<auth::Verdict(const ResponseHead& head, bool can_retry)>;
  void setAuthHook(AuthHook hook) { auth_ = std::move(hook); }
  void open(const RequestHead& head, StreamInfo& info, TunnelCallbacks& callbacks) override;
  void send(std::string_view data, Done done) override;
  void endOfRequest() override;
  void abort() override;

  // From H2Connection's callbacks.
  void onHeader(std::string_view name, std::string_view value);
  void onHeadersDone(bool end_stream);
  // No final response head yet: a HEADERS frame after an interim (1xx) one
  // is the final head, one after the final head carries trailers.
  bool awaitsFinalHead() const { return down_ == Down::AwaitHead; }
  void onData(const uint8_t* data, size_t len);
  void onEndStream();
  void onClose(uint32_t error_code);
  // The whole connection went away; `established` when HTTP/2 had started.
  void onConnectionClosed(const std::string& reason, bool established);
  ssize_t readData(uint8_t* buf, size_t len, uint32_t* flags);
  // Appends the next `n` upload bytes to `out` (see H2Connection::onSendData).
  void takePending(size_t n, std::string& out);
  // Hands the DATA pieces gathered during the connection's last read to the
  // app in one write (see H2Connection::batched_).
  void deliverBatch();
  // The `done` for `len` bytes handed to the app: gives their window back.
  Done consumeWhenDone(size_t len);
  bool hasPendingUpload() const { return pending_done_ && !pending_.empty() && !closed(); }
  // Flow-control stall bookkeeping (h2gate_upstream_streams_stalled).
  void setUploadStalled(bool stalled);

 private:
  // The stream's life.
  //   life     what it is                                       goes to
  //   new      not opened, or nghttp2 refused to open it        open, aborted
  //   open     submitted: nghttp2 calls it back                 closed, aborted
  //   closed   nghttp2 closed it, its connection died, or it    aborted
  //            let go of it (release()): no more calls from
  //            nghttp2; the app may still hold it
  //   aborted  the app let go (abort()): nothing reaches the    -
  //            app any more
  enum class Life : uint8_t { New, Open, Closed, Aborted };
  static constexpr PhaseTable<Life, 4> kLife{
      "h2 stream",
      {{
          {Life::New, "new", nextPhases(Life::Open, Life::Aborted)},
          {Life::Open, "open", nextPhases(Life::Closed, Life::Aborted)},
          {Life::Closed, "closed", nextPhases(Life::Aborted)},
          {Life::Aborted, "aborted", nextPhases()},
      }}};
  static_assert(kLife.wellFormed());
  // The request's direction (the app's bytes into DATA frames).
  //   up        what happens                                    goes to
  //   open      bytes go as the app hands them                  deferred, ended
  //   deferred  nghttp2 waits for the app's next bytes (or its  open, ended
  //             end): send()/endOfRequest() resume it
  //   ended     the app's end came (or there is no body):       -
  //             END_STREAM follows its last byte
  enum class Up : uint8_t { Open, Deferred, Ended };
  static constexpr PhaseTable<Up, 3> kUp{
      "h2 stream up",
      {{
          {Up::Open, "open", nextPhases(Up::Deferred, Up::Ended)},
          {Up::Deferred, "deferred", nextPhases(Up::Open, Up::Ended)},
          {Up::Ended, "ended", nextPhases()},
      }}};
  static_assert(kUp.wellFormed());
  // The response's direction.
  //   down        what happens                                  goes to
  //   await_head  no final head yet (1xx heads are passed over) head_held, body
  //   head_held   the final head came in this read: it goes to  body
  //               the app with the DATA the read carried
  //               (deliverBatch)
  //   body        the head went to the app; DATA follows        ended
  //   ended       the proxy's END_STREAM came                   -
  enum class Down : uint8_t { AwaitHead, HeadHeld, Body, Ended };
  static constexpr PhaseTable<Down, 4> kDown{
      "h2 stream down",
      {{
          {Down::AwaitHead, "await_head", nextPhases(Down::HeadHeld, Down::Body)},
          {Down::HeadHeld, "head_held", nextPhases(Down::Body)},
          {Down::Body, "body", nextPhases(Down::Ended)},
          {Down::Ended, "ended", nextPhases()},
      }}};
  static_assert(kDown.wellFormed());
  // The one place each machine's phase changes.
  void moveTo(Life to);
  void moveTo(Up to);
  void moveTo(Down to);
  bool closed() const { return life_ == Life::Closed || life_ == Life::Aborted; }
  bool aborted() const { return life_ == Life::Aborted; }
  bool answered() const { return down_ != Down::AwaitHead; }
  // Both directions ended: the stream may close with END_STREAM (not a
  // reset).
  bool finished() const { return down_ == Down::Ended && up_ == Up::Ended; }

  void setDownloadStalled(bool stalled);
  // The app's bytes are all in frames: hand `done` back (posted).
  void releasePending();
  // Into the connection's batched_ list (once), so that deliverBatch() runs
  // when its read has been dispatched. Called before batch_ or the phase
  // change that it tells by.
  void joinBatch();
  void endStalls() {
    setUploadStalled(false);
    setDownloadStalled(false);
  }
  // Stops nghttp2 from calling back into this open stream; ends it with
  // RST_STREAM(CANCEL) unless both directions finished (then END_STREAM
  // does).
  void release();

  std::shared_ptr<H2Connection> conn_;
  uint64_t conn_id_;
  uint64_t app_stream_id_;
  int32_t id_ = -1;
  const RequestHead* head_ = nullptr;
  StreamInfo* info_ = nullptr;
  TunnelCallbacks* callbacks_ = nullptr;
  Life life_ = Life::New;
  Up up_ = Up::Open;
  Down down_ = Down::AwaitHead;
  std::vector<std::string_view> batch_;  // DATA not yet handed to the app
  size_t batch_bytes_ = 0;
  // The response head that arrived in the current read (head_held), handed
  // over with the DATA that came with it (onResponseHeadV).
  ResponseHead held_head_;
  RetryHook retry_;
  AnswerRetryHook answer_retry_;
  AuthHook auth_;
  std::string authorization_;
  ResponseHead response_;
  // Received DATA not yet written to the app (window not yet given back).
  size_t unconsumed_ = 0;
  uint64_t sent_ = 0;  // request bytes copied into DATA frames
  // Upload side: the app's bytes not yet copied into DATA frames.
  std::string_view pending_;
  Done pending_done_;
  StallClock upload_stall_;     // waiting for the proxy's window
  StallClock download_stall_;   // the proxy waits for our window (slow app)
  bool upload_listed_ = false;  // in the connection's uploads_pending_ (a set's member)
  friend class H2Connection;
};

}  // namespace h2gate::upstream
