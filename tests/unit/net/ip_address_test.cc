#include "gateway/net/ip_address.h"

#include <catch2/catch.hpp>

using namespace h2gate::net;

TEST_CASE("CIDR ranges: parse errors, host bits, brackets", "[net][ip_address]") {
  std::string error;
  CHECK_FALSE(parseCidr("10.1.2.3/8", true, &error));
  CHECK(error == "'10.1.2.3/8' has host bits set (did you mean 10.0.0.0/8?)");
  auto lenient = parseCidr("10.1.2.3/8", false, &error);
  REQUIRE(lenient);
  CHECK(lenient->str() == "10.0.0.0/8");
  CHECK_FALSE(parseCidr("10.0.0.0/33", true, &error));
  CHECK(error == "prefix length /33 is longer than the address (at most /32)");
  CHECK_FALSE(parseCidr("fd00::/129", true, &error));
  CHECK_FALSE(parseCidr("10.0.0.0/", true, &error));
  CHECK_FALSE(parseCidr("10.0.0.0/x", true, &error));
  CHECK_FALSE(parseCidr("300.0.0.0/8", true, &error));
  CHECK(error == "'300.0.0.0' is not an IPv4 or IPv6 address");
  CHECK_FALSE(parseCidr("010.0.0.0/8", true, &error));  // no octal-looking octets
  CHECK_FALSE(parseCidr("example.com/8", true, &error));
  CHECK(parseCidr("[fd00::]/8", true, &error));
}

TEST_CASE("IPv4-mapped addresses: unmapped for matching, and as config ranges",
          "[net][ip_address]") {
  auto ip = [](const char* text) {
    auto parsed = parseIp(text);
    REQUIRE(parsed);
    return *parsed;
  };
  CHECK(ip("::ffff:127.0.0.1").unmapped() == ip("127.0.0.1"));
  CHECK(ip("::127.0.0.1").unmapped() == ip("127.0.0.1"));
  CHECK(ip("::0.0.0.2").unmapped() == ip("0.0.0.2"));
  CHECK(ip("::1").unmapped() == ip("::1"));  // loopback, not 0.0.0.1
  CHECK(ip("::").unmapped() == ip("::"));
  CHECK(ip("64:ff9b::7f00:1").unmapped() == ip("64:ff9b::7f00:1"));  // NAT64 is a real route
  CHECK(ip("2001:db8::1").unmapped() == ip("2001:db8::1"));
  CHECK(ip("0.0.0.0").unspecified());
  CHECK(ip("0.255.1.1").unspecified());
  CHECK(ip("::").unspecified());
  CHECK_FALSE(ip("::1").unspecified());
  CHECK_FALSE(ip("1.0.0.0").unspecified());

  // A range written in the mapped space is the IPv4 range.
  std::string error;
  auto mapped = parseCidr("::ffff:10.0.0.0/104", true, &error);
  REQUIRE(mapped);
  CHECK(mapped->str() == "10.0.0.0/8");
  CHECK(parseCidr("::ffff:169.254.169.254", true, &error)->str() == "169.254.169.254/32");
  CHECK_FALSE(parseCidr("::ffff:10.0.0.1/104", true, &error));
  CHECK(error == "'::ffff:10.0.0.1/104' has host bits set (did you mean 10.0.0.0/8?)");
  CHECK(parseCidr("::/96", true, &error)->str() == "::/96");  // not the mapped space
}
