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
  // Runs exactly once when the exchange ends: with the connection when it
  // finished cleanly and may carry another request (keep-alive), with null
  // and why when it was closed. Lets a pool count and reuse its
  // connections. A connection is kept only when the request and the
  // response both completed, the response allows it, and no error status
  // answered a request body (squid 5.7 leaves such a connection stuck: the
  // next request on it gets no answer).
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
  void setAuth(AuthHooks hooks) {
    auth_ = std::move(hooks);
    handshake_ = auth_.handshake;
  }

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
  void finishExchange();
  void released(std::unique_ptr<Transport> transport, Http1Close why);
  // Why the connection cannot carry another request now ("" when it can).
  Http1Close closeReason() const;

  std::unique_ptr<Transport> transport_;
  Kind kind_;
  uint64_t conn_id_;
  uint64_t stream_id_;
  Release release_;
  std::function<void()> retry_;
  bool open_ = true;     // false after abort/fail/reset/finish
  bool tunnel_ = false;  // raw relay (CONNECT established)

  const RequestHead* head_ = nullptr;     // owned by the downstream connection
  StreamInfo* info_ = nullptr;            // idem
  TunnelCallbacks* callbacks_ = nullptr;  // null after fail/reset/abort/end

  // App → upstream: at most one buffer in flight (see tunnel.h).
  std::string head_bytes_;      // until its write starts
  std::string head_in_flight_;  // being written
  std::string_view pending_;
  Done pending_done_;
  std::array<char, 24> chunk_header_{};
  bool end_pending_ = false;
  bool end_sent_ = false;
  bool writing_ = false;

  // Upstream → app. The read buffer is held only while bytes are there or
  // arriving: a read that found the socket drained is followed by a
  // readiness wait without one (as DownstreamConnection::readMore does for
  // the app side), so an idle tunnel, or a request waiting for its
  // response, holds no 64 KiB buffer. Bytes handed to the app point into
  // it until their `done`; it is freed or reused only after that.
  std::unique_ptr<http1::Parser> parser_;
  std::unique_ptr<char[]> read_buf_;
  bool last_read_drained_ = true;  // the last read left the socket empty
  std::string body_;
  bool response_started_ = false;
  bool got_bytes_ = false;  // a byte of an answer arrived
  bool skipping_interim_ = false;
  bool error_answer_ = false;  // an error status answered a request whose body went out

  // Authentication (see AuthHooks).
  AuthHooks auth_;
  bool handshake_ = false;     // the head on the wire is an NTLM negotiate leg: body held
  bool draining_ = false;      // reading a 407 to its end before next_head_ goes out
  std::string next_head_;      // the request again, with the next credentials (a secret)
  bool body_started_ = false;  // a byte of the body (or tunnel) was written
  // Starts the next leg once the 407 being drained has ended: a fresh
  // parser, next_head_ written.
  void nextLeg();
};

}  // namespace h2gate::upstream
