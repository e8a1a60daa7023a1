#include "gateway/net/host_addresses.h"

#include <algorithm>

#include <catch2/catch.hpp>

using namespace h2gate::net;

TEST_CASE("parseIpv4AnyNotation reads what the resolver reads", "[net][own_addresses]") {
  for (const char* text : {"127.0.0.1", "127.1", "0x7f.1", "0X7F.0.0.1", "0x7f000001", "2130706433",
                           "0177.0.0.1", "127.000.000.001"}) {
    INFO(text);
    const auto a = parseIpv4AnyNotation(text);
    REQUIRE(a);
    CHECK(a->to_string() == "127.0.0.1");
  }
  for (const char* text : {"", "1.2.3.256", "127.0.0.1 x", "127.0.0.1\tx", "localhost", "::1",
                           "1.2.3.4.5", "0x", "08.0.0.1"}) {
    INFO(text);
    CHECK_FALSE(parseIpv4AnyNotation(text));
  }
}

TEST_CASE("interfaceAddresses includes loopback", "[net][own_addresses]") {
  const auto all = interfaceAddresses();
  CHECK(std::any_of(all.begin(), all.end(), [](const asio::ip::address& a) {
    return a.is_v4() && a.to_v4() == asio::ip::address_v4::loopback();
  }));
}
