#include "gateway/http1/parser.h"

#include <catch2/catch.hpp>

using namespace h2gate;
using http1::Event;
using http1::Parser;

namespace {

struct Fed {
  Event event;
  size_t consumed;
};

Fed feed(Parser& p, std::string_view in, std::string* body) {
  size_t used = 0;
  const Event ev = p.feed(in.data(), in.size(), &used, body);
  return {ev, used};
}

Parser requestParser(http1::Limits limits = {}) {
  return Parser(Parser::Kind::Request, limits);
}

}  // namespace

TEST_CASE("CONNECT head stops at the end of the head; the rest is tunnel data") {
  Parser p(Parser::Kind::Request, {});
  std::string body;
  const std::string in =
      "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n\x16\x03\x01";
  const Fed f = feed(p, in, &body);
  REQUIRE(f.event == Event::HeadComplete);
  CHECK(f.consumed == in.size() - 3);
  RequestHead& r = p.request();
  CHECK(r.method == "CONNECT");
  REQUIRE(http1::parseTarget(r).empty());
  CHECK(r.is_connect);
  CHECK(r.host == "example.com");
  CHECK(r.port == 443);
  CHECK(body.empty());
}

TEST_CASE("absolute-form with a Content-Length body, then a pipelined request") {
  Parser p(Parser::Kind::Request, {});
  std::string body;
  const std::string first =
      "POST http://origin.test:8080/up?x=1 HTTP/1.1\r\nHost: origin.test:8080\r\n"
      "Content-Length: 5\r\n\r\nhello";
  const std::string second = "GET http://origin.test/ HTTP/1.1\r\nHost: origin.test\r\n\r\n";
  const std::string in = first + second;
  Fed f = feed(p, in, &body);
  REQUIRE(f.event == Event::HeadComplete);
  RequestHead& r = p.request();
  REQUIRE(http1::parseTarget(r).empty());
  CHECK(r.host == "origin.test");
  CHECK(r.port == 8080);
  CHECK(r.path == "/up?x=1");
  CHECK(r.framing == BodyFraming::ContentLength);
  CHECK(r.content_length == 5);
  size_t off = f.consumed;
  f = feed(p, std::string_view(in).substr(off), &body);
  CHECK(f.event == Event::MessageComplete);
  CHECK(body == "hello");
  off += f.consumed;
  CHECK(off == first.size());
  f = feed(p, std::string_view(in).substr(off), &body);
  REQUIRE(f.event == Event::HeadComplete);
  CHECK(p.request().method == "GET");
}

TEST_CASE(
    "an absolute-form request offering an Upgrade is parsed as a plain one; the next follows") {
  // curl --http2 -x PROXY http://a sends an h2c upgrade offer; a WebSocket
  // handshake looks the same. Both with and without a body.
  const std::string body_headers = GENERATE(as<std::string>{}, "", "Content-Length: 3\r\n");
  Parser p(Parser::Kind::Request, {});
  std::string body;
  const std::string first = "GET http://origin.test/a HTTP/1.1\r\nHost: origin.test\r\n" +
                            body_headers +
                            "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
                            "HTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n" +
                            (body_headers.empty() ? "" : "abc");
  const std::string second = "GET http://origin.test/b HTTP/1.1\r\nHost: origin.test\r\n\r\n";
  const std::string in = first + second;
  Fed f = feed(p, in, &body);
  REQUIRE(f.event == Event::HeadComplete);
  CHECK(p.request().target == "http://origin.test/a");
  size_t off = f.consumed;
  do {
    f = feed(p, std::string_view(in).substr(off), &body);
    off += f.consumed;
  } while (f.event == Event::Body);
  REQUIRE(f.event == Event::MessageComplete);
  CHECK(body == (body_headers.empty() ? "" : "abc"));
  CHECK(p.keepAlive());
  CHECK(off == first.size());
  f = feed(p, std::string_view(in).substr(off), &body);
  REQUIRE(f.event == Event::HeadComplete);
  CHECK(p.request().target == "http://origin.test/b");
  CHECK(off + f.consumed == in.size());
}

