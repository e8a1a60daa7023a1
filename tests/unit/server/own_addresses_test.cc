#include "gateway/server/own_addresses.h"

#include <catch2/catch.hpp>

using namespace h2gate;

namespace {

std::string addresses(const std::string& host) {
  std::string out;
  for (const auto& a : OwnAddresses::destinationAddresses(host))
    out += (out.empty() ? "" : " ") + a.to_string();
  return out;
}

asio::ip::tcp::endpoint ep(const char* ip, uint16_t port) {
  return {asio::ip::make_address(ip), port};
}

}  // namespace

TEST_CASE("own addresses: a destination as the system would connect to it", "[own_addresses]") {
  // The forms of the report, each 127.0.0.1.
  for (const char* host :
       {"127.0.0.1", "127.0.0.01", "127.000.000.001", "0x7f.0x0.0x0.0x1", "2130706433",
        "0x7f000001", "0177.0.0.1", "127.1", "0x7f.1", "0X7F.1", "127.0.0.1.", "::ffff:127.0.0.1",
        "::ffff:7f00:1", "[::ffff:127.0.0.1]", "::127.0.0.1", "0.0.0.0", "0"}) {
    INFO(host);
    CHECK(addresses(host) == "127.0.0.1");
  }
  CHECK(addresses("localhost") == "127.0.0.1 ::1");
  CHECK(addresses("LocalHost.") == "127.0.0.1 ::1");
  CHECK(addresses("h2gate.localhost") == "127.0.0.1 ::1");
  CHECK(addresses("::1") == "::1");
  CHECK(addresses("::") == "::1");
  CHECK(addresses("fe80::1%eth0") == "fe80::1");
  CHECK(addresses("2001:db8::1") == "2001:db8::1");
  CHECK(addresses("10.1.2.3") == "10.1.2.3");
  // Names are not resolved here.
  for (const char* host : {"example.com", "cafe.babe", "localhost.example", "127.0.0.1.nip.io",
                           "1.2.3.4.5", "127.0.0.1 x", "", "[::1", "::g"}) {
    INFO(host);
    CHECK(addresses(host).empty());
  }
}

TEST_CASE("own addresses: which socket a destination reaches", "[own_addresses]") {
  OwnAddresses own;
  own.add({ep("127.0.0.1", 9901), "admin endpoint", true, false});
  own.add({ep("127.0.0.1", 3128), "listener 'local_proxy'", false, false});
  own.add({ep("::1", 3128), "listener 'local_proxy'", false, false});
  own.add({ep("0.0.0.0", 8080), "listener 'lan'", false, false});
  own.addInterfaceAddresses();

  REQUIRE(own.find("127.0.0.1", 9901));
  CHECK(own.find("0x7f000001", 9901)->admin);
  CHECK(own.find("localhost", 9901)->admin);
  CHECK(own.find("[::ffff:127.0.0.1]", 9901)->admin);
  CHECK(own.find("127.1", 3128)->what == "listener 'local_proxy'");
  CHECK(own.find("::1", 3128)->what == "listener 'local_proxy'");
  CHECK(own.find("::", 3128));
  CHECK_FALSE(own.find("127.0.0.1", 9902));  // another port
  CHECK_FALSE(own.find("127.0.0.2", 9901));  // another address: not this socket
  CHECK_FALSE(own.find("::1", 9901));        // an IPv4 socket
  CHECK_FALSE(own.find("example.com", 9901));
  // A wildcard socket: every loopback and interface address of its family.
  CHECK(own.find("127.0.0.2", 8080)->what == "listener 'lan'");
  CHECK(own.find("0.0.0.0", 8080));
  CHECK_FALSE(own.find("::1", 8080));
  CHECK_FALSE(own.find("192.0.2.1", 8080));  // TEST-NET: no interface has it
}

TEST_CASE("own addresses: the filter answers 403 and says why", "[own_addresses]") {
  auto own = std::make_shared<OwnAddresses>();
  own->add({ep("127.0.0.1", 9901), "admin endpoint", true, false});
  own->add({ep("127.0.0.1", 3128), "listener 'local_proxy'", false, false});
  const OwnAddressFilter filter(own, "local_proxy");

  RequestHead h;
  h.method = "CONNECT";
  h.is_connect = true;
  h.host = "0x7f.1";
  h.port = 9901;
  StreamInfo info;
  CHECK(filter.onRequestHead(h, info) == filters::FilterStatus::Stop);
  CHECK(info.status == 403);
  CHECK(info.reason ==
        "destination 0x7f.1:9901 is h2gate's own admin endpoint (127.0.0.1:9901): refused, apps "
        "and web pages must not reach the admin endpoint through the proxy (listener "
        "local_proxy: deny_own_addresses: false allows it)");

  h.port = 3128;
  StreamInfo loop;
  CHECK(filter.onRequestHead(h, loop) == filters::FilterStatus::Stop);
  CHECK(loop.reason.find("the request would loop back into h2gate") != std::string::npos);

  h.host = "example.com";
  h.port = 443;
  StreamInfo fine;
  CHECK(filter.onRequestHead(h, fine) == filters::FilterStatus::Continue);
  CHECK(fine.status == 0);
}

TEST_CASE("own addresses: a name that resolved to an own address (direct mode)",
          "[own_addresses]") {
  auto own = std::make_shared<OwnAddresses>();
  own->add({ep("127.0.0.1", 9901), "admin endpoint", true, false});
  const OwnAddressFilter filter(own, "local_proxy");
  RequestHead h;
  h.method = "CONNECT";
  h.is_connect = true;
  h.host = "rebound.example";
  h.port = 9901;
  StreamInfo info;
  CHECK(filter.onRequestHead(h, info) == filters::FilterStatus::Continue);  // a name
  net::IpAddress loopback;
  loopback.bytes = {127, 0, 0, 1};
  const auto refused = filter.checkAddress(h, info, loopback);
  REQUIRE(refused);
  CHECK(refused->status == 403);
  CHECK(refused->reason.starts_with(
      "destination rebound.example:9901 (127.0.0.1) is h2gate's own admin endpoint"));
  net::IpAddress mapped;
  mapped.v6 = true;
  mapped.bytes = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
  CHECK(filter.checkAddress(h, info, mapped));
  net::IpAddress other;
  other.bytes = {192, 0, 2, 1};
  CHECK_FALSE(filter.checkAddress(h, info, other));
  h.port = 443;
  CHECK_FALSE(filter.checkAddress(h, info, loopback));
}
