// Transport's TLS (OpenSSL over our own socket BIO) against a real OpenSSL
// server on loopback: the server runs blocking OpenSSL on a thread of its
// own, the client is the Transport on the test's io_context. Certificates
// come from a CA made at test time.
#include "gateway/upstream/transport.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <asio.hpp>
#include <catch2/catch.hpp>

#include "tests/unit/upstream/io_util.h"
#include "tests/unit/upstream/tls_server.h"

using namespace h2gate;
using namespace h2gate::upstream;
using namespace std::chrono_literals;
using asio::ip::tcp;

namespace {

// Byte `i` of every stream the tests send, so the receiver can check order.
char patternByte(size_t i) {
  return static_cast<char>('A' + (i * 7 + i / 251) % 61);
}
std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = patternByte(i);
  return s;
}

// Server side of the slow-reader cases: sleeps while the client's socket
// fills up, then reads `size` bytes (or until the connection ends) into
// *received.
void readSlowly(SSL* ssl, size_t size, std::string* received) {
  std::this_thread::sleep_for(300ms);  // the client's socket fills up meanwhile
  char buf[65536];
  size_t n = 0;
  while (received->size() < size && SSL_read_ex(ssl, buf, sizeof buf, &n) == 1)
    received->append(buf, n);
}

using Certs = test::TlsCerts;
using Server = test::TlsServer;

bool runUntil(asio::io_context& io, const std::function<bool()>& done,
              std::chrono::milliseconds limit = 10s) {
  return test::runUntil(io, done, limit);
}

// A TLS client Transport to `port`, verifying against `ca`; the handshake's
// result in *ec.
std::unique_ptr<Transport> connectTls(asio::io_context& io, uint16_t port, const std::string& ca,
                                      asio::error_code* ec) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  REQUIRE(SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr) == 1);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  SSL* ssl = SSL_new(ctx);
  SSL_CTX_free(ctx);  // the SSL holds its own reference
  SSL_set_tlsext_host_name(ssl, "localhost");
  SSL_set1_host(ssl, "localhost");
  tcp::socket s(io);
  s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  auto t = std::make_unique<Transport>(std::move(s), ssl);
  bool done = false;
  bool inline_call = true;
  bool ran_inline = false;
  t->asyncHandshake([&](const asio::error_code& e) {
    ran_inline = inline_call;
    *ec = e;
    done = true;
  });
  inline_call = false;
  REQUIRE(runUntil(io, [&] { return done; }));
  CHECK_FALSE(ran_inline);  // handlers never run inside the initiating call
  return t;
}

// Reads until `n` bytes or an error; returns them.
std::string readAll(asio::io_context& io, Transport& t, size_t n, size_t chunk,
                    asio::error_code* last = nullptr) {
  std::string got;
  std::vector<char> buf(chunk);
  bool busy = false;
  asio::error_code err;
  std::function<void()> next = [&] {
    busy = true;
    t.asyncReadSome(asio::buffer(buf), [&](const asio::error_code& ec, size_t k) {
      busy = false;
      got.append(buf.data(), k);
      if (ec) err = ec;
    });
  };
  while (got.size() < n && !err) {
    next();
    if (!runUntil(io, [&] { return !busy; })) break;
  }
  if (last) *last = err;
  return got;
}

}  // namespace

TEST_CASE("transport: records of any size arrive whole and in order", "[upstream][transport]") {
  Certs certs;
  asio::io_context io;
  const std::string body = pattern(3 << 20);
  Server server(io, certs, [&](SSL* ssl, int) {
    // Records of every size from 1 byte to 16 KiB, back to back.
    size_t off = 0, k = 1;
    while (off < body.size()) {
      const size_t n = std::min({k, body.size() - off, size_t{16384}});
      size_t w = 0;
      if (SSL_write_ex(ssl, body.data() + off, n, &w) != 1) return;
      off += w;
      k = k * 3 % 16411 + 1;
    }
    SSL_shutdown(ssl);
  });
  asio::error_code ec;
  auto t = connectTls(io, server.port(), certs.ca.caCertPath(), &ec);
  REQUIRE_FALSE(ec);

  SECTION("h2's large buffer") {
    t->keepBuffers(256 * 1024);
    asio::error_code last;
    const std::string got = readAll(io, *t, body.size() + 1, 256 * 1024, &last);
    CHECK(got.size() == body.size());
    CHECK(got == body);
    CHECK(last == asio::error::eof);  // close_notify
  }
  SECTION("small reads, buffers released between them") {
    asio::error_code last;
    const std::string got = readAll(io, *t, body.size() + 1, 1000, &last);
    CHECK(got == body);
    CHECK(last == asio::error::eof);
  }
}