TEST_CASE("chunked request bodies are decoded") {
  Parser p(Parser::Kind::Request, {});
  std::string body;
  const std::string in =
      "POST http://h/ HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
  Fed f = feed(p, in, &body);
  REQUIRE(f.event == Event::HeadComplete);
  CHECK(p.request().framing == BodyFraming::Chunked);
  f = feed(p, std::string_view(in).substr(f.consumed), &body);
  CHECK(f.event == Event::MessageComplete);
  CHECK(body == "abcde");
}

TEST_CASE("a head split across many reads still parses") {
  Parser p(Parser::Kind::Request, {});
  std::string body;
  const std::string in = "GET http://h:81/a HTTP/1.1\r\nHost: h:81\r\nX-Long: 0123456789\r\n\r\n";
  Event last = Event::NeedMore;
  for (char c : in) {
    const Fed f = feed(p, std::string_view(&c, 1), &body);
    CHECK(f.consumed == 1);
    last = f.event;
    if (last != Event::NeedMore) break;
  }
  REQUIRE(last == Event::HeadComplete);
  REQUIRE(p.request().headers.size() == 2);
  CHECK(p.request().headers[1].name == "X-Long");
  CHECK(p.request().headers[1].value == "0123456789");
}

TEST_CASE("limits: head size and header count give 431") {
  SECTION("head larger than the limit") {
    Parser p = requestParser(http1::Limits{1024, 100});
    std::string body;
    std::string in = "GET http://h/ HTTP/1.1\r\nX: " + std::string(2000, 'a');
    CHECK(feed(p, in, &body).event == Event::Error);
    CHECK(p.errorStatus() == 431);
  }
  SECTION("too many headers") {
    Parser p = requestParser(http1::Limits{64 * 1024, 3});
    std::string body;
    std::string in = "GET http://h/ HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n";
    CHECK(feed(p, in, &body).event == Event::Error);
    CHECK(p.errorStatus() == 431);
  }
  SECTION("exactly at the header limit is fine") {
    Parser p = requestParser(http1::Limits{64 * 1024, 3});
    std::string body;
    std::string in = "GET http://h/ HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    CHECK(feed(p, in, &body).event == Event::HeadComplete);
  }
}

TEST_CASE("malformed input gives 400 and the parser stays dead") {
  Parser p(Parser::Kind::Request, {});
  std::string body;
  CHECK(feed(p, "\x01\x02garbage\r\n\r\n", &body).event == Event::Error);
  CHECK(p.errorStatus() == 400);
  CHECK_FALSE(p.errorReason().empty());
  CHECK(feed(p, "GET http://h/ HTTP/1.1\r\n\r\n", &body).event == Event::Error);
}

TEST_CASE("Content-Length together with chunked is refused (request smuggling)") {
  Parser p(Parser::Kind::Request, {});
  std::string body;
  const std::string in =
      "POST http://h/ HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n";
  CHECK(feed(p, in, &body).event == Event::Error);
  CHECK(p.errorStatus() == 400);
}

