// AppSocket against a real peer (loopback TCP, the test's end blocking or
// asynchronous on the same io_context): reads into a buffer that exists
// only while bytes are there, direct-dispatch writes with tunnel.h's `done`
// contract, held bytes, the FIN after the queue, lingering and abortive
// closes, failures.
#include "gateway/downstream/app_socket.h"

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <asio.hpp>
#include <catch2/catch.hpp>

#include "tests/unit/upstream/io_util.h"

using namespace h2gate;
using namespace h2gate::downstream;
using namespace std::chrono_literals;
using asio::ip::tcp;

namespace {

// The owner: records what the socket tells it.
struct Owner : AppSocket::Handler {
  explicit Owner(tcp::socket s) : socket(std::move(s)) {}

  void onAppBytes() override {
    ++bytes_events;
    got.append(socket.buffered());
    socket.consume(socket.buffered().size());
    socket.read();
  }
  void onAppEof() override { eof = true; }
  void onAppError(const asio::error_code& ec, AppSocket::Failure what) override {
    error = ec;
    failure = what;
  }
  void onAppTook() override { ++took; }
  void onAppWritesDone() override {
    writes_done = true;
    socket.close(false);
  }
  void onAppClosed() override { closed = true; }

  AppSocket socket;
  std::string got;
  int bytes_events = 0;
  bool eof = false;
  asio::error_code error;
  std::optional<AppSocket::Failure> failure;
  int took = 0;
  bool writes_done = false;
  bool closed = false;
};

struct AppSocketFixture {
  AppSocketFixture() {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    peer.connect(acceptor.local_endpoint());
    tcp::socket s(io);
    acceptor.accept(s);
    owner = std::make_shared<Owner>(std::move(s));
    owner->socket.start(owner, net::SendBufferConfig{}, 1);
  }
  ~AppSocketFixture() {
    asio::error_code ec;
    peer.close(ec);
    owner->socket.close(true);
    io.restart();
    io.poll();
  }
  bool waitFor(const std::function<bool()>& cond, std::chrono::milliseconds limit = 5000ms) {
    return test::runUntil(io, cond, limit);
  }
  void settle(std::chrono::milliseconds d = 50ms) {
    test::runUntil(
        io, [] { return false; }, d);
  }
  // Reads from the peer's end until `n` bytes came or it ended.
  std::string peerRead(size_t n, asio::error_code* end = nullptr) {
    std::string out;
    std::array<char, 64 * 1024> buf{};
    asio::error_code ec;
    while (out.size() < n) {
      const size_t k = peer.read_some(asio::buffer(buf), ec);
      if (ec) break;
      out.append(buf.data(), k);
    }
    if (end) *end = ec;
    return out;
  }

  asio::io_context io;
  tcp::socket peer{io};
  std::shared_ptr<Owner> owner;
};

}  // namespace

TEST_CASE("AppSocket reads: bytes, then EOF; no buffer is held while nothing is there",
          "[downstream][app_socket]") {
  AppSocketFixture f;
  AppSocket& s = f.owner->socket;
  CHECK(s.peer().starts_with("127.0.0.1:"));
  s.read();
  asio::write(f.peer, asio::buffer(std::string("hello")));
  REQUIRE(f.waitFor([&] { return f.owner->got == "hello"; }));
  // Consumed, and the socket is empty again: the read now pending holds no
  // buffer (an idle connection costs none).
  CHECK(s.buffered().empty());
  CHECK(s.buffered().data() == nullptr);
  asio::write(f.peer, asio::buffer(std::string(" world")));
  REQUIRE(f.waitFor([&] { return f.owner->got == "hello world"; }));
  f.peer.shutdown(tcp::socket::shutdown_send);
  REQUIRE(f.waitFor([&] { return f.owner->eof; }));
  CHECK(s.eof());
  CHECK_FALSE(f.owner->failure);
}

