// One app connection speaking HTTP/1.1 proxy protocol: CONNECT host:port and
// absolute-form requests, several per connection (keep-alive).
//
// Lifetime: owned by the worker's connection table (shared_ptr) and by its
// own pending I/O handlers. close() removes it from the table via a posted
// handler, so it never deletes itself in the middle of a callback. Before
// it drops its tunnel it calls tunnel->abort(), so no tunnel callback can
// reach a dead connection.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <asio.hpp>

#include "gateway/downstream/listener_context.h"
#include "gateway/downstream/listener_stats.h"
#include "gateway/http1/parser.h"
#include "gateway/upstream/pool.h"
#include "gateway/upstream/tunnel.h"

namespace h2gate::downstream {

class DownstreamConnection : public std::enable_shared_from_this<DownstreamConnection>,
                             public upstream::TunnelCallbacks {
 public:
  using CloseHook = std::function<void(uint64_t id)>;
  // `stats` is the worker's, for this listener; it outlives the connection.
  DownstreamConnection(asio::ip::tcp::socket socket, const ListenerContext& listener,
                       ListenerStats& stats, upstream::Upstreams& upstreams, uint64_t id,
                       CloseHook on_close);
  ~DownstreamConnection() override;

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
  void setState(State s);
  void readMore();
  void onRead(const asio::error_code& ec, size_t n);
  void process();
  // Opens the bookkeeping (head_, info_) of the connection's next request.
  void beginRequest(RequestHead head);
  void handleHead();
  void processBody();
  void pumpTunnel();
  void onAppEof();
  void startRequest(std::shared_ptr<upstream::Tunnel> tunnel);
  void finishRequest();
  void nextRequest();
  // Replies with an error of our own and closes after writing it.
  void replyError(int status, Result result, std::string reason);
  void maybeFinishTunnel();
  // One direction of a tunnel ended: watch the other for silence.
  void armHalfCloseTimer();
  void waitHalfClose(config::Duration wait);
  void touchTunnel() { last_tunnel_activity_ = std::chrono::steady_clock::now(); }
  void armIdleTimer();
  void close(bool abortive);
  // Metrics: the current request's route cells once its protocol is known
  // (null before), and byte accounting that uses them.
  ListenerStats::Route* route();
  void countUp(size_t n);
  void countDown(size_t n);

  // Output to the app: tries a non-blocking write first (direct dispatch),
  // queues only what the socket refuses. `done` runs once these bytes are
  // written, possibly before write() returns.
  void write(std::initializer_list<std::string_view> pieces, upstream::Done done);
  void startAsyncWrite();
  void closeAfterWrites();
  void lingerRead();
  void finalClose();

  asio::ip::tcp::socket socket_;
  std::unique_ptr<net::SendBufferTuner> tuner_;  // set in start()
  const ListenerContext& listener_;
  ListenerStats& stats_;
  ListenerStats::Route* route_ = nullptr;  // of the current request
  uint64_t unrouted_up_ = 0;               // bytes taken from the app before the protocol was known
  bool first_byte_ = false;          // the first response byte of this request went to the app
  bool request_counted_ = false;     // in requests_started / requests_active
  bool connection_counted_ = false;  // in downstream_connections_active
  upstream::Upstreams& upstreams_;   // the worker's pools; outlive its connections
  const uint64_t id_;
  CloseHook on_close_;
  asio::steady_timer idle_timer_;
  asio::steady_timer half_close_timer_;
  std::chrono::steady_clock::time_point last_tunnel_activity_{};
  bool half_close_armed_ = false;
  State state_ = State::ReadingHead;
  std::string peer_;

  std::unique_ptr<http1::Parser> parser_;
  std::vector<char> in_;  // bytes read from the app; [in_begin_, in_end_) unprocessed
  size_t in_begin_ = 0;
  size_t in_end_ = 0;
  bool reading_ = false;
  bool app_eof_ = false;

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

  // Output queue: bytes the socket did not take yet, and the done callbacks
  // keyed by the queue offset at which they are satisfied.
  std::string out_;         // queued, not yet handed to async_write
  std::string in_flight_;   // being written by async_write; immutable meanwhile
  uint64_t out_total_ = 0;  // bytes ever queued (async part)
  uint64_t out_flushed_ = 0;
  std::vector<std::pair<uint64_t, upstream::Done>> out_waiters_;
  bool writing_ = false;
  bool close_after_write_ = false;
  bool shutdown_after_write_ = false;  // tunnel: pass the destination's FIN on
  bool write_failed_ = false;
  bool closed_for_good_ = false;  // socket closed and the worker told
};

}  // namespace h2gate::downstream
