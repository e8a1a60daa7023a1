#include "gateway/net/host_addresses.h"

#include <asio/io_context.hpp>
#include <asio/ip/udp.hpp>

namespace h2gate::net {

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
