// One app connection speaking HTTP/1.1 proxy protocol: CONNECT host:port and
// absolute-form requests, several per connection (keep-alive). The HTTP/1
// proxy state machine and its timers; the socket is an AppSocket
// (app_socket.h), the requests go where a Router (upstream/router.h) sends
// them, through a Tunnel (upstream/tunnel.h).
//
// Lifetime: owned by the worker's connection table (shared_ptr) and by its
// own pending I/O handlers (the AppSocket's hold it as their Handler).
// close() removes it from the table via a posted handler, so it never
// deletes itself in the middle of a callback. Before it drops its tunnel it
// calls tunnel->abort(), so no tunnel callback can reach a dead connection.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio.hpp>

#include "gateway/base/log.h"
#include "gateway/downstream/app_socket.h"
#include "gateway/downstream/listener_context.h"
#include "gateway/downstream/listener_stats.h"
#include "gateway/http1/parser.h"
#include "gateway/upstream/router.h"
#include "gateway/upstream/tunnel.h"

namespace h2gate::downstream {

class DownstreamConnection : public std::enable_shared_from_this<DownstreamConnection>,
                             public upstream::TunnelCallbacks,
                             public AppSocket::Handler {
 public:
  using CloseHook = std::function<void(uint64_t id)>;
  // `stats` is the worker's, for this listener, and `router` the worker's:
  // both outlive the connection.
  DownstreamConnection(asio::ip::tcp::socket socket, const ListenerContext& listener,
                       ListenerStats& stats, upstream::Router& router, uint64_t id,
                       CloseHook on_close);
  ~DownstreamConnection() override;

  // Sets the socket up and starts reading, or, when the listener is at
  // max_connections, answers 503 and closes.
  void start();
  // Shutdown: close now if idle between requests, else after the current
  // request/tunnel (no further keep-alive).
  void drain();
  // Drain timeout: cut whatever is in flight.
  void forceClose();
  uint64_t id() const { return id_; }

  // upstream::TunnelCallbacks
  void onResponseHead(ResponseHead head) override;
  void onResponseData(std::string_view data, upstream::Done done) override;
  bool acceptsDataV() const override { return true; }
  void onResponseDataV(const std::string_view* pieces, size_t n, upstream::Done done) override;
  // The head and first body bytes of one read from the proxy: one write.
  void onResponseHeadV(ResponseHead head, const std::string_view* pieces, size_t n,
                       upstream::Done done) override;
  void onResponseEnd() override;
  void onFailed(int status, Result result, std::string reason) override;
  void onReset(Result result, std::string reason) override;

 private:
  enum class State {
    ReadingHead,    // waiting for / parsing a request head
    Connecting,     // CONNECT sent upstream, waiting for its answer
    RequestBody,    // absolute-form: streaming the request body upstream
    AwaitResponse,  // request fully sent; response (maybe) streaming down
    Tunnel,         // CONNECT established: raw bytes both ways
    Closed,
  };
  using Clock = std::chrono::steady_clock;
  void setState(State s);

  // AppSocket::Handler
  void onAppBytes() override;
  void onAppEof() override;
  void onAppError(const asio::error_code& ec, AppSocket::Failure what) override;
  void onAppTook() override;
  void onAppWritesDone() override;
  void onAppClosed() override;

  // Acts on the buffered bytes as the state wants (a head to parse, a body
  // to send up, tunnel bytes), or asks the socket for more.
  void process();
  // Opens the bookkeeping (head_, info_) of the connection's next request.
  void beginRequest(RequestHead head);
  void handleHead();
  void processBody();
  void pumpTunnel();
  void startRequest(std::shared_ptr<upstream::Tunnel> tunnel);
  void finishRequest();
  void nextRequest();
  // forward_proxy's pac.serve_on_listener: an origin-form GET/HEAD
  // /proxy.pac gets the listener's PAC file (then the connection closes).
  bool isPacRequest() const;
  void replyPac();
  // Replies with an error of our own and closes after writing it (with the
  // header lines a rejecting filter left in info_.reply_headers).
  void replyError(int status, Result result, std::string reason,
                  log::Level level = log::Level::Info);
  void maybeFinishTunnel();
  // One direction of a tunnel ended: watch the other for silence.
  void armHalfCloseTimer();
  // Tunnel bytes moved (either way). Only stamps the time: the timer picks
  // it up lazily when it fires, so no per-chunk re-arm.
  void touchTunnel() { last_tunnel_activity_ = Clock::now(); }
  // A byte of the current absolute-form request moved (a body chunk from
  // the app or taken by the upstream, response bytes from the upstream or
  // taken by the app). Lazy like touchTunnel(): it only moves a deadline
  // later.
  void touchStream() { stream_activity_ = Clock::now(); }

  // The connection's one timer. What it measures follows the state:
  //   ReadingHead    request_headers_timeout (a head is under way, or the
  //                  connection's first request) or idle_timeout (between
  //                  keep-alive requests)
  //   Connecting     connect_response_timeout, until a response head
  //   RequestBody,   stream_idle_timeout since the last byte moved either
  //   AwaitResponse  way; and, until a response head, connect_response_timeout
  //                  (RequestBody: only while a body chunk waits for the
  //                  upstream to take it; a slow app is not the upstream's fault)
  //   Tunnel         tunnel_idle_timeout, and tunnel_half_close_timeout once
  //                  one direction has ended, both since the last tunnel byte
  //   Closed         none (the socket times its lingering close)
  // deadline() computes the current deadline from timestamps; armTimer()
  // MUST be called after anything that can bring it forward (a state change,
  // a new phase). Later deadlines need no call: the pending wait fires early,
  // and onTimer() finds nothing due and waits again.
  std::optional<Clock::time_point> deadline() const;
  // RequestBody/AwaitResponse: the two deadlines deadline() takes the
  // earlier of. connect_response_timeout applies only while no response
  // head came and h2gate waits for the upstream (nullopt otherwise).
  std::optional<Clock::time_point> responseWaitDeadline() const;
  Clock::time_point streamIdleDeadline() const;
  void armTimer();
  void onTimer();
  void onHeadTimeout();
  void onResponseTimeout();
  void onStreamIdleTimeout();
  void onTunnelTimeout();
  void close(bool abortive);
  // Metrics: the current request's route cells once its protocol is known
  // (null before), and byte accounting that uses them.
  ListenerStats::Route* route();
  void countUp(size_t n);
  void countDown(size_t n);

  // Gives back this connection's max_connections slot (idempotent).
  void releaseSlot();

  AppSocket socket_;
  const ListenerContext& listener_;
  ListenerStats& stats_;
  ListenerStats::Route* route_ = nullptr;  // of the current request
  uint64_t unrouted_up_ = 0;               // bytes taken from the app before the protocol was known
  bool first_byte_ = false;          // the first response byte of this request went to the app
  bool request_counted_ = false;     // in requests_started / requests_active
  bool connection_counted_ = false;  // in downstream_connections_active
  upstream::Router& router_;         // the worker's; outlives its connections
  const uint64_t id_;
  CloseHook on_close_;
  // Taken in start(), given back when the socket is closed; null when the
  // connection was refused (or the slot is back).
  std::shared_ptr<net::ConnectionLimit> slot_;
  asio::steady_timer timer_;
  Clock::time_point timer_expiry_ = Clock::time_point::max();  // of the live wait; max: none
  uint64_t timer_generation_ = 0;                              // only the live wait's handler acts
  bool head_started_ = false;  // ReadingHead: request_headers_timeout runs since head_since_
  bool head_bytes_ = false;    // ReadingHead: bytes of the next head arrived
  Clock::time_point head_since_{};
  Clock::time_point idle_since_{};           // ReadingHead between requests
  Clock::time_point response_wait_since_{};  // hand-off, or a body chunk handed upstream
  Clock::time_point last_tunnel_activity_{};
  Clock::time_point stream_activity_{};  // RequestBody/AwaitResponse: see touchStream()
  bool half_close_armed_ = false;
  State state_ = State::ReadingHead;

  std::unique_ptr<http1::Parser> parser_;
  // The current request. head_ and info_ outlive the tunnel's use of them:
  // the tunnel is aborted or finished before they are reset.
  RequestHead head_;
  StreamInfo info_;
  uint64_t requests_ = 0;
  std::shared_ptr<upstream::Tunnel> tunnel_;
  std::string body_out_;           // decoded request body on its way upstream
  bool sending_up_ = false;        // a tunnel_->send() awaits its done
  bool request_done_ = false;      // the app's direction is complete
  bool response_started_ = false;  // a response head was written to the app
  bool response_done_ = false;     // the upstream direction is complete
  BodyFraming out_framing_ = BodyFraming::None;
  bool keep_alive_ = true;
  bool draining_ = false;
  bool request_open_ = false;  // between handleHead and finishRequest
};

}  // namespace h2gate::downstream
