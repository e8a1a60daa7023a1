#include "gateway/server/own_addresses.h"

#include <algorithm>

#include "gateway/base/ascii.h"
#include "gateway/net/address.h"
#include "gateway/net/host_addresses.h"

namespace h2gate {
namespace {

asio::ip::address unmappedOrCompatible(const asio::ip::address& a) {
  if (!a.is_v6()) return a;
  const asio::ip::address_v6 v6 = a.to_v6();
  if (v6.is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, v6);
  // IPv4-compatible (::a.b.c.d, deprecated but still parsed): the IPv4
  // address. :: and ::1 are not.
  const auto b = v6.to_bytes();
  const bool compatible = std::all_of(b.begin(), b.begin() + 12, [](uint8_t x) { return x == 0; });
  if (compatible && !v6.is_unspecified() && !v6.is_loopback())
    return asio::ip::address_v4(asio::ip::address_v4::bytes_type{b[12], b[13], b[14], b[15]});
  return a;
}

// connect() to an unspecified address reaches the local host (Linux:
// loopback).
asio::ip::address connectTarget(const asio::ip::address& a) {
  if (!a.is_unspecified()) return a;
  return a.is_v4() ? asio::ip::address(asio::ip::address_v4::loopback())
                   : asio::ip::address(asio::ip::address_v6::loopback());
}

}  // namespace

std::vector<asio::ip::address> OwnAddresses::destinationAddresses(std::string_view host) {
  std::string h = toLowerAscii(host);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.size() > 1 && h.back() == '.') h.pop_back();
  if (h.empty()) return {};
  if (h == "localhost" || h.ends_with(".localhost"))
    return {asio::ip::address_v4::loopback(), asio::ip::address_v6::loopback()};
  if (h.find(':') != std::string::npos) {
    h = h.substr(0, h.find('%'));  // a zone index does not change the address
    asio::error_code ec;
    const asio::ip::address_v6 a6 = asio::ip::make_address_v6(h, ec);
    if (ec) return {};
    return {connectTarget(unmappedOrCompatible(a6))};
  }
  // What getaddrinfo() reads for a numeric IPv4 host.
  const std::optional<asio::ip::address_v4> a4 = net::parseIpv4AnyNotation(h);
  if (!a4) return {};
  return {connectTarget(*a4)};
}

void OwnAddresses::add(Socket socket) {
  socket.endpoint.address(unmappedOrCompatible(socket.endpoint.address()));
  sockets_.push_back(std::move(socket));
}

bool OwnAddresses::hasWildcard() const {
  return std::any_of(sockets_.begin(), sockets_.end(),
                     [](const Socket& s) { return s.endpoint.address().is_unspecified(); });
}

void OwnAddresses::addInterfaceAddresses() {
  for (const asio::ip::address& a : net::interfaceAddresses()) interfaces_.push_back(a);
}

bool OwnAddresses::reaches(const Socket& s, const asio::ip::address& dest) const {
  const asio::ip::address bound = s.endpoint.address();
  if (!bound.is_unspecified()) return bound == dest;
  // A wildcard socket: every local address of its family (and IPv4 too for
  // a dual-stack IPv6 one).
  if (bound.is_v4() != dest.is_v4() && !(s.dual_stack && dest.is_v4())) return false;
  if (dest.is_loopback()) return true;
  return std::find(interfaces_.begin(), interfaces_.end(), dest) != interfaces_.end();
}

const OwnAddresses::Socket* OwnAddresses::find(std::string_view host, uint16_t port) const {
  for (const asio::ip::address& d : destinationAddresses(host))
    if (const Socket* s = find(d, port)) return s;
  return nullptr;
}

const OwnAddresses::Socket* OwnAddresses::find(const asio::ip::address& address,
                                               uint16_t port) const {
  const asio::ip::address dest = connectTarget(unmappedOrCompatible(address));
  for (const Socket& s : sockets_)
    if (s.endpoint.port() == port && reaches(s, dest)) return &s;
  return nullptr;
}

OwnAddressFilter::OwnAddressFilter(std::shared_ptr<const OwnAddresses> own, std::string listener)
    : own_(std::move(own)), listener_(std::move(listener)) {}

std::string OwnAddressFilter::reason(const RequestHead& head, const std::string& resolved,
                                     const OwnAddresses::Socket& s) const {
  return "destination " + head.authority() + resolved + " is h2gate's own " + s.what + " (" +
         net::endpointText(s.endpoint) + "): refused, " +
         (s.admin ? "apps and web pages must not reach the admin endpoint through the proxy"
                  : "the request would loop back into h2gate") +
         " (listener " + listener_ + ": deny_own_addresses: false allows it)";
}

filters::FilterStatus OwnAddressFilter::onRequestHead(const RequestHead& head,
                                                      StreamInfo& info) const {
  const OwnAddresses::Socket* s = own_->find(head.host, head.port);
  if (!s) return filters::FilterStatus::Continue;
  info.status = 403;
  info.reason = reason(head, "", *s);
  return filters::FilterStatus::Stop;
}

std::optional<Refusal> OwnAddressFilter::checkAddress(const RequestHead& head, const StreamInfo&,
                                                      const net::IpAddress& address) const {
  asio::ip::address a;
  if (address.v6) {
    asio::ip::address_v6::bytes_type b;
    std::copy(address.bytes.begin(), address.bytes.end(), b.begin());
    a = asio::ip::address_v6(b);
  } else {
    a = asio::ip::address_v4(asio::ip::address_v4::bytes_type{address.bytes[0], address.bytes[1],
                                                              address.bytes[2], address.bytes[3]});
  }
  const OwnAddresses::Socket* s = own_->find(a, head.port);
  if (!s) return std::nullopt;
  return Refusal{403, reason(head, " (" + a.to_string() + ")", *s)};
}

}  // namespace h2gate
