#include "gateway/upstream/direct_tunnel.h"

#include <algorithm>

#include "gateway/base/ascii.h"
#include "gateway/base/log.h"
#include "gateway/http1/codec.h"
#include "gateway/net/address.h"
#include "gateway/net/host_addresses.h"
#include "gateway/net/ip_address.h"
#include "gateway/net/socket_tuning.h"
#include "gateway/upstream/http1_exchange.h"

namespace h2gate::upstream {
bool isLocalhostName(std::string_view host) {
  if (!host.empty() && host.back() == '.') host.remove_suffix(1);
  constexpr std::string_view kSuffix = ".localhost";
  return iequals(host, "localhost") || (host.size() > kSuffix.size() && iendsWith(host, kSuffix));
}

DirectTunnel::DirectTunnel(asio::io_context& io, config::Duration connect_timeout, uint64_t conn_id,
                           uint64_t stream_id, net::SendBufferConfig tuning,
                           const AddressPolicy* policy)
    : connect_timeout_(connect_timeout),
      tuning_(tuning),
      policy_(policy),
      conn_id_(conn_id),
      stream_id_(stream_id),
      resolver_(io),
      socket_(io),
      connect_timer_(io) {}

void DirectTunnel::open(const RequestHead& head, StreamInfo& info, TunnelCallbacks& callbacks) {
  save(head, info, callbacks);
  info.protocol = "direct";
  connecting_ = true;
  asio::error_code ec;
  const asio::ip::address literal = asio::ip::make_address(head.host, ec);
  if (!ec) {
    endpoints_.emplace_back(literal, head.port);
  } else if (isLocalhostName(head.host)) {
    endpoints_.emplace_back(asio::ip::address_v4::loopback(), head.port);
    endpoints_.emplace_back(asio::ip::address_v6::loopback(), head.port);
  }
  // One deadline for name resolution and every connect attempt.
  connect_timer_.expires_after(connect_timeout_);
  connect_timer_.async_wait([self = shared_from_this()](const asio::error_code& e) {
    if (e || !self->connecting_) return;
    H2G_LOG(Info, self->conn_id_, self->stream_id_,
            "direct: connect to " << self->head_->authority() << " timed out");
    self->stopConnecting();
    self->fail(504, Result::ConnectTimeout,
               "connecting to " + self->head_->authority() + " timed out");
  });
  if (!endpoints_.empty()) {
    if (admitEndpoints()) connectNext();
    return;
  }
  resolver_.async_resolve(head.host, std::to_string(head.port),
                          [self = shared_from_this()](const asio::error_code& e,
                                                      asio::ip::tcp::resolver::results_type r) {
                            self->onResolved(e, std::move(r));
                          });
}

void DirectTunnel::onResolved(const asio::error_code& ec,
                              asio::ip::tcp::resolver::results_type results) {
  if (!connecting_) return;
  if (ec) {
    H2G_LOG(Info, conn_id_, stream_id_,
            "direct: DNS lookup of " << head_->host << " failed: " << ec.message());
    stopConnecting();
    fail(502, Result::DnsFailed, "DNS lookup of " + head_->host + " failed: " + ec.message());
    return;
  }
  for (const auto& r : results) endpoints_.push_back(r.endpoint());
  if (admitEndpoints()) connectNext();
}

bool DirectTunnel::admitEndpoints() {
  std::vector<asio::ip::tcp::endpoint> admitted;
  std::string unspecified;
  for (const asio::ip::tcp::endpoint& ep : endpoints_) {
    const net::IpAddress ip = net::toIpAddress(ep.address()).unmapped();
    if (ip.unspecified()) {
      unspecified = ip.str();
      continue;
    }
    if (policy_) {
      if (std::optional<Refusal> refusal = policy_->checkAddress(*head_, *info_, ip)) {
        H2G_LOG(Debug, conn_id_, stream_id_,
                "direct: " << head_->host << " resolves to " << ip.str() << ": refused");
        stopConnecting();
        fail(refusal->status, Result::Rejected, std::move(refusal->reason));
        return false;
      }
    }
    asio::ip::tcp::endpoint e = ep;
    if (ip.v6 != ep.address().is_v6()) {  // IPv4-mapped/-compatible: connect to the IPv4 address
      asio::ip::address_v4::bytes_type b;
      std::copy(ip.bytes.begin(), ip.bytes.begin() + 4, b.begin());
      e = asio::ip::tcp::endpoint(asio::ip::address_v4(b), ep.port());
    }
    if (std::find(admitted.begin(), admitted.end(), e) == admitted.end()) admitted.push_back(e);
  }
  if (admitted.empty()) {
    const std::string reason =
        "connecting to " + head_->authority() + " failed: " +
        (unspecified.empty()
             ? std::string("no address")
             : head_->host + " resolves only to the unspecified address " + unspecified +
                   ", which means this host and is not a destination");
    H2G_LOG(Info, conn_id_, stream_id_, "direct: " << reason);
    stopConnecting();
    fail(502, Result::ConnectFailed, reason);
    return false;
  }
  endpoints_ = std::move(admitted);
  return true;
}

void DirectTunnel::connectNext() {
  if (next_endpoint_ >= endpoints_.size()) {
    const std::string reason = "connecting to " + head_->authority() + " failed: " +
                               (last_connect_error_.empty() ? "no address" : last_connect_error_);
    H2G_LOG(Info, conn_id_, stream_id_, "direct: " << reason);
    stopConnecting();
    fail(502, Result::ConnectFailed, reason);
    return;
  }
  const asio::ip::tcp::endpoint ep = endpoints_[next_endpoint_++];
  asio::error_code ignored;
  socket_.close(ignored);
  H2G_LOG(Debug, conn_id_, stream_id_, "direct: connecting to " << net::endpointText(ep));
  socket_.async_connect(ep, [self = shared_from_this(), ep](const asio::error_code& e) {
    if (!self->connecting_) return;
    if (e) {
      H2G_LOG(Debug, self->conn_id_, self->stream_id_,
              "direct: connect to " << net::endpointText(ep) << " failed: " << e.message());
      self->last_connect_error_ = net::endpointText(ep) + ": " + e.message();
      self->connectNext();
      return;
    }
    self->onConnected();
  });
}

void DirectTunnel::onConnected() {
  connecting_ = false;
  connect_timer_.cancel();
  asio::error_code ec;
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  const auto remote = socket_.remote_endpoint(ec);
  if (!ec) info_->upstream = net::endpointText(remote);
  H2G_LOG(Debug, conn_id_, stream_id_, "direct: connected to " << info_->upstream);
  auto tuner = net::tuneSocket(socket_, tuning_, conn_id_);
  std::string head_bytes;
  if (!head_->is_connect) {
    // A fresh connection per request, closed after the response: the app
    // connection is kept alive, the origin connection is not reused.
    http1::appendOriginRequest(head_bytes, *head_, /*close_after=*/true);
  }
  auto transport = std::make_unique<Transport>(std::move(socket_), std::move(tuner));
  transport->setLogId(conn_id_);
  attach(std::make_shared<Http1Exchange>(
      std::move(transport),
      head_->is_connect ? Http1Exchange::Kind::DirectConnect : Http1Exchange::Kind::Request,
      std::move(head_bytes), conn_id_, stream_id_));
}

void DirectTunnel::stopConnecting() {
  connecting_ = false;
  connect_timer_.cancel();
  resolver_.cancel();
  asio::error_code ec;
  socket_.close(ec);
}

void DirectTunnel::abort() {
  if (connecting_) stopConnecting();
  PendingTunnel::abort();
}

}  // namespace h2gate::upstream