TEST_CASE("transport: a large write completes while the peer is slow to read",
          "[upstream][transport]") {
  Certs certs;
  asio::io_context io;
  const std::string body = pattern(16 << 20);  // far more than the socket buffers hold
  std::string received;
  Server server(io, certs, [&](SSL* ssl, int) { readSlowly(ssl, body.size(), &received); });
  asio::error_code ec;
  auto t = connectTls(io, server.port(), certs.ca.caCertPath(), &ec);
  REQUIRE_FALSE(ec);
  bool done = false;
  size_t total = 0;
  // Two buffers, as an HTTP/1.1 exchange writes a head and a body.
  t->asyncWrite(
      {asio::buffer(body.data(), 100), asio::buffer(body.data() + 100, body.size() - 100)},
      [&](const asio::error_code& e, size_t n) {
        ec = e;
        total = n;
        done = true;
      });
  CHECK_FALSE(done);
  REQUIRE(runUntil(
      io, [&] { return done; }, 30s));
  CHECK_FALSE(ec);
  CHECK(total == body.size());
  REQUIRE(runUntil(
      io, [&] { return server.done(); }, 30s));
  CHECK(received == body);
}

TEST_CASE("transport: how a TLS connection ends", "[upstream][transport]") {
  Certs certs;
  asio::io_context io;
  SECTION("close_notify is EOF") {
    Server server(io, certs, [](SSL* ssl, int) {
      SSL_write(ssl, "bye", 3);
      SSL_shutdown(ssl);
    });
    asio::error_code ec;
    auto t = connectTls(io, server.port(), certs.ca.caCertPath(), &ec);
    REQUIRE_FALSE(ec);
    asio::error_code last;
    CHECK(readAll(io, *t, 100, 100, &last) == "bye");
    CHECK(last == asio::error::eof);
  }
  SECTION("a FIN without close_notify is a truncated stream") {
    Server server(io, certs, [](SSL* ssl, int fd) {
      SSL_write(ssl, "cut", 3);
      ::shutdown(fd, asio::socket_base::shutdown_send);  // SHUT_WR, SD_SEND
      char c;
      SSL_read(ssl, &c, 1);  // until the client closes
    });
    asio::error_code ec;
    auto t = connectTls(io, server.port(), certs.ca.caCertPath(), &ec);
    REQUIRE_FALSE(ec);
    asio::error_code last;
    CHECK(readAll(io, *t, 100, 100, &last) == "cut");
    CHECK(last == asio::ssl::error::stream_truncated);
    t->close();
  }
  SECTION("a certificate from an unknown CA fails the handshake") {
    Server server(io, certs, [](SSL*, int) {});
    asio::error_code ec;
    auto t = connectTls(io, server.port(), certs.other_ca.caCertPath(), &ec);
    REQUIRE(ec);
    CHECK(ec.category() == asio::error::get_ssl_category());
    CHECK_THAT(ec.message(), Catch::Contains("certificate verify failed"));
  }
}

TEST_CASE("transport: records already received are seen without waiting on the socket",
          "[upstream][transport]") {
  Certs certs;
  asio::io_context io;
  std::atomic<bool> release{false};
  Server server(io, certs, [&](SSL* ssl, int) {
    // Three records in quick succession: they arrive together.
    SSL_write(ssl, "one", 3);
    SSL_write(ssl, "two", 3);
    SSL_write(ssl, "six", 3);
    while (!release) std::this_thread::sleep_for(5ms);  // then silence
    SSL_shutdown(ssl);
  });
  asio::error_code ec;
  auto t = connectTls(io, server.port(), certs.ca.caCertPath(), &ec);
  REQUIRE_FALSE(ec);
  // The first read takes all three records off the socket; it returns one.
  char buf[3];
  size_t n = 0;
  REQUIRE(runUntil(io, [&] {
    n = t->readSomeNow(asio::buffer(buf), ec);
    return n > 0;
  }));
  CHECK(std::string(buf, n) == "one");
  std::this_thread::sleep_for(50ms);  // (the others surely arrived by now)
  // The socket is empty, yet a wait for readability completes at once.
  bool readable = false;
  t->asyncWaitReadable([&](const asio::error_code&) { readable = true; });
  CHECK(runUntil(
      io, [&] { return readable; }, 2s));
  n = t->readSomeNow(asio::buffer(buf), ec);
  CHECK(std::string(buf, n) == "two");
  n = t->readSomeNow(asio::buffer(buf), ec);
  CHECK(std::string(buf, n) == "six");
  // Now nothing is there: a read would block, and the wait does wait.
  n = t->readSomeNow(asio::buffer(buf), ec);
  CHECK(n == 0);
  CHECK(ec == asio::error::would_block);
  readable = false;
  t->asyncWaitReadable([&](const asio::error_code&) { readable = true; });
  CHECK_FALSE(runUntil(
      io, [&] { return readable; }, 200ms));
  release = true;  // close_notify: readable again
  CHECK(runUntil(
      io, [&] { return readable; }, 5s));
}

