// One HTTP/1.1 request, or one CONNECT tunnel, over an established
// connection: to the origin itself (direct mode) or to an HTTP/1.1 upstream
// proxy. Writes the head and the body (re-chunked when the app's was
// chunked), parses the response so the app connection can carry the next
// request, and relays raw bytes both ways once a tunnel is open.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gateway/http1/parser.h"
#include "gateway/upstream/auth/proxy_auth.h"
#include "gateway/upstream/phase.h"
#include "gateway/upstream/transport.h"
#include "gateway/upstream/tunnel.h"
#include "gateway/upstream/upstream_stats.h"

namespace h2gate::upstream {

class Http1Exchange : public Tunnel, public std::enable_shared_from_this<Http1Exchange> {
 public:
  enum class Kind {
    Request,        // write head_bytes + body, parse the response
    DirectConnect,  // connected to the destination: the tunnel is open already
    ProxyConnect,   // write a CONNECT head, parse the proxy's answer
  };
  // Runs exactly once, as the exchange ends (phase kept or closed, below):
  // with the connection when it finished cleanly and may carry another
  // request (keep-alive), with null and why when it was closed. Lets a pool
  // count and reuse its connections. A connection is kept only when the
  // request and the response both completed, the response allows it, and
  // no error status answered a request body (squid 5.7 leaves such a
  // connection stuck: the next request on it gets no answer).
  using Release = std::function<void(std::unique_ptr<Transport>, Http1Close)>;

  Http1Exchange(std::unique_ptr<Transport> transport, Kind kind, std::string head_bytes,
                uint64_t conn_id, uint64_t stream_id, Release release = nullptr);
  ~Http1Exchange() override;

  // Authentication to the proxy (auth::RequestAuth), set before open().
  struct AuthHooks {
    // The proxy's final response head, before the app sees it;
    // `can_retry`: no byte of the body (or tunnel) has left; `keep_alive`:
    // the response leaves the connection open. See auth::Verdict: Retry
    // ends this exchange without telling the app (the hook queues the
    // request again); Continue reads the 407 to its end and sends head()
    // of the verdict's authorization on this connection.
    std::function<auth::Verdict(const ResponseHead& head, bool can_retry, bool keep_alive)>
        on_response;
    // The request head with this Proxy-Authorization ("" none);
    // `handshake`: an NTLM negotiate leg (Content-Length: 0, body held).
    std::function<std::string(const std::string& authorization, bool handshake)> head;
    // The first head (head_bytes) is such a leg: the body waits.
    bool handshake = false;
  };
  void setAuth(AuthHooks hooks);

  // On a kept-alive connection taken from the pool: the proxy may have
  // closed it just as it was handed out (it closes idle connections when it
  // likes). When the connection ends before any byte of an answer, and no
  // byte of the request body has left (the app's bytes could not be sent
  // again), the exchange ends without telling the app and `hook` queues the
  // request again, on a new connection.
  void setRetryHook(std::function<void()> hook) { retry_ = std::move(hook); }

  void open(const RequestHead& head, StreamInfo& info, TunnelCallbacks& callbacks) override;
  void send(std::string_view data, Done done) override;
  void endOfRequest() override;
  void abort() override;

 private:
  // The exchange's life, from the request going out to the connection
  // kept or closed (the answer's direction; the request's is Send below).
  //
  //   phase        what happens                                     goes to
  //   awaiting     the request goes out; no byte of an answer yet   answering, tunnel, closed
  //   answering    bytes of an answer came, its final head not yet  interim, auth_drain, body,
  //                                                                 tunnel, closed
  //   interim      a 1xx is read past (the app had h2gate's own     answering, closed
  //                100 Continue)
  //   auth_drain   a 407 is read to its end; then the next          answering, closed
  //                authentication leg goes out (next_head_)
  //   body         the final head went to the app; its body is      complete, closed
  //                read
  //   tunnel       raw bytes both ways (CONNECT)                    tunnel_ended, closed
  //   tunnel_ended the far end finished; the app's direction goes   closed
  //                on
  //   complete     the whole response is in: once the app took its  kept, closed
  //                last bytes the connection goes back to the pool
  //                or is closed, nothing else
  //   kept         back to the pool for the next request            -
  //   closed       closed (failed, aborted, or not reusable: see    -
  //                Release)
  //
  // Only awaiting can be retried on a new connection (setRetryHook), and
  // only while Send has not passed open. A callback to the app may end the
  // exchange (abort()): after each, the phase says whether to go on.
  enum class Phase : uint8_t {
    Awaiting,
    Answering,
    Interim,
    AuthDrain,
    Body,
    Tunnel,
    TunnelEnded,
    Complete,
    Kept,
    Closed,
  };
  static constexpr PhaseTable<Phase, 10> kPhases{
      "http1 exchange",
      {{
          {Phase::Awaiting, "awaiting", nextPhases(Phase::Answering, Phase::Tunnel, Phase::Closed)},
          {Phase::Answering, "answering",
           nextPhases(Phase::Interim, Phase::AuthDrain, Phase::Body, Phase::Tunnel, Phase::Closed)},
          {Phase::Interim, "interim", nextPhases(Phase::Answering, Phase::Closed)},
          {Phase::AuthDrain, "auth_drain", nextPhases(Phase::Answering, Phase::Closed)},
          {Phase::Body, "body", nextPhases(Phase::Complete, Phase::Closed)},
          {Phase::Tunnel, "tunnel", nextPhases(Phase::TunnelEnded, Phase::Closed)},
          {Phase::TunnelEnded, "tunnel_ended", nextPhases(Phase::Closed)},
          {Phase::Complete, "complete", nextPhases(Phase::Kept, Phase::Closed)},
          {Phase::Kept, "kept", nextPhases()},
          {Phase::Closed, "closed", nextPhases()},
      }}};
  static_assert(kPhases.wellFormed());

