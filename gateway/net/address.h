#pragma once

#include <string>

#include <asio/ip/tcp.hpp>

namespace h2gate::net {

// "1.2.3.4:443" or "[2001:db8::1]:443", for logs, error bodies and the
// access log.
inline std::string endpointText(const asio::ip::tcp::endpoint& ep) {
  const asio::ip::address a = ep.address();
  return a.is_v6() ? "[" + a.to_string() + "]:" + std::to_string(ep.port())
                   : a.to_string() + ":" + std::to_string(ep.port());
}

// An IPv4-mapped IPv6 address (::ffff:a.b.c.d, as a dual-stack socket gives
// an IPv4 peer) as the IPv4 address it stands for; any other address as is.
inline asio::ip::address unmapped(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped())
    return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  return a;
}

}  // namespace h2gate::net
