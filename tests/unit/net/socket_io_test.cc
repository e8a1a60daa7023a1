// One send() or recv() on a non-blocking socket (gateway/net/socket_io.h)
// through its interface, POSIX (socket_io_posix.cc) or WinSock
// (socket_io_win.cc): bytes move, "would block" is told apart from a
// failure, the peer's FIN is 0, and a peer that is gone is an error, not a
// signal that kills the process.
#include "gateway/net/socket_io.h"

#include <chrono>
#include <string>
#include <thread>

#include <asio.hpp>
#include <catch2/catch.hpp>

using namespace h2gate;
using asio::ip::tcp;

namespace {

struct Pair {
  Pair() {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    a.connect(acceptor.local_endpoint());
    acceptor.accept(b);
    a.non_blocking(true);
    b.non_blocking(true);
  }
  net::NativeSocket na() { return static_cast<net::NativeSocket>(a.native_handle()); }
  net::NativeSocket nb() { return static_cast<net::NativeSocket>(b.native_handle()); }
  asio::io_context io;
  tcp::socket a{io};
  tcp::socket b{io};
};

// recv until something comes (bounded).
net::SocketIoResult recvSome(net::NativeSocket s, char* buf, size_t len) {
  net::SocketIoResult r;
  for (int i = 0; i < 500; ++i) {
    r = net::socketRecv(s, buf, len);
    if (!r.would_block) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return r;
}

}  // namespace

TEST_CASE("socket io: bytes both ways; nothing there is would_block", "[net][socket_io]") {
  Pair p;
  char buf[64];
  net::SocketIoResult r = net::socketRecv(p.nb(), buf, sizeof buf);
  CHECK(r.n < 0);
  CHECK(r.would_block);

  r = net::socketSend(p.na(), "hello", 5);
  CHECK(r.n == 5);
  CHECK_FALSE(r.would_block);
  r = recvSome(p.nb(), buf, sizeof buf);
  REQUIRE(r.n == 5);
  CHECK(std::string(buf, 5) == "hello");
}

TEST_CASE("socket io: a full send buffer is would_block, not an error", "[net][socket_io]") {
  Pair p;
  const std::string chunk(64 * 1024, 'x');
  net::SocketIoResult r;
  long long total = 0;
  for (int i = 0; i < 10000; ++i) {  // the peer reads nothing: the buffers fill
    r = net::socketSend(p.na(), chunk.data(), chunk.size());
    if (r.n < 0) break;
    total += r.n;
  }
  CHECK(total > 0);
  CHECK(r.n < 0);
  CHECK(r.would_block);
}

TEST_CASE("socket io: the peer's FIN is 0; a peer gone is an error, the process lives",
          "[net][socket_io]") {
  Pair p;
  p.a.shutdown(tcp::socket::shutdown_send);
  char buf[16];
  net::SocketIoResult r = recvSome(p.nb(), buf, sizeof buf);
  CHECK(r.n == 0);
  CHECK_FALSE(r.would_block);

  // b's end closed for good (a reset on the next bytes to it): sending
  // fails with an error code, without SIGPIPE.
  p.b.close();
  for (int i = 0; i < 500; ++i) {
    r = net::socketSend(p.na(), "x", 1);
    if (r.n < 0 && !r.would_block) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(r.n < 0);
  CHECK_FALSE(r.would_block);
  const asio::error_code ec(r.error, asio::system_category());
  INFO(ec.message());
  CHECK((ec == asio::error::broken_pipe || ec == asio::error::connection_reset ||
         ec == asio::error::connection_aborted || ec == asio::error::shut_down));
}