  // The request's direction: what may go after the head.
  //
  //   send         what may go                                      goes to
  //   held         nothing: a CONNECT to a proxy waits for its 2xx  open, negotiate
  //   negotiate    nothing: an NTLM negotiate leg is on the wire,   open, held, ended_empty
  //                the body waits for the next leg
  //   open         body (or tunnel) bytes as the app hands them;    body, ended_empty, negotiate
  //                none went yet: the request could go again
  //   body         a body byte went: it cannot go again             ended
  //   ended_empty  the end went with no body byte (a bodyless       -
  //                request)
  //   ended        the end went after the body (a chunked body's    -
  //                last chunk, a tunnel's FIN)
  //
  // While the phase is auth_drain nothing goes either. The head of each leg
  // goes whenever it is queued (head_bytes_).
  enum class Send : uint8_t { Held, Negotiate, Open, Body, EndedEmpty, Ended };
  static constexpr PhaseTable<Send, 6> kSend{
      "http1 exchange send",
      {{
          {Send::Held, "held", nextPhases(Send::Open, Send::Negotiate)},
          {Send::Negotiate, "negotiate", nextPhases(Send::Open, Send::Held, Send::EndedEmpty)},
          {Send::Open, "open", nextPhases(Send::Body, Send::EndedEmpty, Send::Negotiate)},
          {Send::Body, "body", nextPhases(Send::Ended)},
          {Send::EndedEmpty, "ended_empty", nextPhases()},
          {Send::Ended, "ended", nextPhases()},
      }}};
  static_assert(kSend.wellFormed());

  // The one place each machine's phase changes.
  void moveTo(Phase to);
  void moveTo(Send to);
  bool ended() const { return phase_ == Phase::Kept || phase_ == Phase::Closed; }
  bool tunnel() const { return phase_ == Phase::Tunnel || phase_ == Phase::TunnelEnded; }
  // The upstream sent its final answer (a proxy's 2xx to a CONNECT
  // included; a direct tunnel has none: h2gate says "established").
  bool answered() const {
    return phase_ == Phase::Body || phase_ == Phase::Complete ||
           (tunnel() && kind_ == Kind::ProxyConnect);
  }
  bool bodyStarted() const { return send_ == Send::Body || send_ == Send::Ended; }
  bool requestEnded() const { return send_ == Send::EndedEmpty || send_ == Send::Ended; }
  // Open, or held while a CONNECT to a proxy waits for its answer.
  Send openOrHeld() const {
    return kind_ == Kind::ProxyConnect && !tunnel() ? Send::Held : Send::Open;
  }
  // The request's end was written.
  void endSent();

  void flush();
  // Reads the next bytes from the upstream: into read_buf_ when the last
  // read filled it (more is likely there), else after a readiness wait that
  // holds no buffer (readNow() then reads what came).
  void readMore();
  void readNow();
  void onReadDone(const asio::error_code& ec, size_t n);
  void onRead(size_t n);
  void onEof();
  void deliverBody(bool message_done);
  void relay(size_t offset, size_t n);
  void fail(int status, Result result, std::string reason);
  // The connection ended (`why`) before the answer began: retried through
  // retry_ when that is safe (see setRetryHook), else a 502.
  void failBeforeAnswer(Result result, const std::string& why);
  void reset(Result result, std::string reason);
  // Complete: the connection kept or closed, then the app told.
  void finishExchange();
  // Closes an exchange that has not ended (abort, destruction).
  void close();
  void released(std::unique_ptr<Transport> transport, Http1Close why);
  // Why the connection cannot carry another request now.
  Http1Close closeReason() const;

  std::unique_ptr<Transport> transport_;
  Kind kind_;
  uint64_t conn_id_;
  uint64_t stream_id_;
  Release release_;
  std::function<void()> retry_;
  Phase phase_ = Phase::Awaiting;
  Send send_;

  const RequestHead* head_ = nullptr;     // owned by the downstream connection
  StreamInfo* info_ = nullptr;            // idem
  TunnelCallbacks* callbacks_ = nullptr;  // null once the exchange ended

  // App → upstream: at most one buffer in flight (see tunnel.h).
  std::string head_bytes_;      // until its write starts
  std::string head_in_flight_;  // being written
  std::string_view pending_;
  Done pending_done_;
  std::array<char, 24> chunk_header_{};
  // The app's endOfRequest() came; the end goes once Send allows it (it may
  // come while the last buffer still waits: PendingTunnel::attach).
  bool end_pending_ = false;
  bool writing_ = false;  // one write in flight (Transport's contract)

  // Upstream → app. The read buffer is held only while bytes are there or
  // arriving: a read that found the socket drained is followed by a
  // readiness wait without one (as AppSocket::read does for the app side),
  // so an idle tunnel, or a request waiting for its response, holds no
  // 64 KiB buffer. Bytes handed to the app point into it until their
  // `done`; it is freed or reused only after that.
  std::unique_ptr<http1::Parser> parser_;
  std::unique_ptr<char[]> read_buf_;
  bool last_read_drained_ = true;  // the last read left the socket empty
  std::string body_;
  // The final answer is an error status that came after a body byte went:
  // the connection is closed after it (see Release).
  bool error_answer_ = false;

  // Authentication (see AuthHooks).
  AuthHooks auth_;
  std::string next_head_;  // the request again, with the next credentials (a secret)
  // Starts the next leg once the 407 being drained has ended: a fresh
  // parser, next_head_ written.
  void nextLeg();
};

}  // namespace h2gate::upstream
