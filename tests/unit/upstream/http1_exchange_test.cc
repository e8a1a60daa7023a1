// Http1Exchange (gateway/upstream/http1_exchange.h): one HTTP/1.1 request or
// CONNECT over an established connection, against a peer on loopback that
// the test scripts byte by byte. What is checked is what the app and the
// pool see: the response, the bytes on the wire, and whether the connection
// came back for the next request (Release) or was closed, and why.
#include "gateway/upstream/http1_exchange.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <asio.hpp>
#include <catch2/catch.hpp>

#include "tests/unit/upstream/io_util.h"
#include "tests/unit/upstream/recording_app.h"

using namespace h2gate;
using namespace h2gate::upstream;
using namespace std::chrono_literals;
using asio::ip::tcp;

namespace {

using AppSide = test::RecordingApp;

// One exchange on a fresh loopback connection; `peer` is the far end (the
// proxy, or the origin in direct mode), driven by the test.
struct Link {
  explicit Link(Http1Exchange::Kind kind, std::string method = "GET",
                BodyFraming framing = BodyFraming::None) {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    tcp::socket client(io);
    client.connect(acceptor.local_endpoint());
    acceptor.accept(peer);
    peer.non_blocking(true);
    head.method = method;
    head.is_connect = method == "CONNECT";
    head.target = head.is_connect ? "origin.test:443" : "http://origin.test/x";
    head.framing = framing;
    info.upstream = "peer.test:3128";
    std::string head_bytes;
    if (kind != Http1Exchange::Kind::DirectConnect)
      head_bytes = method + " " + head.target + " HTTP/1.1\r\nHost: origin.test\r\n" +
                   (framing == BodyFraming::Chunked ? "Transfer-Encoding: chunked\r\n" : "") +
                   "\r\n";
    exchange = std::make_shared<Http1Exchange>(
        std::make_unique<Transport>(std::move(client)), kind, head_bytes, 1, 1,
        [this](std::unique_ptr<Transport> t, Http1Close why) {
          released = why;
          kept = std::move(t);
        });
  }
  ~Link() {
    exchange->abort();
    exchange.reset();
    io.restart();
    io.poll();
  }

  void open() { exchange->open(head, info, app); }
  // A request without a body: open, and its end.
  void get() {
    open();
    exchange->endOfRequest();
  }
  // Reads what the exchange wrote until `want` is among it.
  bool peerReads(const std::string& want) {
    return test::runUntil(
        io,
        [&] {
          readPeer();
          return received.find(want) != std::string::npos;
        },
        5000ms);
  }
  // The exchange closed its end of the connection (the peer reads EOF).
  bool peerSeesClose() {
    return test::runUntil(
        io,
        [&] {
          readPeer();
          return peer_eof;
        },
        5000ms);
  }
  // After the peer's answer: the connection stays open (kept).
  bool peerStillOpen() {
    test::runUntil(
        io, [] { return false; }, 100ms);
    readPeer();
    return !peer_eof;
  }
  void answer(std::string_view bytes) { asio::write(peer, asio::buffer(bytes)); }
  bool waitOver() {
    return test::runUntil(
        io, [&] { return app.over(); }, 5000ms);
  }
  bool waitReleased() {
    return test::runUntil(
        io, [&] { return released.has_value(); }, 5000ms);
  }

  asio::io_context io;
  tcp::socket peer{io};
  RequestHead head;
  StreamInfo info;
  AppSide app;
  std::shared_ptr<Http1Exchange> exchange;
  std::optional<Http1Close> released;
  std::unique_ptr<Transport> kept;
  std::string received;
  bool peer_eof = false;

 private:
  void readPeer() {
    if (!peer_eof && !test::readAvailable(peer, received)) peer_eof = true;
  }
};

}  // namespace