TEST_CASE("parseTarget") {
  auto target = [](std::string method, std::string t, RequestHead* out = nullptr) {
    RequestHead r;
    r.method = std::move(method);
    r.target = std::move(t);
    std::string err = http1::parseTarget(r);
    if (out) *out = r;
    return err;
  };
  RequestHead r;
  CHECK(target("CONNECT", "[::1]:8443", &r).empty());
  CHECK(r.host == "::1");
  CHECK(r.port == 8443);
  CHECK(r.authority() == "[::1]:8443");
  CHECK_FALSE(target("CONNECT", "example.com").empty());  // port required
  CHECK_FALSE(target("CONNECT", "example.com:0").empty());
  CHECK_FALSE(target("CONNECT", "example.com:65536").empty());
  CHECK_FALSE(target("CONNECT", "[::1:443").empty());
  CHECK_FALSE(target("CONNECT", "exa mple.com:443").empty());
  // IDN: apps send A-labels; raw UTF-8 (a U-label) is refused before any
  // routing rule sees it, so rules compare A-labels only.
  CHECK(target("CONNECT", "xn--bcher-kva.example:443").empty());
  CHECK(target("CONNECT",
               "b\xc3\xbc"
               "cher.example:443") ==
        "request target contains the byte 0xC3 (only visible ASCII is allowed; percent-encode "
        "the rest)");
  CHECK_FALSE(target("GET",
                     "http://b\xc3\xbc"
                     "cher.example/")
                  .empty());

  CHECK(target("GET", "http://Example.COM", &r).empty());
  CHECK(r.port == 80);
  CHECK(r.path == "/");
  CHECK(target("GET", "HTTP://h?q=1#frag", &r).empty());
  CHECK(r.path == "/?q=1");
  CHECK(target("GET", "http://[2001:db8::1]:8080/x", &r).empty());
  CHECK(r.host == "2001:db8::1");
  CHECK(r.port == 8080);

  const std::string origin = target("GET", "/index.html");
  CHECK(origin.find("this is a proxy") != std::string::npos);
  CHECK_FALSE(target("GET", "https://h/").empty());
  CHECK_FALSE(target("GET", "ftp://h/").empty());
  CHECK_FALSE(target("GET", "http://user:pw@h/").empty());
  CHECK_FALSE(target("GET", "http://h:99999/").empty());
}

TEST_CASE("parseTarget: IP-literal hosts come out canonical, the target with them") {
  auto parse = [](std::string method, std::string t) {
    RequestHead r;
    r.method = std::move(method);
    r.target = std::move(t);
    const std::string err = http1::parseTarget(r);
    return err.empty() ? r.host + " " + std::to_string(r.port) + " " + r.target : "400 " + err;
  };
  // CONNECT: the authority is rebuilt from the canonical host.
  CHECK(parse("CONNECT", "0x7f.1:8443") == "127.0.0.1 8443 127.0.0.1:8443");
  CHECK(parse("CONNECT", "2130706433:443") == "127.0.0.1 443 127.0.0.1:443");
  CHECK(parse("CONNECT", "[::ffff:127.0.0.1]:443") == "127.0.0.1 443 127.0.0.1:443");
  CHECK(parse("CONNECT", "[::127.0.0.1]:443") == "127.0.0.1 443 127.0.0.1:443");
  CHECK(parse("CONNECT", "[0::1]:443") == "::1 443 [::1]:443");
  CHECK(parse("CONNECT", "Example.COM:443") == "Example.COM 443 Example.COM:443");  // a name
  // Absolute-form: host replaced, port as written (or absent), path kept.
  CHECK(parse("GET", "http://0x7f000001:8080/a?b#c") ==
        "127.0.0.1 8080 http://127.0.0.1:8080/a?b#c");
  CHECK(parse("GET", "http://0177.0.0.1/x") == "127.0.0.1 80 http://127.0.0.1/x");
  CHECK(parse("GET", "http://127.1") == "127.0.0.1 80 http://127.0.0.1");
  CHECK(parse("GET", "http://[::ffff:7f00:1]:81/") == "127.0.0.1 81 http://127.0.0.1:81/");
  CHECK(parse("GET", "http://[::1]/") == "::1 80 http://[::1]/");  // no port after brackets
  CHECK(parse("GET", "http://127.0.0.1:80/") == "127.0.0.1 80 http://127.0.0.1:80/");
  // Refused: no IPv4 address although it ends in a number; the unspecified
  // address; a bad IPv6 literal.
  CHECK(parse("GET", "http://1.2.3.256/") ==
        "400 URL authority '1.2.3.256': '1.2.3.256' ends in a number, so it must be an IPv4 "
        "address (as in a browser), and it is not one");
  CHECK(parse("CONNECT", "0:443").find("is the unspecified address") != std::string::npos);
  CHECK(parse("CONNECT", "0.0.0.0:443").find("is the unspecified address") != std::string::npos);
  CHECK(parse("GET", "http://[::]/").find("is the unspecified address") != std::string::npos);
  CHECK(parse("GET", "http://[zz::1]/") ==
        "400 URL authority '[zz::1]': '[zz::1]' is not an IPv6 address");
}

