// DIRECT: h2gate connects to the destination itself (no upstream proxy).
// Resolves the name (localhost without DNS), puts every address to the
// listener's AddressPolicy (its filters: the acl's deny ranges judge the
// addresses actually connected to, not just the name), tries every address
// under one deadline, then hands the connection to an Http1Exchange: a raw
// relay for CONNECT, an origin-form request over a fresh connection
// otherwise.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <asio.hpp>

#include "config/config.h"
#include "gateway/net/send_buffer.h"
#include "gateway/upstream/pending_tunnel.h"
#include "gateway/upstream/router.h"

namespace h2gate::upstream {

class DirectTunnel : public PendingTunnel, public std::enable_shared_from_this<DirectTunnel> {
 public:
  // `tuning`: the listener's send-buffer settings, for the socket to the
  // destination (uploads leave the machine there in direct mode).
  // `policy`: asked about each address before any connect; null: none. It
  // must outlive the connecting phase (see DirectOptions::policy).
  DirectTunnel(asio::io_context& io, config::Duration connect_timeout, uint64_t conn_id,
               uint64_t stream_id, net::SendBufferConfig tuning = {},
               const AddressPolicy* policy = nullptr);

  void open(const RequestHead& head, StreamInfo& info, TunnelCallbacks& callbacks) override;
  void abort() override;

 private:
  void onResolved(const asio::error_code& ec, asio::ip::tcp::resolver::results_type results);
  // Before the first connect: IPv4-mapped addresses as IPv4, the
  // unspecified address (0.0.0.0, ::: this host) dropped, and every address
  // put to the policy; any refusal refuses the request. False when the
  // request ended here (refused, or no address left).
  bool admitEndpoints();
  void connectNext();
  void onConnected();
  void stopConnecting();

  config::Duration connect_timeout_;
  net::SendBufferConfig tuning_;
  const AddressPolicy* policy_;
  uint64_t conn_id_;
  uint64_t stream_id_;
  bool connecting_ = false;
  asio::ip::tcp::resolver resolver_;
  asio::ip::tcp::socket socket_;
  asio::steady_timer connect_timer_;
  std::vector<asio::ip::tcp::endpoint> endpoints_;
  size_t next_endpoint_ = 0;
  std::string last_connect_error_;
};

// RFC 6761: "localhost" and "*.localhost" are loopback, without asking DNS.
bool isLocalhostName(std::string_view host);

}  // namespace h2gate::upstream