namespace {

// Set by bothWays() when the whole body has come back down; the peer waits
// for it, then 300 ms, before its last byte. (Timing the 300 ms from the end
// of the peer's writes was not enough: with megabytes still in the socket
// buffers, a loaded machine read them for longer than that, and the byte was
// there before the idle wait began: wine, load 7.)
struct BodyRead {
  std::mutex mutex;
  std::condition_variable cv;
  bool read = false;
  void set() {
    std::lock_guard lock(mutex);
    read = true;
    cv.notify_all();
  }
  void waitThenPause() {
    std::unique_lock lock(mutex);
    cv.wait_for(lock, 60s, [&] { return read; });
    lock.unlock();
    std::this_thread::sleep_for(300ms);
  }
};

// Pushes `body` up through `t` while the peer is not reading yet (the socket
// fills up), then reads `body` back down; then waits on the idle connection
// until the peer sends one last byte.
void bothWays(asio::io_context& io, Transport& t, const std::string& body, BodyRead& body_read) {
  asio::error_code ec;
  bool done = false;
  size_t total = 0;
  t.asyncWrite(asio::buffer(body), [&](const asio::error_code& e, size_t n) {
    ec = e;
    total = n;
    done = true;
  });
  REQUIRE(runUntil(
      io, [&] { return done; }, 60s));
  CHECK_FALSE(ec);
  CHECK(total == body.size());
  CHECK(readAll(io, t, body.size(), 64 * 1024) == body);
  body_read.set();
  bool readable = false;
  t.asyncWaitReadable([&](const asio::error_code& e) {
    CHECK_FALSE(e);
    readable = true;
  });
  CHECK_FALSE(runUntil(
      io, [&] { return readable; }, 50ms));  // the peer waits 300 ms from set()
  REQUIRE(runUntil(
      io, [&] { return readable; }, 10s));
  CHECK(readAll(io, t, 1, 16) == "!");
}

}  // namespace

TEST_CASE("transport: bytes both ways through full and empty sockets, waiting on completions only",
          "[upstream][transport][iocp]") {
  asio::io_context io;
  const std::string body = pattern(8 << 20);  // far more than the socket buffers hold
  BodyRead body_read;
  SECTION("TLS") {
    Certs certs;
    std::string received;
    Server server(io, certs, [&](SSL* ssl, int) {
      readSlowly(ssl, body.size(), &received);
      size_t n = 0;
      size_t off = 0;
      while (off < body.size() && SSL_write_ex(ssl, body.data() + off, body.size() - off, &n) == 1)
        off += n;
      body_read.waitThenPause();
      SSL_write(ssl, "!", 1);
      char c;
      SSL_read(ssl, &c, 1);  // until the client closes
    });
    asio::error_code ec;
    auto t = connectTls(io, server.port(), certs.ca.caCertPath(), &ec);
    REQUIRE_FALSE(ec);
    bothWays(io, *t, body, body_read);
    CHECK(received == body);
    t->shutdownSend();
    REQUIRE(runUntil(
        io, [&] { return server.done(); }, 10s));
  }
  SECTION("plain TCP") {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    tcp::socket s(io);
    s.connect(acceptor.local_endpoint());
    tcp::socket peer = acceptor.accept();
    std::string received;
    std::thread server([&] {
      std::this_thread::sleep_for(300ms);
      received.resize(body.size());
      asio::error_code e;
      asio::read(peer, asio::buffer(received), e);
      asio::write(peer, asio::buffer(body), e);
      body_read.waitThenPause();
      asio::write(peer, asio::buffer("!", 1), e);
    });
    Transport t(std::move(s));
    bothWays(io, t, body, body_read);
    server.join();
    CHECK(received == body);
  }
  // On Windows: every wait was an IOCP completion; asio never started its
  // select() thread.
  CHECK_FALSE(test::selectReactorStarted(io));
}