TEST_CASE("parseTarget: bytes outside visible ASCII in the target give 400") {
  for (const std::string& bad :
       {std::string("http://h/a\tb"), std::string("http://h/a\fb"), std::string("http://h/\x7f"),
        std::string("http://h/caf\xc3\xa9"), std::string("http://h/\x80"),
        std::string("http://h/\xff"), std::string("h\x01:443"), std::string("http://h/a\vb")}) {
    INFO(bad);
    RequestHead r;
    r.method = bad.starts_with("http") ? "GET" : "CONNECT";
    r.target = bad;
    CHECK(http1::parseTarget(r).starts_with("request target contains the byte 0x"));
  }
  RequestHead r;
  r.method = "GET";
  r.target = "http://h/a\tb";
  CHECK(http1::parseTarget(r) ==
        "request target contains the byte 0x09 (only visible ASCII is allowed; percent-encode "
        "the rest)");
  r.target = "http://h/%09%C3%A9?q=\"x\"|{}";  // encoded, and printable oddities clients send
  CHECK(http1::parseTarget(r).empty());
}

TEST_CASE("a request-target with TAB or high bytes is refused through the parser too") {
  // llhttp takes these bytes into the URL; parseTarget is what refuses them.
  for (const std::string& req : {std::string("GET http://h/a\tb HTTP/1.1\r\n\r\n"),
                                 std::string("GET http://h/a\x0c HTTP/1.1\r\n\r\n"),
                                 std::string("GET http://h/\xe9 HTTP/1.1\r\n\r\n")}) {
    Parser p = requestParser();
    std::string body;
    const Fed f = feed(p, req, &body);
    if (f.event == Event::Error) {  // llhttp refused it itself: fine too
      CHECK(p.errorStatus() == 400);
      continue;
    }
    REQUIRE(f.event == Event::HeadComplete);
    CHECK_FALSE(http1::parseTarget(p.request()).empty());
  }
}

TEST_CASE("transfer codings other than chunked give 501 (RFC 9112 6.1)") {
  auto status = [](const std::string& te) {
    Parser p = requestParser();
    std::string body;
    const std::string in =
        "POST http://h/ HTTP/1.1\r\nTransfer-Encoding: " + te + "\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    CHECK(feed(p, in, &body).event == Event::Error);
    return p.errorStatus();
  };
  // A coding h2gate cannot decode: 501.
  for (const char* te : {"xchunked", "gzip, chunked", "identity", "gzip", "x,chunked"}) {
    INFO(te);
    CHECK(status(te) == 501);
  }
  // chunked not last: the body length cannot be known, 400 (RFC 9112 6.3).
  for (const char* te : {"chunked, gzip", "chunked,x"}) {
    INFO(te);
    CHECK(status(te) == 400);
  }
  Parser p = requestParser();
  std::string body;
  CHECK(feed(p, "POST http://h/ HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n", &body).event ==
        Event::Error);
  CHECK(p.errorReason() ==
        "unsupported transfer coding 'xchunked' (h2gate decodes only chunked request bodies)");
  // Chunked, also spread over two header lines or with blanks, still works.
  for (const char* ok : {"Transfer-Encoding: chunked\r\n", "Transfer-Encoding:  CHUNKED \r\n",
                         "Transfer-Encoding: ,chunked\r\n"}) {
    INFO(ok);
    Parser q = requestParser();
    std::string b;
    const Fed f = feed(
        q, std::string("POST http://h/ HTTP/1.1\r\n") + ok + "\r\n5\r\nhello\r\n0\r\n\r\n", &b);
    REQUIRE(f.event == Event::HeadComplete);
    CHECK(q.request().framing == BodyFraming::Chunked);
  }
}