TEST_CASE("AppSocket reads: a full buffer stops reading until the owner consumes",
          "[downstream][app_socket]") {
  struct Lazy : Owner {
    using Owner::Owner;
    void onAppBytes() override {
      ++bytes_events;
      socket.read();  // keeps everything
    }
  };
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  tcp::socket peer(io);
  peer.connect(acceptor.local_endpoint());
  tcp::socket s(io);
  acceptor.accept(s);
  auto owner = std::make_shared<Lazy>(std::move(s));
  owner->socket.start(owner, net::SendBufferConfig{}, 1);
  owner->socket.read();
  const std::string data(3 * AppSocket::kReadSize, 'd');
  asio::write(peer, asio::buffer(data));
  REQUIRE(test::runUntil(
      io, [&] { return owner->socket.buffered().size() == AppSocket::kReadSize; }, 5000ms));
  test::runUntil(
      io, [] { return false; }, 50ms);
  CHECK(owner->socket.buffered().size() == AppSocket::kReadSize);  // no more than a buffer
  size_t total = 0;
  REQUIRE(test::runUntil(
      io,
      [&] {
        total += owner->socket.buffered().size();
        owner->socket.consume(owner->socket.buffered().size());
        owner->socket.read();
        return total == data.size();
      },
      5000ms));
  owner->socket.close(true);
  io.restart();
  io.poll();
}

TEST_CASE("AppSocket writes: done at once when the socket takes all, held back by a slow app",
          "[downstream][app_socket]") {
  AppSocketFixture f;
  AppSocket& s = f.owner->socket;
  bool done = false;
  s.write({"small"}, [&] { done = true; });
  CHECK(done);  // direct dispatch: inside write()
  CHECK_FALSE(s.backlog());
  CHECK(f.peerRead(5) == "small");

  // More than the socket buffers hold, and the app does not read.
  const std::string big(32 << 20, 'b');
  done = false;
  s.write({big}, [&] { done = true; });
  CHECK_FALSE(done);
  CHECK(s.backlog());
  f.settle(200ms);
  CHECK_FALSE(done);
  CHECK(f.owner->took == 0);
  // The app reads: the queue drains and done runs once.
  std::string got;
  std::array<char, 256 * 1024> buf{};
  REQUIRE(f.waitFor(
      [&] {
        asio::error_code ec;
        f.peer.non_blocking(true);
        const size_t n = f.peer.read_some(asio::buffer(buf), ec);
        if (!ec) got.append(buf.data(), n);
        return got.size() == big.size();
      },
      30000ms));
  REQUIRE(f.waitFor([&] { return done; }));
  CHECK(f.owner->took > 0);
  CHECK_FALSE(s.backlog());
  CHECK(got == big);
}

TEST_CASE("AppSocket: held writes go out in front of the next one", "[downstream][app_socket]") {
  AppSocketFixture f;
  AppSocket& s = f.owner->socket;
  s.hold(true);
  bool head_done = false;
  s.write({"HEAD|"}, [&] { head_done = true; });
  CHECK(head_done);  // copied aside
  s.hold(false);
  f.settle();
  asio::error_code ec;
  f.peer.non_blocking(true);
  std::array<char, 16> buf{};
  f.peer.read_some(asio::buffer(buf), ec);
  CHECK(ec == asio::error::would_block);  // nothing went out yet
  f.peer.non_blocking(false);
  const std::string_view pieces[] = {"body1|", "body2"};
  bool body_done = false;
  s.write(pieces, 2, [&] { body_done = true; });
  CHECK(body_done);
  CHECK(f.peerRead(16) == "HEAD|body1|body2");

  s.hold(true);
  s.write({"alone"}, nullptr);
  s.hold(false);
  s.flushHeld();
  CHECK(f.peerRead(5) == "alone");
}

TEST_CASE("AppSocket: the FIN goes after the queued bytes, and reading goes on",
          "[downstream][app_socket]") {
  AppSocketFixture f;
  AppSocket& s = f.owner->socket;
  s.read();
  const std::string big(16 << 20, 'q');
  s.write({big}, nullptr);
  REQUIRE(s.backlog());
  s.shutdownAfterWrites();
  std::thread reader([&] {
    asio::error_code end;
    const std::string got = f.peerRead(big.size() + 1, &end);
    CHECK(got.size() == big.size());
    CHECK(end == asio::error::eof);
  });
  REQUIRE(f.waitFor([&] { return !s.backlog(); }, 30000ms));
  reader.join();
  asio::write(f.peer, asio::buffer(std::string("after")));
  REQUIRE(f.waitFor([&] { return f.owner->got == "after"; }));
  CHECK_FALSE(s.closed());
}

TEST_CASE("AppSocket: a graceful close lingers, reading what the app still sends",
          "[downstream][app_socket]") {
  AppSocketFixture f;
  AppSocket& s = f.owner->socket;
  s.write({"bye"}, nullptr);
  s.closeAfterWrites();
  CHECK(f.owner->writes_done);  // written at once: the owner closed
  CHECK(s.closed());
  asio::error_code end;
  CHECK(f.peerRead(4, &end) == "bye");
  CHECK(end == asio::error::eof);
  // The app still sends: read and dropped, no reset.
  asio::write(f.peer, asio::buffer(std::string("late bytes")));
  f.settle(100ms);
  CHECK_FALSE(f.owner->closed);
  f.peer.shutdown(tcp::socket::shutdown_send);
  REQUIRE(f.waitFor([&] { return f.owner->closed; }));
  CHECK(f.owner->got.empty());  // nothing reached the owner after close
}

