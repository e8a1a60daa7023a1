// Request hosts in canonical form (canonicalRequestHost): the notations of
// one IPv4 address that a browser's URL parser and inet_aton(3) accept all
// become that address, so policy rules judge what h2gate connects to.
#include "gateway/net/host_name.h"

#include <catch2/catch.hpp>

using namespace h2gate::net;

namespace {

// The canonical host, or "error: <message>".
std::string canonical(const std::string& host, bool bracketed = false) {
  std::string error;
  const std::optional<std::string> out = canonicalRequestHost(host, bracketed, &error);
  return out ? *out : "error: " + error;
}

}  // namespace

TEST_CASE("IPv4 notations become the dotted quad", "[net][host_name]") {
  // Every notation getaddrinfo (inet_aton) reads as 127.0.0.1: each reached it
  // when connected to, so each must be judged as that address.
  for (const char* form : {"127.0.0.1", "127.0.0.01", "127.000.000.001", "0x7f.0x0.0x0.0x1",
                           "0X7F.0.0.1", "2130706433", "0x7f000001", "0177.0.0.1", "0177.1",
                           "127.1", "0x7f.1", "127.0.1", "127.0.0.1.", "127.1."}) {
    INFO(form);
    CHECK(canonical(form) == "127.0.0.1");
  }
  // The cloud metadata address in the notations that got past a deny.
  for (const char* form : {"0xa9.0xfe.0xa9.0xfe", "2852039166", "0251.0376.0251.0376",
                           "169.254.43518", "0xa9fea9fe", "169.16689662"}) {
    INFO(form);
    CHECK(canonical(form) == "169.254.169.254");
  }
  CHECK(canonical("255.255.255.255") == "255.255.255.255");
  CHECK(canonical("0xffffffff") == "255.255.255.255");
  CHECK(canonical("1.0x") == "1.0.0.0");  // "0x" alone is zero (URL Standard)
}

TEST_CASE("hosts that end in a number but are no IPv4 address are refused", "[net][host_name]") {
  for (const char* bad :
       {"1.2.3.256", "256.1", "1.2.3.4.5", "4294967296", "0x100000000", "08.1.1.1", "1.2.3.09",
        "1..2", "foo.1", "example.0x10", "0xg.1", "99999999999999999999999999"}) {
    INFO(bad);
    CHECK(canonical(bad).starts_with("error: '"));
  }
  CHECK(canonical("1.2.3.256") ==
        "error: '1.2.3.256' ends in a number, so it must be an IPv4 address (as in a browser), "
        "and it is not one");
}

TEST_CASE("names are left alone", "[net][host_name]") {
  for (const char* name : {"example.com", "Example.COM", "1password.com", "x1", "0x7f.com", "a.0xz",
                           "127.0.0.1x", "xn--bcher-kva.example", "localhost", "a_b.c"}) {
    INFO(name);
    CHECK_FALSE(endsInNumber(name));
    CHECK(canonical(name) == name);
  }
  CHECK(endsInNumber("127.1"));
  CHECK(endsInNumber("host.0x"));
  CHECK(endsInNumber("10."));
  CHECK_FALSE(endsInNumber("."));
  CHECK_FALSE(endsInNumber("1.."));
}

TEST_CASE("the unspecified address is not a destination", "[net][host_name]") {
  for (const char* form : {"0", "0.0.0.0", "0x0", "00", "0.0", "0.1.2.3", "0x00ffffff"}) {
    INFO(form);
    CHECK(canonical(form).find("is the unspecified address") != std::string::npos);
  }
  CHECK(canonical("::", true).find("is the unspecified address") != std::string::npos);
  CHECK(canonical("::ffff:0.0.0.0", true).find("unspecified") != std::string::npos);
}

TEST_CASE("IPv6 literals: canonical text, IPv4-mapped and -compatible as IPv4",
          "[net][host_name]") {
  CHECK(canonical("::1", true) == "::1");
  CHECK(canonical("0:0:0:0:0:0:0:1", true) == "::1");
  CHECK(canonical("2001:DB8:0:0::1", true) == "2001:db8::1");
  CHECK(canonical("::ffff:127.0.0.1", true) == "127.0.0.1");
  CHECK(canonical("::ffff:7f00:1", true) == "127.0.0.1");
  CHECK(canonical("::FFFF:A9FE:A9FE", true) == "169.254.169.254");
  CHECK(canonical("::127.0.0.1", true) == "127.0.0.1");  // IPv4-compatible (deprecated)
  CHECK(canonical("::7f00:1", true) == "127.0.0.1");
  CHECK(canonical("fe80::1%eth0", true) == "fe80::1%eth0");
  CHECK(canonical("::ffff:1.2.3.4%eth0", true) == "1.2.3.4");
  for (const char* bad :
       {"127.0.0.1", "example.com", "1::2::3", "::ffff:127.0.0.01", "fe80::1%", "", "%eth0"}) {
    INFO(bad);
    CHECK(canonical(bad, true).starts_with("error: '["));
  }
}

TEST_CASE("config host names: case, trailing dot, IDN to A-labels", "[net][host_name]") {
  std::string error;
  CHECK(normalizeHostName("Bücher.Example.", &error) == "xn--bcher-kva.example");
  CHECK(normalizeHostName("XN--BCHER-KVA.example", &error) == "xn--bcher-kva.example");
  CHECK(normalizeHostName("München.DE", &error) == "xn--mnchen-3ya.de");
  CHECK(normalizeHostName("under_score.internal", &error) == "under_score.internal");
  CHECK_FALSE(normalizeHostName("a..b", &error));
  CHECK(error == "'a..b' has an empty label");
  CHECK_FALSE(normalizeHostName("a b", &error));
  CHECK_FALSE(normalizeHostName("", &error));
  CHECK_FALSE(normalizeHostName(".", &error));
  CHECK_FALSE(normalizeHostName(std::string(254, 'a'), &error));
}