TEST_CASE("responses: framing, HEAD, interim and close-delimited bodies") {
  SECTION("Content-Length") {
    Parser p(Parser::Kind::Response, {});
    std::string body;
    const std::string in = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
    Fed f = feed(p, in, &body);
    REQUIRE(f.event == Event::HeadComplete);
    CHECK(p.response().status == 200);
    CHECK(p.response().reason == "OK");
    CHECK(p.response().framing == BodyFraming::ContentLength);
    f = feed(p, std::string_view(in).substr(f.consumed), &body);
    CHECK(f.event == Event::MessageComplete);
    CHECK(body == "abc");
  }
  SECTION("HEAD: Content-Length without a body") {
    Parser p(Parser::Kind::Response, {});
    p.expectNoBody(true);
    std::string body;
    Fed f = feed(p, "HTTP/1.1 200 OK\r\nContent-Length: 300\r\n\r\n", &body);
    REQUIRE(f.event == Event::HeadComplete);
    CHECK(p.response().framing == BodyFraming::None);
    f = feed(p, "", &body);
    CHECK(f.event == Event::MessageComplete);
  }
  SECTION("close-delimited") {
    Parser p(Parser::Kind::Response, {});
    std::string body;
    Fed f = feed(p, "HTTP/1.0 200 OK\r\n\r\npart1", &body);
    REQUIRE(f.event == Event::HeadComplete);
    CHECK(p.response().framing == BodyFraming::UntilClose);
    CHECK_FALSE(p.response().keep_alive);
    f = feed(p, std::string_view("part1"), &body);
    CHECK(f.event == Event::Body);
    CHECK(p.finish() == Event::MessageComplete);
    CHECK(body == "part1");
  }
  SECTION("truncated Content-Length body is an error at EOF") {
    Parser p(Parser::Kind::Response, {});
    std::string body;
    Fed f = feed(p, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", &body);
    REQUIRE(f.event == Event::HeadComplete);
    feed(p, "abc", &body);
    CHECK(p.finish() == Event::Error);
  }
}

TEST_CASE("Content-Length: 0 ends the message with its head, with no further input") {
  // A keep-alive peer sends nothing after such a head: the completion must
  // not wait for bytes (an HTTP/1.1 proxy's empty 200, 301 or 407 kept a
  // pooled connection busy for good).
  const bool response = GENERATE(true, false);
  CAPTURE(response);
  Parser p(response ? Parser::Kind::Response : Parser::Kind::Request, {});
  std::string body;
  const std::string head =
      response
          ? "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n"
          : "POST http://origin.test/ HTTP/1.1\r\nHost: origin.test\r\nContent-Length: 0\r\n\r\n";
  const std::string next = response
                               ? "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                               : "GET http://origin.test/b HTTP/1.1\r\nHost: origin.test\r\n\r\n";
  Fed f = feed(p, head, &body);
  REQUIRE(f.event == Event::HeadComplete);
  CHECK(f.consumed == head.size());
  if (response) {
    CHECK(p.response().framing == BodyFraming::ContentLength);
    CHECK(p.response().keep_alive);
  } else {
    CHECK(p.request().framing == BodyFraming::ContentLength);
    CHECK(p.request().content_length == 0);
  }
  f = feed(p, "", &body);
  REQUIRE(f.event == Event::MessageComplete);
  CHECK(f.consumed == 0);
  CHECK(p.keepAlive());
  CHECK_FALSE(p.inMessage());
  CHECK(body.empty());
  // The connection carries the next message.
  f = feed(p, next, &body);
  REQUIRE(f.event == Event::HeadComplete);
  if (response) {
    CHECK(p.response().status == 200);
    f = feed(p, std::string_view(next).substr(f.consumed), &body);
    CHECK(f.event == Event::MessageComplete);
    CHECK(body == "ok");
  } else {
    CHECK(p.request().target == "http://origin.test/b");
  }
}

TEST_CASE("an empty chunked body completes with its last chunk") {
  Parser p(Parser::Kind::Response, {});
  std::string body;
  const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  Fed f = feed(p, head, &body);
  REQUIRE(f.event == Event::HeadComplete);
  CHECK(feed(p, "", &body).event == Event::NeedMore);
  f = feed(p, "0\r\n\r\n", &body);
  CHECK(f.event == Event::MessageComplete);
  CHECK(f.consumed == 5);
  CHECK(p.keepAlive());
  CHECK(body.empty());
}
