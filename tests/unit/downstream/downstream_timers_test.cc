// DownstreamConnection's timer (gateway/downstream/downstream_timers.cc):
// each app-side limit of the listener cuts what it is meant to cut, with the
// answer the app gets, through a real app socket and the fake upstream of
// connection_fixture.h.
#include <chrono>

#include <catch2/catch.hpp>

#include "gateway/downstream/downstream_connection.h"
#include "tests/unit/downstream/connection_fixture.h"

using namespace h2gate;
using namespace h2gate::downstream;
using namespace h2gate::downstream::fixture;
using namespace std::chrono_literals;

TEST_CASE("timeouts of the app side", "[downstream][timeouts]") {
  Fixture f;
  SECTION("request_headers_timeout: a head that does not complete gets 408") {
    f.ctx.request_headers_timeout = 150ms;
    f.connect();
    f.app.send("GET http://a.test/ HTTP/1.1\r\nHost: a");
    REQUIRE(f.waitFor([&] { return f.app.ended(); }));
    CHECK(f.app.received.starts_with("HTTP/1.1 408 "));
    CHECK(f.app.received.find("(request_headers_timeout)") != std::string::npos);
  }
  SECTION("request_headers_timeout: a connection that sends nothing is closed without a word") {
    f.ctx.request_headers_timeout = 150ms;
    f.connect();
    REQUIRE(f.waitFor([&] { return f.app.ended(); }));
    CHECK(f.app.eof);
    CHECK(f.app.received.empty());
    CHECK(f.errorReplies(408) == 0);
  }
  SECTION("idle_timeout: a keep-alive connection silent between requests is closed") {
    f.ctx.idle_timeout = 150ms;
    f.connect();
    f.app.send(kGetOne);
    respond(f.tunnel(), "first");
    REQUIRE(f.received("first"));
    const size_t before = f.app.received.size();
    REQUIRE(f.waitFor([&] { return f.app.eof; }));
    CHECK(f.app.received.size() == before);  // no reply of its own
  }
  SECTION("connect_response_timeout: a CONNECT with no answer gets 504, the tunnel is aborted") {
    f.ctx.connect_response_timeout = 150ms;
    f.connect();
    f.app.send(kConnect);
    FakeTunnel& t = f.tunnel();
    REQUIRE(f.waitFor([&] { return f.app.ended(); }));
    CHECK(f.app.received.starts_with("HTTP/1.1 504 "));
    CHECK(f.app.received.find("(connect_response_timeout)") != std::string::npos);
    CHECK(t.aborted);
  }
  SECTION("stream_idle_timeout: a response body that stalls resets the app's connection") {
    f.ctx.stream_idle_timeout = 150ms;
    f.connect();
    f.app.send(kGetOne);
    FakeTunnel& t = f.tunnel();
    t.cb->onResponseHead(responseHead(200, BodyFraming::ContentLength, 10));
    t.cb->onResponseData("12345", [] {});
    REQUIRE(f.waitFor([&] { return f.app.ended(); }));
    CHECK(f.app.error == asio::error::connection_reset);  // not a clean end
    CHECK(f.app.received.ends_with("12345"));
    CHECK(t.aborted);
  }
  SECTION("stream_idle_timeout: a request body that stalls gets 408") {
    f.ctx.stream_idle_timeout = 150ms;
    f.connect();
    f.app.send("POST http://a.test/up HTTP/1.1\r\nHost: a.test\r\nContent-Length: 10\r\n\r\n12");
    FakeTunnel& t = f.tunnel();
    REQUIRE(f.waitFor([&] { return f.app.ended(); }));
    CHECK(f.app.received.starts_with("HTTP/1.1 408 "));
    CHECK(f.app.received.find("request body stalled") != std::string::npos);
    CHECK(t.sent == "12");
    CHECK(t.aborted);
  }
  SECTION("tunnel_idle_timeout: a tunnel silent both ways is closed, both sides") {
    f.ctx.tunnel_idle_timeout = 150ms;
    f.connect();
    f.app.send(kConnect);
    FakeTunnel& t = f.tunnel();
    t.cb->onResponseHead(responseHead(200));
    REQUIRE(f.received("established"));
    REQUIRE(f.waitFor([&] { return f.app.eof && t.aborted; }));
  }
  SECTION("tunnel_half_close_timeout: one side ended, the other silent: closed") {
    f.ctx.tunnel_half_close_timeout = 150ms;
    f.connect();
    f.app.send(kConnect);
    FakeTunnel& t = f.tunnel();
    t.cb->onResponseHead(responseHead(200));
    REQUIRE(f.received("established"));
    t.cb->onResponseEnd();
    REQUIRE(f.waitFor([&] { return t.aborted; }));
    CHECK(t.info->result == Result::Ok);
  }
}

TEST_CASE("timeouts: a huge configured timeout means never, not a deadline in the past",
          "[downstream][timeouts]") {
  Fixture f;
  f.ctx.request_headers_timeout = config::Duration::max();
  f.ctx.idle_timeout = config::Duration::max();
  f.connect();
  f.app.send("GET http://a.test/ HTTP/1.1\r\nHost: a");  // a head that does not complete
  f.settle(300ms);
  CHECK_FALSE(f.app.ended());
  f.app.send(".test\r\n\r\n");
  respond(f.tunnel(), "late");
  REQUIRE(f.received("late"));
  f.settle(300ms);  // idle between requests
  CHECK_FALSE(f.app.ended());
}

TEST_CASE("timeouts: waiting for the app's own body bytes is not the upstream's delay",
          "[downstream][timeouts]") {
  Fixture f;
  f.ctx.connect_response_timeout = 200ms;
  f.ctx.stream_idle_timeout = 10s;
  f.connect();
  f.app.send("POST http://a.test/up HTTP/1.1\r\nHost: a.test\r\nContent-Length: 4\r\n\r\n1");
  FakeTunnel& t = f.tunnel();
  // The app takes its time with the body: longer than connect_response_timeout.
  f.settle(150ms);
  f.app.send("2");
  f.settle(150ms);
  f.app.send("34");
  REQUIRE(f.waitFor([&] { return t.ended; }));
  CHECK_FALSE(f.app.ended());
  CHECK(t.sent == "1234");
  // Now h2gate waits for the upstream: that wait is limited.
  REQUIRE(f.waitFor([&] { return f.app.ended(); }));
  CHECK(f.app.received.starts_with("HTTP/1.1 504 "));
  CHECK(t.aborted);
}
