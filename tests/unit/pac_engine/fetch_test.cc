// Downloading PAC files from a real nginx (http and https, redirects, 404,
// files over the size limit), from a server that accepts and never answers,
// one that closes at once, and from nothing at all. The fixture is first
// proven with curl.
#include "gateway/pac_engine/fetch.h"

#include <atomic>
#include <thread>

#include <catch2/catch.hpp>

#include "tests/support/origin.h"
#include "tests/support/util.h"
#include "tests/unit/pac_engine/pac_test_util.h"

using namespace h2gate::pac;
using namespace h2gate::test;
using h2gate::pac::test::MuteServer;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kPac = "function FindProxyForURL(url, host) { return 'PROXY p.corp:3128'; }";

Nginx::Options pacServer() {
  Nginx::Options o;
  o.with_sink = false;
  o.extra_server_config =
      std::string(
          "    location = /proxy.pac { default_type "
          "application/x-ns-proxy-autoconfig; return 200 \"") +
      kPac +
      "\"; }\n"
      "    location = /moved.pac { return 302 /proxy.pac; }\n"
      "    location = /far.pac { return 301 $scheme://127.0.0.1:$server_port/proxy.pac; }\n"
      "    location = /loop.pac { return 302 /loop.pac; }\n"
      "    location = /gone.pac { return 404; }\n";
  return o;
}

FetchResult fetch(const std::string& url, FetchOptions options = {}) {
  asio::io_context io;
  std::optional<FetchResult> out;
  PacFetch::start(io.get_executor(), url, options, [&](FetchResult r) { out = std::move(r); });
  io.run();
  REQUIRE(out.has_value());
  return *out;
}

}  // namespace

TEST_CASE("pac fetch: a PAC file over http and https from nginx", "[pac][fetch]") {
  Nginx nginx(pacServer());
  // The fixture, proven with curl first.
  CommandResult c = runCurl({"-sS", nginx.httpUrl("/proxy.pac")});
  REQUIRE(c.exit_code == 0);
  REQUIRE(c.out == kPac);

  FetchResult r = fetch(nginx.httpUrl("/proxy.pac"));
  CHECK(r.ok);
  CHECK(r.status == 200);
  CHECK(r.body == kPac);
  CHECK(r.error.empty());

  FetchOptions tls;
  tls.trusted_ca = nginx.caCertPath();
  r = fetch(nginx.httpsUrl("/proxy.pac"), tls);
  CHECK(r.ok);
  CHECK(r.body == kPac);
  // Without the test CA the certificate is not trusted.
  r = fetch(nginx.httpsUrl("/proxy.pac"));
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.error, Catch::StartsWith("127.0.0.1:" + std::to_string(nginx.tlsPort()) +
                                        ": TLS handshake failed: "));
  CHECK_THAT(r.error, Catch::Contains("certificate verify failed"));
  CHECK(r.body.empty());
  CHECK_THAT(nginx.accessLog(),
             Catch::Contains("\"GET /proxy.pac HTTP/1.1\" 200 67 \"-\" \"h2gate/"));
}

TEST_CASE("pac fetch: redirects, errors and limits", "[pac][fetch]") {
  Nginx nginx(pacServer());
  FetchResult r = fetch(nginx.httpUrl("/moved.pac"));
  CHECK(r.ok);
  CHECK(r.body == kPac);
  CHECK(r.final_url == nginx.httpUrl("/proxy.pac"));
  r = fetch(nginx.httpUrl("/far.pac"));
  CHECK(r.ok);

  r = fetch(nginx.httpUrl("/loop.pac"));
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.error, Catch::EndsWith("more than 5 redirects"));
  r = fetch(nginx.httpUrl("/gone.pac"));
  CHECK_FALSE(r.ok);
  CHECK(r.status == 404);
  CHECK_THAT(r.error, Catch::EndsWith("HTTP 404 Not Found"));

  FetchOptions small;
  small.max_bytes = 512 * 1024;
  r = fetch(nginx.httpUrl("/1m"), small);  // a 1 MiB file
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.error, Catch::Contains("larger than 524288 bytes"));
  CHECK(r.body.empty());
  r = fetch(nginx.httpUrl("/1m"));
  CHECK(r.ok);
  CHECK(r.body.size() == testFile("1m").size);
}

TEST_CASE("pac fetch: a server that hangs, one that closes, and none", "[pac][fetch]") {
  FetchOptions quick;
  quick.timeout = 500ms;
  {
    MuteServer hang(true);
    const auto start = Clock::now();
    FetchResult r = fetch("http://127.0.0.1:" + std::to_string(hang.port()) + "/wpad.dat", quick);
    const auto took = Clock::now() - start;
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.error, Catch::EndsWith("no complete answer within 500 ms"));
    CHECK(took >= 450ms);
    CHECK(took < 3s);
    CHECK(hang.accepted() == 1);
  }
  {
    MuteServer closing(false);
    FetchResult r = fetch("http://127.0.0.1:" + std::to_string(closing.port()) + "/", quick);
    CHECK_FALSE(r.ok);
    CHECK(r.status == 0);
  }
  // Nothing listens on a port we just had and closed.
  uint16_t port = 0;
  {
    asio::io_context io;
    asio::ip::tcp::acceptor a(io, {asio::ip::make_address("127.0.0.1"), 0});
    port = a.local_endpoint().port();
  }
  FetchResult r = fetch("http://127.0.0.1:" + std::to_string(port) + "/", quick);
  CHECK_FALSE(r.ok);
  CHECK(r.error == "127.0.0.1:" + std::to_string(port) + ": cannot connect: Connection refused");
}

TEST_CASE("pac fetch: URLs", "[pac][fetch]") {
  FetchUrl u;
  CHECK(parseFetchUrl("http://wpad.corp/wpad.dat", &u).empty());
  CHECK(u.host == "wpad.corp");
  CHECK(u.port == 80);
  CHECK(u.target == "/wpad.dat");
  CHECK_FALSE(u.https);
  CHECK(parseFetchUrl("HTTPS://[2001:db8::1]:8443/p.pac?v=2#x", &u).empty());
  CHECK(u.https);
  CHECK(u.host == "2001:db8::1");
  CHECK(u.port == 8443);
  CHECK(u.target == "/p.pac?v=2");
  CHECK(parseFetchUrl("http://h?x=1", &u).empty());
  CHECK(u.target == "/?x=1");
  CHECK(parseFetchUrl("ftp://h/p", &u) == "'ftp://h/p' is not an http:// or https:// URL");
  CHECK(parseFetchUrl("http://u:p@h/p", &u) == "credentials in a PAC URL are not supported");
  CHECK(parseFetchUrl("http:///p", &u) == "the URL has no host");
  CHECK(parseFetchUrl("http://h:0/", &u) == "bad port in the URL");
  CHECK(parseFetchUrl("http://h:99999/", &u) == "bad port in the URL");
  CHECK(parseFetchUrl("http://[::1/", &u) == "unclosed '[' in the URL's host");
  CHECK(parseFetchUrl("http://h/a b", &u) == "the URL's path has spaces or control characters");
}
