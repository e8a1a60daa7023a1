#include <winsock2.h>
// mstcpip.h after winsock2.h: struct tcp_keepalive, SIO_KEEPALIVE_VALS.
#include <mstcpip.h>

#include <algorithm>

#include "gateway/net/tcp_keepalive.h"

namespace h2gate::net {

void enableTcpKeepalive(asio::ip::tcp::socket& socket, std::chrono::nanoseconds idle,
                        std::chrono::nanoseconds interval, int count) {
  (void)count;  // SIO_KEEPALIVE_VALS has no count: Windows sends 10 probes
  asio::error_code ec;
  socket.set_option(asio::socket_base::keep_alive(true), ec);
  auto ms = [](std::chrono::nanoseconds d) {
    return static_cast<ULONG>(std::clamp<long long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(d).count(), 1000, 0x7fffffff));
  };
  tcp_keepalive vals{};
  vals.onoff = 1;
  vals.keepalivetime = ms(idle);
  vals.keepaliveinterval = ms(interval);
  DWORD returned = 0;
  // Best effort like the POSIX options: SO_KEEPALIVE alone still probes.
  (void)::WSAIoctl(socket.native_handle(), SIO_KEEPALIVE_VALS, &vals, sizeof vals, nullptr, 0,
                   &returned, nullptr, nullptr);
}

}  // namespace h2gate::net
