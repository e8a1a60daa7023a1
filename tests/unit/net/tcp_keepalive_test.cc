// TCP keepalive as set on HTTP/1.1 upstream connections, read back.
#ifdef __linux__
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>

#include <asio.hpp>

#include "gateway/net/tcp_keepalive.h"

using asio::ip::tcp;
using namespace std::chrono_literals;

TEST_CASE("tcp keepalive: idle, interval and count read back", "[net][keepalive]") {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  tcp::socket client(io);
  client.connect(acceptor.local_endpoint());
  h2gate::net::enableTcpKeepalive(client, 30s, 5s, 3);
  auto get = [&](int level, int name) {
    int v = 0;
    socklen_t len = sizeof v;
    REQUIRE(::getsockopt(client.native_handle(), level, name, &v, &len) == 0);
    return v;
  };
  CHECK(get(SOL_SOCKET, SO_KEEPALIVE) == 1);
  CHECK(get(IPPROTO_TCP, TCP_KEEPIDLE) == 30);
  CHECK(get(IPPROTO_TCP, TCP_KEEPINTVL) == 5);
  CHECK(get(IPPROTO_TCP, TCP_KEEPCNT) == 3);
  // Sub-second settings round up to the kernel's 1 s minimum.
  h2gate::net::enableTcpKeepalive(client, 200ms, 100ms, 2);
  CHECK(get(IPPROTO_TCP, TCP_KEEPIDLE) == 1);
  CHECK(get(IPPROTO_TCP, TCP_KEEPINTVL) == 1);
}
#endif
