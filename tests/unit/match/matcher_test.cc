#include "gateway/match/matcher.h"

#include <catch2/catch.hpp>

using namespace h2gate;
using namespace h2gate::match;

namespace {

HostPattern name(HostPattern::Kind kind, const std::string& n, uint16_t port = 0) {
  HostPattern p;
  p.kind = kind;
  p.name = n;
  p.port = port;
  return p;
}

HostPattern cidr(const std::string& text) {
  std::string error;
  HostPattern p;
  p.kind = HostPattern::Kind::Cidr;
  auto r = parseCidr(text, true, &error);
  REQUIRE(r);
  p.cidr = *r;
  return p;
}

bool in(const DestinationSet& set, const std::string& host, uint16_t port = 443) {
  const Destination d(host, port, true);
  return set.matches(d);
}

}  // namespace

TEST_CASE("destination host: case, trailing dot, brackets, zone", "[match][matcher]") {
  const Destination a("WWW.Example.COM.", 443, true);
  CHECK(a.host() == "www.example.com");
  CHECK_FALSE(a.ip());
  const Destination b("[2001:DB8::1]", 80, false);
  CHECK(b.host() == "2001:db8::1");
  REQUIRE(b.ip());
  CHECK(b.ip()->v6);
  const Destination c("fe80::1%eth0", 80, false);  // zone ids do not matter
  REQUIRE(c.ip());
  CHECK(c.ip()->str() == "fe80::1");
  // A zone ending in '.' is still a zone: the address stays (found by
  // request_parser_fuzz: "[::1%.]" had no address, so no CIDR rule matched).
  for (const char* h : {"[::1%.]", "::1%.", "[::1%eth0.100]", "[::FFFF:127.0.0.1%.]"}) {
    INFO(h);
    const Destination z(h, 80, false);
    REQUIRE(z.ip());
    CHECK(z.ip()->str() ==
          (std::string(h).find("FFFF") != std::string::npos ? "127.0.0.1" : "::1"));
  }
  const Destination d(std::string(300, 'a'), 80, false);  // longer than any DNS name
  CHECK(d.host().empty());
}

TEST_CASE("exact, domain and subdomain patterns", "[match][matcher]") {
  DestinationSet s;
  s.add(name(HostPattern::Kind::Exact, "api.example.com"));
  s.add(name(HostPattern::Kind::Domain, "corp.example"));
  s.add(name(HostPattern::Kind::Subdomains, "internal.test"));
  CHECK(in(s, "api.example.com"));
  CHECK(in(s, "API.Example.Com."));
  CHECK_FALSE(in(s, "x.api.example.com"));  // exact is exact
  CHECK_FALSE(in(s, "example.com"));
  CHECK(in(s, "corp.example"));           // a domain covers itself...
  CHECK(in(s, "a.b.corp.example"));       // ...and every subdomain
  CHECK_FALSE(in(s, "notcorp.example"));  // on a label boundary only
  CHECK_FALSE(in(s, "corp.example.evil"));
  CHECK(in(s, "x.internal.test"));
  CHECK(in(s, "a.b.internal.test"));
  CHECK_FALSE(in(s, "internal.test"));  // "*.x" is subdomains only
  CHECK_FALSE(in(s, "xinternal.test"));
  // Names never match IP literals, and an IP never matches a name pattern.
  DestinationSet numeric;
  numeric.add(name(HostPattern::Kind::Domain, "0.0.1"));
  CHECK_FALSE(in(numeric, "10.0.0.1"));
}

TEST_CASE("CIDR patterns: edges, IPv4 and IPv6", "[match][matcher]") {
  DestinationSet s;
  s.add(cidr("10.0.0.0/8"));
  s.add(cidr("192.168.1.128/25"));
  s.add(cidr("fd00::/8"));
  s.add(cidr("2001:db8::1"));  // one address: /128
  CHECK(in(s, "10.0.0.0"));
  CHECK(in(s, "10.255.255.255"));
  CHECK_FALSE(in(s, "11.0.0.0"));
  CHECK_FALSE(in(s, "9.255.255.255"));
  CHECK(in(s, "192.168.1.128"));
  CHECK(in(s, "192.168.1.255"));
  CHECK_FALSE(in(s, "192.168.1.127"));
  CHECK(in(s, "fd12:3456::1"));
  CHECK(in(s, "[FD00::]"));
  CHECK_FALSE(in(s, "fe00::1"));
  CHECK(in(s, "2001:db8::1"));
  CHECK(in(s, "2001:DB8:0:0:0:0:0:1"));
  CHECK_FALSE(in(s, "2001:db8::2"));
  // IPv4-mapped and -compatible IPv6 is the IPv4 address it carries (a
  // dual-stack socket connects there): in 10/8.
  CHECK(in(s, "::ffff:10.0.0.1"));
  CHECK(in(s, "[::ffff:a00:1]"));
  CHECK(in(s, "::10.0.0.1"));
  CHECK_FALSE(in(s, "::ffff:11.0.0.1"));
  CHECK_FALSE(in(s, "10.example"));

  DestinationSet all;
  all.add(cidr("0.0.0.0/0"));
  CHECK(in(all, "1.2.3.4"));
  CHECK_FALSE(in(all, "::1"));  // families never mix
}

TEST_CASE("a destination made from an IPv4-mapped address is the IPv4 address",
          "[match][matcher]") {
  auto ip = [](const char* text) {
    auto parsed = parseIp(text);
    REQUIRE(parsed);
    return *parsed;
  };
  // A destination made from an address (a resolved one) is that address.
  const Destination d(ip("::ffff:169.254.169.254"), 80, false);
  REQUIRE(d.ip());
  CHECK_FALSE(d.ip()->v6);
  CHECK(d.ip()->str() == "169.254.169.254");
  CHECK(d.port() == 80);
  CHECK_FALSE(d.isConnect());
}

TEST_CASE("patterns with a port, and Any", "[match][matcher]") {
  DestinationSet s;
  s.add(name(HostPattern::Kind::Domain, "svc.test", 8080));
  CHECK(in(s, "a.svc.test", 8080));
  CHECK_FALSE(in(s, "a.svc.test", 443));
  DestinationSet any;
  any.add(name(HostPattern::Kind::Any, ""));
  CHECK(any.matchesAny());
  CHECK(in(any, "anything"));
  CHECK(in(any, "::1"));
}