TEST_CASE("http1 exchange: a response without a body frees the kept-alive connection",
          "[upstream][http1_exchange]") {
  struct Shape {
    const char* method;
    const char* answer;
  };
  // None of these may wait for body bytes that never come: the parser knows
  // each one ends with its head.
  const Shape shapes[] = {
      {"GET", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
      {"GET", "HTTP/1.1 204 No Content\r\n\r\n"},
      {"GET", "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\nETag: \"x\"\r\n\r\n"},
      {"HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"},
      {"GET",
       "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic "
       "realm=\"x\"\r\nContent-Length: 0\r\n\r\n"},
  };
  for (const Shape& shape : shapes) {
    INFO(shape.method << " answered " << shape.answer);
    Link l(Http1Exchange::Kind::Request, shape.method);
    l.get();
    REQUIRE(l.peerReads("\r\n\r\n"));
    CHECK(l.received == std::string(shape.method) +
                            " http://origin.test/x HTTP/1.1\r\nHost: " + "origin.test\r\n\r\n");
    l.answer(shape.answer);
    REQUIRE(l.waitOver());
    CHECK(l.app.ended);
    CHECK(l.app.body.empty());
    REQUIRE(l.released == Http1Close::Response);
    CHECK(l.kept != nullptr);
    CHECK(l.peerStillOpen());
  }
}

TEST_CASE("http1 exchange: a kept connection carries the next request",
          "[upstream][http1_exchange]") {
  Link l(Http1Exchange::Kind::Request);
  l.get();
  REQUIRE(l.peerReads("\r\n\r\n"));
  l.answer(
      "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"x\"\r\n"
      "Content-Length: 6\r\n\r\ndenied");
  REQUIRE(l.waitOver());
  // Without authentication hooks a 407 is the app's answer, body and all.
  CHECK(l.app.status == 407);
  CHECK(l.app.body == "denied");
  REQUIRE(l.released == Http1Close::Response);
  REQUIRE(l.kept);

  // The next exchange on the same connection, as the pool hands it out.
  AppSide second;
  std::optional<Http1Close> second_released;
  auto next = std::make_shared<Http1Exchange>(
      std::move(l.kept), Http1Exchange::Kind::Request,
      "GET http://origin.test/y HTTP/1.1\r\nHost: origin.test\r\n\r\n", 1, 2,
      [&](std::unique_ptr<Transport>, Http1Close why) { second_released = why; });
  next->open(l.head, l.info, second);
  next->endOfRequest();
  REQUIRE(l.peerReads("GET http://origin.test/y"));
  l.answer("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
  REQUIRE(test::runUntil(
      l.io, [&] { return second.over(); }, 5000ms));
  CHECK(second.status == 200);
  CHECK(second.body == "hello");
  CHECK(second_released == Http1Close::Response);
}

TEST_CASE("http1 exchange: a close-delimited body is delivered whole, then the connection closed",
          "[upstream][http1_exchange]") {
  Link l(Http1Exchange::Kind::Request);
  l.get();
  REQUIRE(l.peerReads("\r\n\r\n"));
  l.answer("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of ");
  l.answer("it");
  l.peer.shutdown(tcp::socket::shutdown_send);
  REQUIRE(l.waitOver());
  CHECK(l.app.ended);
  CHECK_FALSE(l.app.reset);
  CHECK(l.app.body == "all of it");
  CHECK(l.released == Http1Close::Response);
  CHECK(l.kept == nullptr);
  CHECK(l.peerSeesClose());
}

TEST_CASE("http1 exchange: Connection: close and HTTP/1.0 answers close the connection",
          "[upstream][http1_exchange]") {
  for (const char* answer : {"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
                             "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"}) {
    INFO(answer);
    Link l(Http1Exchange::Kind::Request);
    l.get();
    REQUIRE(l.peerReads("\r\n\r\n"));
    l.answer(answer);
    REQUIRE(l.waitOver());
    CHECK(l.app.body == "ok");
    CHECK(l.released == Http1Close::Response);
    CHECK(l.kept == nullptr);
    CHECK(l.peerSeesClose());
  }
}

TEST_CASE(
    "http1 exchange: a 407 with a body to a request with a body: the app gets it, the "
    "connection is closed (ErrorAnswer)",
    "[upstream][http1_exchange]") {
  Link l(Http1Exchange::Kind::Request, "POST", BodyFraming::Chunked);
  l.open();
  bool sent = false;
  l.exchange->send("hello", [&] { sent = true; });
  l.exchange->endOfRequest();
  // The app's chunked body goes re-chunked, with its last chunk.
  REQUIRE(l.peerReads("5\r\nhello\r\n0\r\n\r\n"));
  CHECK(test::runUntil(
      l.io, [&] { return sent; }, 5000ms));
  l.answer(
      "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"x\"\r\n"
      "Content-Length: 4\r\n\r\nnope");
  REQUIRE(l.waitOver());
  CHECK(l.app.status == 407);
  CHECK(l.app.body == "nope");
  CHECK(l.app.ended);
  CHECK(l.released == Http1Close::ErrorAnswer);
  CHECK(l.kept == nullptr);
  CHECK(l.peerSeesClose());
}

TEST_CASE("http1 exchange: an interim 100 Continue is swallowed", "[upstream][http1_exchange]") {
  Link l(Http1Exchange::Kind::Request);
  l.get();
  REQUIRE(l.peerReads("\r\n\r\n"));
  l.answer("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\n!");
  REQUIRE(l.waitOver());
  CHECK(l.app.status == 201);
  CHECK(l.app.body == "!");
  CHECK(l.released == Http1Close::Response);
}

TEST_CASE("http1 exchange: a peer that breaks the answer", "[upstream][http1_exchange]") {
  SECTION("closed without an answer: 502 to the app") {
    Link l(Http1Exchange::Kind::Request);
    l.get();
    REQUIRE(l.peerReads("\r\n\r\n"));
    l.peer.close();
    REQUIRE(l.waitOver());
    CHECK(l.app.failed);
    CHECK(l.app.status == 502);
    CHECK(l.app.result == Result::UpstreamReset);
    CHECK(l.app.reason == "peer.test:3128 closed the connection without sending a response");
    CHECK(l.released == Http1Close::Incomplete);
  }
  SECTION("closed without an answer, on a kept-alive connection: sent again, the app not told") {
    Link l(Http1Exchange::Kind::Request);
    bool retried = false;
    l.exchange->setRetryHook([&] { retried = true; });
    l.get();
    REQUIRE(l.peerReads("\r\n\r\n"));
    l.peer.close();
    REQUIRE(test::runUntil(
        l.io, [&] { return retried; }, 5000ms));
    CHECK_FALSE(l.app.over());
    CHECK(l.released == Http1Close::ProxyClosedIdle);
  }
  SECTION("garbage instead of a status line: 502") {
    Link l(Http1Exchange::Kind::Request);
    l.get();
    REQUIRE(l.peerReads("\r\n\r\n"));
    l.answer("SSH-2.0-OpenSSH_9.2\r\n\r\n");
    REQUIRE(l.waitOver());
    CHECK(l.app.failed);
    CHECK(l.app.status == 502);
    CHECK(l.app.reason.rfind("bad response from peer.test:3128: ", 0) == 0);
    CHECK(l.released == Http1Close::Incomplete);
    CHECK(l.peerSeesClose());
  }
  SECTION("closed inside a Content-Length body: the app's response is reset, not ended") {
    Link l(Http1Exchange::Kind::Request);
    l.get();
    REQUIRE(l.peerReads("\r\n\r\n"));
    l.answer("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
    l.peer.shutdown(tcp::socket::shutdown_send);
    REQUIRE(l.waitOver());
    CHECK(l.app.reset);
    CHECK_FALSE(l.app.ended);
    CHECK(l.app.body == "abc");
    CHECK(l.app.reason == "peer.test:3128 closed the connection before the response was complete");
    CHECK(l.released == Http1Close::Incomplete);
  }
}

TEST_CASE("http1 exchange: a CONNECT through a proxy holds the app's bytes until its 2xx",
          "[upstream][http1_exchange]") {
  Link l(Http1Exchange::Kind::ProxyConnect, "CONNECT");
  l.open();
  bool sent = false;
  l.exchange->send("client hello", [&] { sent = true; });
  REQUIRE(l.peerReads("CONNECT origin.test:443 HTTP/1.1\r\n"));
  REQUIRE(l.peerReads("\r\n\r\n"));
  // Not one tunnel byte before the proxy said yes.
  CHECK(l.received.find("client hello") == std::string::npos);
  CHECK_FALSE(sent);
  l.answer("HTTP/1.1 200 Connection established\r\n\r\nserver hello");
  REQUIRE(l.peerReads("client hello"));
  CHECK(test::runUntil(
      l.io, [&] { return sent; }, 5000ms));  // acknowledged once written
  REQUIRE(test::runUntil(
      l.io, [&] { return l.app.body == "server hello"; }, 5000ms));
  CHECK(l.app.status == 200);
  // The app's FIN is passed on; the proxy's direction stays open.
  l.exchange->endOfRequest();
  REQUIRE(l.peerSeesClose());
  l.answer("more");
  REQUIRE(test::runUntil(
      l.io, [&] { return l.app.body == "server hellomore"; }, 5000ms));
  l.peer.shutdown(tcp::socket::shutdown_send);
  REQUIRE(test::runUntil(
      l.io, [&] { return l.app.ended; }, 5000ms));
  l.exchange->abort();
  // A connection that carried a tunnel is never reused.
  CHECK(l.released == Http1Close::Tunnel);
}

TEST_CASE("http1 exchange: a CONNECT the proxy refuses reaches the app as its answer",
          "[upstream][http1_exchange]") {
  Link l(Http1Exchange::Kind::ProxyConnect, "CONNECT");
  l.open();
  l.exchange->send("client hello", [] {});
  REQUIRE(l.peerReads("\r\n\r\n"));
  l.answer("HTTP/1.1 403 Forbidden\r\nContent-Length: 7\r\n\r\ndenied!");
  REQUIRE(l.waitOver());
  CHECK(l.app.status == 403);
  CHECK(l.app.body == "denied!");
  CHECK(l.app.ended);
  CHECK(l.received.find("client hello") == std::string::npos);
}

TEST_CASE("http1 exchange: a direct tunnel is open at once and relays both ways",
          "[upstream][http1_exchange]") {
  Link l(Http1Exchange::Kind::DirectConnect, "CONNECT");
  l.open();
  CHECK(l.app.status == 200);
  CHECK(l.app.head_reason == "Connection established");
  l.exchange->send("ping", [] {});
  REQUIRE(l.peerReads("ping"));
  CHECK(l.received == "ping");  // no head: the peer is the origin
  l.answer("pong");
  REQUIRE(test::runUntil(
      l.io, [&] { return l.app.body == "pong"; }, 5000ms));
  l.peer.shutdown(tcp::socket::shutdown_send);
  REQUIRE(test::runUntil(
      l.io, [&] { return l.app.ended; }, 5000ms));
  CHECK_FALSE(l.app.reset);
}
