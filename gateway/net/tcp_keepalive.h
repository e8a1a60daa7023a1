// TCP keepalive on a connected socket: the stack probes a connection that
// has been silent for `idle`, every `interval`, and gives up after `count`
// unanswered probes. For HTTP/1.1 upstream connections, which have no PING.
// Linux: TCP_KEEPIDLE/KEEPINTVL/KEEPCNT (tcp_keepalive_posix.cc; elsewhere
// only SO_KEEPALIVE). Windows: SIO_KEEPALIVE_VALS (tcp_keepalive_win.cc),
// which sets idle and interval; the probe count is the system's (10).
#pragma once

#include <chrono>

#include <asio.hpp>

namespace h2gate::net {

void enableTcpKeepalive(asio::ip::tcp::socket& socket, std::chrono::nanoseconds idle,
                        std::chrono::nanoseconds interval, int count);

}  // namespace h2gate::net
