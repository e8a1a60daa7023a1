#include <netinet/in.h>
#include <netinet/tcp.h>

#include <algorithm>

#include "gateway/net/tcp_keepalive.h"

namespace h2gate::net {

void enableTcpKeepalive(asio::ip::tcp::socket& socket, std::chrono::nanoseconds idle,
                        std::chrono::nanoseconds interval, int count) {
  asio::error_code ec;
  socket.set_option(asio::socket_base::keep_alive(true), ec);
#if defined(TCP_KEEPIDLE) && defined(TCP_KEEPINTVL) && defined(TCP_KEEPCNT)
  auto secs = [](std::chrono::nanoseconds d) {
    return static_cast<int>(
        std::max<long long>(1, std::chrono::duration_cast<std::chrono::seconds>(d).count()));
  };
  socket.set_option(asio::detail::socket_option::integer<IPPROTO_TCP, TCP_KEEPIDLE>(secs(idle)),
                    ec);
  socket.set_option(
      asio::detail::socket_option::integer<IPPROTO_TCP, TCP_KEEPINTVL>(secs(interval)), ec);
  socket.set_option(asio::detail::socket_option::integer<IPPROTO_TCP, TCP_KEEPCNT>(count), ec);
#else
  (void)idle;
  (void)interval;
  (void)count;
#endif
}

}  // namespace h2gate::net
