#include "gateway/net/host_addresses.h"

#include <algorithm>

#include <asio/io_context.hpp>
#include <asio/ip/udp.hpp>

namespace h2gate::net {

IpAddress toIpAddress(const asio::ip::address& a) {
  IpAddress ip;
  if (a.is_v4()) {
    const auto b = a.to_v4().to_bytes();
    std::copy(b.begin(), b.end(), ip.bytes.begin());
  } else {
    ip.v6 = true;
    const auto b = a.to_v6().to_bytes();
    std::copy(b.begin(), b.end(), ip.bytes.begin());
  }
  return ip;
}

std::optional<asio::ip::address> routeSourceAddress(const asio::ip::address& destination) {
  // The socket is never run: its io_context only owns it.
  asio::io_context io;
  asio::ip::udp::socket socket(io);
  asio::error_code ec;
  socket.open(destination.is_v6() ? asio::ip::udp::v6() : asio::ip::udp::v4(), ec);
  if (ec) return std::nullopt;
  socket.connect(asio::ip::udp::endpoint(destination, 53), ec);
  if (ec) return std::nullopt;
  const asio::ip::udp::endpoint local = socket.local_endpoint(ec);
  if (ec) return std::nullopt;
  return local.address();
}

}  // namespace h2gate::net
