// IP addresses and CIDR ranges as h2gate compares them: parsed from the
// config (acl and route patterns, NO_PROXY entries), from request targets
// and from what a destination name resolved to. Plain values, no I/O.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace h2gate::net {

// An IP address in network byte order; IPv4 uses the first 4 bytes.
struct IpAddress {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};
  bool operator==(const IpAddress&) const = default;
  std::string str() const;
  // An IPv4-mapped (::ffff:a.b.c.d) or IPv4-compatible (::a.b.c.d, RFC 4291
  // §2.5.5; not :: or ::1) IPv6 address as the IPv4 address it carries;
  // anything else unchanged. A dual-stack socket connecting to the mapped
  // form reaches the IPv4 address, so rules judge that one.
  IpAddress unmapped() const;
  // 0.0.0.0/8 or ::: "this host" (RFC 1122 §3.2.1.3, RFC 4291 §2.5.2), never
  // a destination; connecting to it reaches the local machine on Linux.
  bool unspecified() const;
};

// "192.0.2.1", "2001:db8::1", "[2001:db8::1]", "fe80::1%eth0" (the zone is
// ignored). Strict: no "010.1.1.1" style octets, no trailing garbage.
// IPv4-mapped addresses stay IPv6 here (see IpAddress::unmapped()).
std::optional<IpAddress> parseIp(std::string_view text);

struct CidrRange {
  IpAddress base;  // host bits zero
  uint8_t prefix = 0;
  bool contains(const IpAddress& ip) const;
  std::string str() const;  // "10.0.0.0/8", "fd00::/8"
};

// "10.0.0.0/8", "fd00::/8", or an address alone (/32, /128). Brackets around
// an IPv6 address are accepted ("[fd00::]/8"). With `strict`, an address
// with host bits set under the prefix ("10.1.2.3/8") is an error; otherwise
// they are cleared (curl, Go and Python do that with NO_PROXY entries).
// A range inside ::ffff:0:0/96 is the IPv4 range it maps
// ("::ffff:10.0.0.0/104" is 10.0.0.0/8), since destinations are compared
// unmapped. Returns nullopt and sets *error.
std::optional<CidrRange> parseCidr(std::string_view text, bool strict, std::string* error);

}  // namespace h2gate::net
