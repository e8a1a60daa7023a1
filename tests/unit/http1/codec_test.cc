#include "gateway/http1/codec.h"

#include <catch2/catch.hpp>

using namespace h2gate;

namespace {
RequestHead absoluteGet(Headers headers) {
  RequestHead r;
  r.method = "GET";
  r.target = "http://origin.test/p";
  r.host = "origin.test";
  r.port = 80;
  r.path = "/p";
  r.headers = std::move(headers);
  return r;
}
}  // namespace

TEST_CASE("hop-by-hop headers are not forwarded; Via is added") {
  const RequestHead r = absoluteGet({{"Host", "origin.test"},
                                     {"Proxy-Connection", "keep-alive"},
                                     {"Proxy-Authorization", "Basic c2VjcmV0"},
                                     {"Connection", "keep-alive, X-Foo"},
                                     {"X-Foo", "drop me"},
                                     {"Keep-Alive", "timeout=5"},
                                     {"TE", "trailers"},
                                     {"Upgrade", "websocket"},
                                     {"X-Bar", "keep me"},
                                     {"Via", "1.1 app-proxy"}});
  std::string out;
  http1::appendOriginRequest(out, r, true);
  CHECK(out.rfind("GET /p HTTP/1.1\r\n", 0) == 0);
  CHECK(out.find("X-Bar: keep me\r\n") != std::string::npos);
  CHECK(out.find("Host: origin.test\r\n") != std::string::npos);
  CHECK(out.find("Via: 1.1 app-proxy, 1.1 h2gate\r\n") != std::string::npos);
  CHECK(out.find("Connection: close\r\n") != std::string::npos);
  for (const char* gone : {"Proxy-Connection", "Proxy-Authorization", "X-Foo", "Keep-Alive",
                           "TE:", "Upgrade", "c2VjcmV0", "keep-alive"})
    CHECK(out.find(gone) == std::string::npos);
}

TEST_CASE("Host is added from the target when the app sent none") {
  RequestHead r = absoluteGet({});
  r.port = 8080;
  std::string out;
  http1::appendOriginRequest(out, r, false);
  CHECK(out.find("Host: origin.test:8080\r\n") != std::string::npos);
  CHECK(out.find("Connection:") == std::string::npos);
}

TEST_CASE("the app's Host headers are replaced by the target's authority (RFC 9112 3.2.2)") {
  // Two Host headers naming another virtual host: neither reaches the origin.
  RequestHead r = absoluteGet({{"Host", "secret.internal"}, {"X-A", "1"}, {"host", "other"}});
  r.host = "127.0.0.1";
  r.port = 8080;
  std::string out;
  http1::appendOriginRequest(out, r, false);
  CHECK(out.find("Host: 127.0.0.1:8080\r\n") != std::string::npos);
  CHECK(out.find("secret.internal") == std::string::npos);
  CHECK(out.find("other") == std::string::npos);
  size_t hosts = 0;
  for (size_t at = 0; (at = out.find("ost: ", at)) != std::string::npos; ++at) ++hosts;
  CHECK(hosts == 1);
  CHECK(http1::hostHeader(r) == "127.0.0.1:8080");
  r.port = 80;
  CHECK(http1::hostHeader(r) == "127.0.0.1");
  r.host = "::1";
  CHECK(http1::hostHeader(r) == "[::1]");
  r.port = 443;
  CHECK(http1::hostHeader(r) == "[::1]:443");
}

TEST_CASE("request framing is re-stated by the proxy") {
  RequestHead r = absoluteGet({{"Content-Length", "999"}, {"Expect", "100-continue"}});
  r.method = "POST";
  r.framing = BodyFraming::Chunked;
  std::string out;
  http1::appendOriginRequest(out, r, false);
  CHECK(out.find("Transfer-Encoding: chunked\r\n") != std::string::npos);
  CHECK(out.find("Content-Length") == std::string::npos);
  CHECK(out.find("Expect") == std::string::npos);
}

TEST_CASE("response heads: framing towards the app, hop-by-hop removed") {
  ResponseHead resp;
  resp.status = 407;
  resp.reason = "Proxy Authentication Required";
  resp.headers = {{"Proxy-Authenticate", "Basic realm=\"corp\""},
                  {"Connection", "close"},
                  {"Transfer-Encoding", "chunked"},
                  {"Content-Length", "12"}};
  std::string out;
  http1::appendResponseHead(out, resp, BodyFraming::Chunked, true);
  CHECK(out.rfind("HTTP/1.1 407 Proxy Authentication Required\r\n", 0) == 0);
  CHECK(out.find("Proxy-Authenticate: Basic realm=\"corp\"\r\n") != std::string::npos);
  CHECK(out.find("Transfer-Encoding: chunked\r\n") != std::string::npos);
  CHECK(out.find("Content-Length") == std::string::npos);
  CHECK(out.find("Connection") == std::string::npos);

  out.clear();
  resp.content_length = 12;
  http1::appendResponseHead(out, resp, BodyFraming::ContentLength, false);
  CHECK(out.find("Content-Length: 12\r\n") != std::string::npos);
  CHECK(out.find("Connection: close\r\n") != std::string::npos);
}

TEST_CASE("chunk encoding") {
  std::string out;
  http1::appendChunk(out, "hello world!");
  http1::appendChunk(out, "");  // never emits a terminating zero chunk by accident
  http1::appendLastChunk(out);
  CHECK(out == "c\r\nhello world!\r\n0\r\n\r\n");
}

TEST_CASE("error responses carry a text body and Connection: close") {
  const std::string r = http1::errorResponse(431, "request head larger than 64 KiB", true);
  CHECK(r.rfind("HTTP/1.1 431 Request Header Fields Too Large\r\n", 0) == 0);
  CHECK(r.find("Connection: close\r\n") != std::string::npos);
  CHECK(r.find("Content-Length: 32\r\n") != std::string::npos);
  CHECK(r.substr(r.size() - 32) == "request head larger than 64 KiB\n");
}
