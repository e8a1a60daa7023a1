// DIRECT: h2gate connects to the destination itself (no upstream proxy).
// CONNECT becomes a raw TCP relay; absolute-form requests are sent to the
// origin in origin-form over a fresh connection, and the response is parsed
// so the app connection can carry the next request.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include <asio.hpp>

#include "config/config.h"
#include "gateway/http1/parser.h"
#include "gateway/upstream/tunnel.h"

namespace h2gate::upstream {

class DirectTunnel : public Tunnel, public std::enable_shared_from_this<DirectTunnel> {
 public:
  DirectTunnel(asio::io_context& io, config::Duration connect_timeout, uint64_t conn_id,
               uint64_t stream_id);
  ~DirectTunnel() override;

  void open(const RequestHead& head, StreamInfo& info, TunnelCallbacks& callbacks) override;
  void send(std::string_view data, Done done) override;
  void endOfRequest() override;
  void abort() override;

 private:
  enum class State { Idle, Resolving, Connecting, Open, Closed };
  void setState(State s);
  void onResolved(const asio::error_code& ec, asio::ip::tcp::resolver::results_type results);
  void connectNext();
  void onConnected();
  void fail(int status, Result result, std::string reason);
  void reset(Result result, std::string reason);
  void flush();
  void readMore();
  void onRead(size_t n);
  void onEof();
  void deliverBody(bool message_done);

  asio::io_context& io_;
  config::Duration connect_timeout_;
  uint64_t conn_id_;
  uint64_t stream_id_;
  State state_ = State::Idle;
  asio::ip::tcp::resolver resolver_;
  asio::ip::tcp::socket socket_;
  asio::steady_timer connect_timer_;
  std::vector<asio::ip::tcp::endpoint> endpoints_;
  size_t next_endpoint_ = 0;
  std::string last_connect_error_;

  const RequestHead* head_ = nullptr;     // owned by the downstream connection
  StreamInfo* info_ = nullptr;            // idem
  TunnelCallbacks* callbacks_ = nullptr;  // null after fail/reset/abort

  // App → upstream: at most one buffer in flight (see tunnel.h).
  std::string head_bytes_;    // origin-form request head, until written
  std::string_view pending_;  // body/tunnel bytes handed by send(), until written
  Done pending_done_;
  std::array<char, 24> chunk_header_{};
  bool end_pending_ = false;
  bool end_sent_ = false;
  bool writing_ = false;

  // Upstream → app.
  std::unique_ptr<http1::Parser> parser_;  // absolute-form only
  std::vector<char> read_buf_;
  std::string body_;
  bool response_started_ = false;
  bool skipping_interim_ = false;
};

}  // namespace h2gate::upstream