TEST_CASE("AppSocket: lingering ends after kLingerTime when the app never closes",
          "[downstream][app_socket]") {
  AppSocketFixture f;
  const auto t0 = std::chrono::steady_clock::now();
  f.owner->socket.close(false);
  REQUIRE(f.waitFor([&] { return f.owner->closed; }, 10000ms));
  CHECK(std::chrono::steady_clock::now() - t0 >= AppSocket::kLingerTime - 100ms);
}

TEST_CASE("AppSocket: an abortive close resets the connection", "[downstream][app_socket]") {
  AppSocketFixture f;
  f.owner->socket.write({"x"}, nullptr);
  CHECK(f.peerRead(1) == "x");
  f.owner->socket.close(true);
  CHECK(f.owner->closed);
  asio::error_code end;
  f.peerRead(1, &end);
  CHECK(end == asio::error::connection_reset);
}

TEST_CASE("AppSocket: failures reach the owner, a write's while it is still in write()",
          "[downstream][app_socket]") {
  SECTION("a reset while reading") {
    AppSocketFixture f;
    f.owner->socket.read();
    f.peer.set_option(asio::socket_base::linger(true, 0));
    f.peer.close();
    REQUIRE(f.waitFor([&] { return f.owner->failure.has_value(); }));
    CHECK(*f.owner->failure == AppSocket::Failure::Read);
    CHECK(f.owner->error == asio::error::connection_reset);
  }
  SECTION("a write into a reset connection") {
    AppSocketFixture f;
    f.peer.set_option(asio::socket_base::linger(true, 0));
    f.peer.close();
    f.settle();
    bool done = false;
    f.owner->socket.write({"into the void"}, [&] { done = true; });
    REQUIRE(f.owner->failure.has_value());  // reported inside write()
    CHECK(*f.owner->failure == AppSocket::Failure::WriteNow);
    CHECK_FALSE(done);
    // Nothing more is written once it failed.
    f.owner->failure.reset();
    f.owner->socket.write({"again"}, [&] { done = true; });
    CHECK_FALSE(f.owner->failure);
    CHECK_FALSE(done);
  }
}

TEST_CASE("AppSocket: bytes both ways through full and empty sockets, waiting on completions only",
          "[downstream][app_socket][iocp]") {
  AppSocketFixture f;
  AppSocket& s = f.owner->socket;
  std::string up(4 << 20, '\0');
  for (size_t i = 0; i < up.size(); ++i) up[i] = static_cast<char>('a' + i % 23);
  std::string down(8 << 20, '\0');
  for (size_t i = 0; i < down.size(); ++i) down[i] = static_cast<char>('A' + i % 19);

  // App to h2gate: the drained socket is waited on between bursts.
  s.read();
  bool sent = false;
  asio::async_write(f.peer, asio::buffer(up), [&](const asio::error_code& ec, size_t) {
    CHECK_FALSE(ec);
    sent = true;
  });
  REQUIRE(f.waitFor([&] { return sent && f.owner->got.size() == up.size(); }, 30000ms));
  CHECK(f.owner->got == up);

  // h2gate to app: more than the socket takes while the app is not reading,
  // so the rest is queued and written asynchronously.
  bool done = false;
  s.write({down}, [&] { done = true; });
  f.settle(100ms);
  CHECK_FALSE(done);
  CHECK(s.backlog());
  std::string at_app(down.size(), '\0');
  bool read_all = false;
  asio::async_read(f.peer, asio::buffer(at_app), [&](const asio::error_code& ec, size_t) {
    CHECK_FALSE(ec);
    read_all = true;
  });
  REQUIRE(f.waitFor([&] { return done && read_all; }, 30000ms));
  CHECK(at_app == down);

  // Idle, then the app's FIN ends the pending wait.
  f.settle(50ms);
  CHECK_FALSE(f.owner->eof);
  f.peer.shutdown(tcp::socket::shutdown_send);
  REQUIRE(f.waitFor([&] { return f.owner->eof; }));

  // On Windows: every wait was an IOCP completion; asio never started its
  // select() thread.
  CHECK_FALSE(test::selectReactorStarted(f.io));
}
