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

}  // namespace h2gate::net
