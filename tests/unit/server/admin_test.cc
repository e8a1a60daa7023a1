#include "gateway/server/admin.h"

#include <catch2/catch.hpp>

using namespace h2gate;

namespace {

RequestHead head(const std::string& method, std::vector<Header> headers) {
  RequestHead h;
  h.method = method;
  h.target = "/reload";
  h.headers = std::move(headers);
  return h;
}

const asio::ip::tcp::endpoint kLoopback(asio::ip::make_address("127.0.0.1"), 9901);
const asio::ip::tcp::endpoint kPodIp(asio::ip::make_address("10.244.1.23"), 9901);

std::string check(const std::string& method, std::vector<Header> headers,
                  const asio::ip::tcp::endpoint& local = kLoopback,
                  std::vector<std::string> allowed = {}) {
  return Admin::check(head(method, std::move(headers)), local, Admin::Options{std::move(allowed)});
}

}  // namespace

TEST_CASE("admin: Host must be the listener's own address, loopback or allowed", "[admin]") {
  // What curl, Prometheus and kubelet send.
  CHECK(check("GET", {{"Host", "127.0.0.1:9901"}}).empty());
  CHECK(check("GET", {{"Host", "localhost:9901"}}).empty());
  CHECK(check("GET", {{"host", "LOCALHOST"}}).empty());
  CHECK(check("GET", {{"Host", "[::1]:9901"}}).empty());
  CHECK(check("GET", {{"Host", "127.0.0.1:19901"}}).empty());  // port forwarding: any port
  CHECK(check("GET", {{"Host", "10.244.1.23:9901"}}, kPodIp).empty());
  CHECK(check("GET", {{"Host", "[::ffff:10.244.1.23]:9901"}}, kPodIp).empty());
  CHECK(check("GET", {}).empty());  // HTTP/1.0 without Host: no browser sends that

  // DNS rebinding: the attacker's name, whatever it resolves to.
  const std::string why = check("GET", {{"Host", "evil.example:9901"}});
  CHECK(why ==
        "Host 'evil.example:9901' is not this admin endpoint's address: refused, as a web page "
        "using DNS rebinding would be. Use http://127.0.0.1:9901/ or http://localhost:9901/, or "
        "list the name under admin.allowed_hosts in the config\n");
  CHECK_FALSE(check("GET", {{"Host", "10.244.1.24:9901"}}, kPodIp).empty());  // another address
  CHECK_FALSE(check("GET", {{"Host", "h2gate.localhost"}}).empty());
  CHECK_FALSE(check("GET", {{"Host", "127.0.0.1.evil.example"}}).empty());
  CHECK(check("GET", {{"Host", "a b"}}).starts_with("malformed Host header: "));
  CHECK(check("GET", {{"Host", "127.0.0.1"}, {"Host", "evil.example"}}) ==
        "more than one Host header\n");

  // admin.allowed_hosts: a name (any port) or name:port.
  const std::vector<std::string> allowed{"h2gate.example", "mon.example:9901"};
  CHECK(check("GET", {{"Host", "H2gate.Example.:8080"}}, kPodIp, allowed).empty());
  CHECK(check("GET", {{"Host", "mon.example:9901"}}, kPodIp, allowed).empty());
  CHECK_FALSE(check("GET", {{"Host", "mon.example:9902"}}, kPodIp, allowed).empty());
  CHECK_FALSE(check("GET", {{"Host", "sub.h2gate.example"}}, kPodIp, allowed).empty());
}

TEST_CASE("admin: requests from web pages are refused", "[admin]") {
  const Header host{"Host", "127.0.0.1:9901"};
  CHECK(check("GET", {host, {"Origin", "http://evil.example"}}) ==
        "Origin 'http://evil.example': the admin endpoint does not answer web pages from other "
        "origins\n");
  CHECK_FALSE(check("GET", {host, {"Origin", "null"}}).empty());
  CHECK_FALSE(check("GET", {host, {"Origin", "https://127.0.0.1:9901"}}).empty());
  CHECK_FALSE(check("GET", {host, {"Origin", "http://127.0.0.1:8080"}}).empty());
  CHECK(check("GET", {host, {"Origin", "http://127.0.0.1:9901"}}).empty());  // its own
  CHECK(check("GET", {{"Host", "localhost"}, {"Origin", "http://localhost:80"}}).empty());

  CHECK(check("GET", {host, {"Sec-Fetch-Site", "cross-site"}}) ==
        "Sec-Fetch-Site: cross-site: the admin endpoint does not answer web pages\n");
  CHECK_FALSE(check("GET", {host, {"Sec-Fetch-Site", "same-site"}}).empty());
  CHECK(check("GET", {host, {"Sec-Fetch-Site", "none"}}).empty());  // typed in the address bar
  CHECK(check("GET", {host, {"Sec-Fetch-Site", "same-origin"}}).empty());
}

TEST_CASE("admin: a POST needs X-H2gate-Admin, which a page cannot send", "[admin]") {
  const Header host{"Host", "127.0.0.1:9901"};
  // The cross-site "simple request" of the report: refused for its Origin...
  CHECK_FALSE(check("POST", {host,
                             {"Content-Type", "text/plain"},
                             {"Origin", "http://evil.example"},
                             {"Sec-Fetch-Site", "cross-site"}})
                  .empty());
  // ...and a bodyless POST without Origin (an old browser, a form) for the
  // missing header.
  CHECK(check("POST", {host}) ==
        "POST needs the header X-H2gate-Admin: 1 (a web page cannot send it), e.g. curl -X POST "
        "-H 'X-H2gate-Admin: 1' http://127.0.0.1:9901/reload\n");
  CHECK_FALSE(check("POST", {host, {"X-H2gate-Admin", ""}}).empty());
  CHECK(check("POST", {host, {"x-h2gate-admin", "1"}}).empty());
  CHECK(check("GET", {host}).empty());
}
