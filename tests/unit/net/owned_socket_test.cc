// A listening socket handed to a worker (gateway/net/owned_socket.h) through
// its interface. POSIX (owned_socket_posix.cc): each worker accepts on a
// duplicate in its own event loop, which goes on accepting on the port
// whoever else closed theirs. Windows (owned_socket_win.cc): the server's
// loop accepts for the workers. One owner closes it, once.
#include "gateway/net/owned_socket.h"

#if !defined(_WIN32)
#include <fcntl.h>
#endif

#include <chrono>
#include <string>

#include <asio.hpp>
#include <catch2/catch.hpp>

using namespace h2gate;
using asio::ip::tcp;

TEST_CASE("owned socket: a duplicate listens on the same port in another event loop",
          "[net][owned_socket]") {
  asio::io_context server_io;
  tcp::acceptor original(server_io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  std::string error;
  net::OwnedSocket dup = net::duplicateListener(original, &error);
  INFO(error);
  REQUIRE(dup);
  CHECK(error.empty());
#if !defined(_WIN32)
  CHECK(net::listenerPerWorker());
  asio::io_context worker_io;
  tcp::acceptor worker(worker_io);
  const tcp::endpoint where = original.local_endpoint();
  worker.assign(tcp::v4(), dup.release());
  CHECK_FALSE(dup);  // released: the acceptor owns it now
  // The server closes its own socket: the worker's duplicate still accepts.
  original.close();
  tcp::socket client(worker_io);
  client.connect(where);
  tcp::socket accepted(worker_io);
  asio::error_code ec;
  worker.accept(accepted, ec);
  CHECK_FALSE(ec);
  CHECK(accepted.remote_endpoint(ec) == client.local_endpoint());
#else
  CHECK_FALSE(net::listenerPerWorker());
#endif
}

TEST_CASE("owned socket: moved, released, closed once", "[net][owned_socket]") {
  asio::io_context io;
  tcp::acceptor original(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  std::string error;
  net::OwnedSocket a = net::duplicateListener(original, &error);
  REQUIRE(a);
  const net::NativeListener handle = a.get();
  net::OwnedSocket b = std::move(a);
  CHECK_FALSE(a);
  CHECK(b);
  CHECK(b.get() == handle);
  net::OwnedSocket c;
  CHECK_FALSE(c);
  c = std::move(b);
  CHECK(c.get() == handle);
  c.reset();
  CHECK_FALSE(c);
#if !defined(_WIN32)
  CHECK(::fcntl(handle, F_GETFD) == -1);  // closed: the descriptor is gone
#endif
  c.reset();  // nothing left to close
  // The original is untouched by its duplicate's close.
  tcp::socket client(io);
  asio::error_code ec;
  client.connect(original.local_endpoint(), ec);
  CHECK_FALSE(ec);
}
