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
#include "gateway/upstream/phase.h"
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
  // The connection's phase. One request at a time: from deciding to
  // replying a request is open (finishRequest() accounts for it when the
  // connection moves on or closes).
  //   phase           what happens                                 goes to
  //   new             start() has not run                          await_first, replying
  //   await_first     accepted; no byte of the first head yet      head, closed
  //   idle            between keep-alive requests                  head, closed
  //   head            bytes of a request head came; it is parsed   deciding, replying, closed
  //   deciding        a whole head: the filters and the router     connecting, request_body,
  //                   decide (within handleHead())                 await_response, replying
  //   connecting      CONNECT: waiting for the tunnel's answer     tunnel, refused, replying,
  //                                                                closed
  //   request_body    absolute-form: the body goes up              await_response, replying,
  //                                                                closed
  //   await_response  the request went up; the response comes      idle, head, replying, closed
  //                   down (then the next request, or the close)
  //   tunnel          CONNECT established: raw bytes both ways     half_closed, tunnel_closing,
  //                                                                closed
  //   half_closed     one direction of the tunnel ended; the       tunnel_closing, closed
  //                   other is watched for silence
  //   tunnel_closing  the tunnel is over (both directions ended,   closed
  //                   or a timeout): its last bytes go to the
  //                   app, then the close
  //   refused         the proxy refused the CONNECT: its answer    closed
  //                   goes to the app, then the close
  //   replying        h2gate's own answer (an error, the PAC       closed
  //                   file) goes to the app, then the close
  //   closed          closing: the socket lingers or was reset     gone
  //   gone            the socket is closed for good                -
  enum class Phase : uint8_t {
    New,
    AwaitFirst,
    Idle,
    Head,
    Deciding,
    Connecting,
    RequestBody,
    AwaitResponse,
    Tunnel,
    HalfClosed,
    TunnelClosing,
    Refused,
    Replying,
    Closed,
    Gone,
  };
  static constexpr upstream::PhaseTable<Phase, 15> kPhases{
      "downstream",
      {{
          {Phase::New, "new", upstream::nextPhases(Phase::AwaitFirst, Phase::Replying)},
          {Phase::AwaitFirst, "await_first", upstream::nextPhases(Phase::Head, Phase::Closed)},
          {Phase::Idle, "idle", upstream::nextPhases(Phase::Head, Phase::Closed)},
          {Phase::Head, "head",
           upstream::nextPhases(Phase::Deciding, Phase::Replying, Phase::Closed)},
          {Phase::Deciding, "deciding",
           upstream::nextPhases(Phase::Connecting, Phase::RequestBody, Phase::AwaitResponse,
                                Phase::Replying)},
          {Phase::Connecting, "connecting",
           upstream::nextPhases(Phase::Tunnel, Phase::Refused, Phase::Replying, Phase::Closed)},
          {Phase::RequestBody, "request_body",
           upstream::nextPhases(Phase::AwaitResponse, Phase::Replying, Phase::Closed)},
          {Phase::AwaitResponse, "await_response",
           upstream::nextPhases(Phase::Idle, Phase::Head, Phase::Replying, Phase::Closed)},
          {Phase::Tunnel, "tunnel",
           upstream::nextPhases(Phase::HalfClosed, Phase::TunnelClosing, Phase::Closed)},
          {Phase::HalfClosed, "half_closed",
           upstream::nextPhases(Phase::TunnelClosing, Phase::Closed)},
          {Phase::TunnelClosing, "tunnel_closing", upstream::nextPhases(Phase::Closed)},
          {Phase::Refused, "refused", upstream::nextPhases(Phase::Closed)},
          {Phase::Replying, "replying", upstream::nextPhases(Phase::Closed)},
          {Phase::Closed, "closed", upstream::nextPhases(Phase::Gone)},
          {Phase::Gone, "gone", upstream::nextPhases()},
      }}};
  static_assert(kPhases.wellFormed());
  // The current request's two directions, which run independently (a
  // response may come, and even end, before the request body is all up).
  //   up       the app's direction                            goes to
  //   open     more may come from the app                     sending, done
  //   sending  a buffer is with the tunnel until its done     open
  //   done     complete (the body's end, or the app's FIN     open (the next request)
  //            passed on in a tunnel)
  enum class Up : uint8_t { Open, Sending, Done };
  static constexpr upstream::PhaseTable<Up, 3> kUp{
      "downstream up",
      {{
          {Up::Open, "open", upstream::nextPhases(Up::Sending, Up::Done)},
          {Up::Sending, "sending", upstream::nextPhases(Up::Open)},
          {Up::Done, "done", upstream::nextPhases(Up::Open)},
      }}};
  static_assert(kUp.wellFormed());
  //   down      the response's direction                      goes to
  //   awaiting  no response head went to the app yet          started
  //   started   a head went (the upstream's, or h2gate's own  done
  //             answer): too late for an error reply
  //   done      the upstream's direction is complete          awaiting (the next request)
  enum class Down : uint8_t { Awaiting, Started, Done };
  static constexpr upstream::PhaseTable<Down, 3> kDown{
      "downstream down",
      {{
          {Down::Awaiting, "awaiting", upstream::nextPhases(Down::Started)},
          {Down::Started, "started", upstream::nextPhases(Down::Done)},
          {Down::Done, "done", upstream::nextPhases(Down::Awaiting)},
      }}};
  static_assert(kDown.wellFormed());
  using Clock = std::chrono::steady_clock;
  // The one place each machine's phase changes.
  void moveTo(Phase to);
  void moveTo(Up to);
  void moveTo(Down to);
  // Waiting for, or reading, a request head (no request open).
  bool readingHead() const {
    return phase_ == Phase::AwaitFirst || phase_ == Phase::Idle || phase_ == Phase::Head;
  }
  bool inTunnel() const {
    return phase_ == Phase::Tunnel || phase_ == Phase::HalfClosed || phase_ == Phase::TunnelClosing;
  }
  bool closing() const { return phase_ == Phase::Closed || phase_ == Phase::Gone; }
  // Between beginRequest() and finishRequest().
  bool requestOpen() const { return !readingHead() && !closing() && phase_ != Phase::New; }

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
  // The response ended on a keep-alive connection: the next request.
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

  // The connection's one timer. What it measures follows the phase:
  //   await_first,     request_headers_timeout (since the accept, or since
  //   head             the first byte of the head)
  //   idle             idle_timeout (between keep-alive requests)
  //   connecting       connect_response_timeout
  //   request_body,    stream_idle_timeout since the last byte moved either
  //   await_response   way; and, until a response head, connect_response_timeout
  //                    (request_body: only while a body chunk waits for the
  //                    upstream to take it; a slow app is not the upstream's fault)
  //   tunnel,          tunnel_idle_timeout since the last tunnel byte, and
  //   half_closed,     in half_closed tunnel_half_close_timeout too
  //   tunnel_closing
  //   replying         stream_idle_timeout since the app last took a byte
  //   refused, new,    none (a refused CONNECT's answer goes at the app's
  //   deciding,        pace; the socket times its lingering close)
  //   closed, gone
  // deadline() computes the current deadline from timestamps; armTimer()
  // MUST be called after anything that can bring it forward (a phase
  // change). Later deadlines need no call: the pending wait fires early,
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
  // Metrics bookkeeping of the current request: its first response byte
  // went to the app (time to first byte observed); it is in
  // requests_started / requests_active (its target parsed).
  bool first_byte_ = false;
  bool request_counted_ = false;
  upstream::Router& router_;  // the worker's; outlives its connections
  const uint64_t id_;
  CloseHook on_close_;
  // Taken in start(), given back when the socket is closed; null when the
  // connection was refused (or the slot is back).
  std::shared_ptr<net::ConnectionLimit> slot_;
  asio::steady_timer timer_;
  Clock::time_point timer_expiry_ = Clock::time_point::max();  // of the live wait; max: none
  uint64_t timer_generation_ = 0;                              // only the live wait's handler acts
  Clock::time_point head_since_{};                             // await_first, head
  Clock::time_point idle_since_{};                             // idle
  Clock::time_point response_wait_since_{};  // hand-off, or a body chunk handed upstream
  Clock::time_point last_tunnel_activity_{};
  Clock::time_point stream_activity_{};  // request_body, await_response: see touchStream()
  Phase phase_ = Phase::New;
  Up up_ = Up::Open;
  Down down_ = Down::Awaiting;

  std::unique_ptr<http1::Parser> parser_;
  // The current request. head_ and info_ outlive the tunnel's use of them:
  // the tunnel is aborted or finished before they are reset.
  RequestHead head_;
  StreamInfo info_;
  uint64_t requests_ = 0;
  std::shared_ptr<upstream::Tunnel> tunnel_;
  std::string body_out_;  // decoded request body on its way upstream
  BodyFraming out_framing_ = BodyFraming::None;
  // The connection may carry another request after this one (the app's
  // head asked for it, and nothing since ruled it out).
  bool keep_alive_ = true;
  bool draining_ = false;  // drain(): no request after the current one
};

}  // namespace h2gate::downstream
