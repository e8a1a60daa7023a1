#include "gateway/net/ip_address.h"

#include <algorithm>
#include <cstring>

#include <asio/ip/address.hpp>

#include "config/ip_text.h"

namespace h2gate::net {

std::string IpAddress::str() const {
  if (v6) {
    asio::ip::address_v6::bytes_type b;
    std::copy(bytes.begin(), bytes.end(), b.begin());
    return asio::ip::address_v6(b).to_string();
  }
  asio::ip::address_v4::bytes_type b;
  std::copy(bytes.begin(), bytes.begin() + 4, b.begin());
  return asio::ip::address_v4(b).to_string();
}

IpAddress IpAddress::unmapped() const {
  if (!v6) return *this;
  const bool zero80 =
      std::all_of(bytes.begin(), bytes.begin() + 10, [](uint8_t b) { return b == 0; });
  if (!zero80) return *this;
  const bool mapped = bytes[10] == 0xFF && bytes[11] == 0xFF;
  // ::a.b.c.d, but not :: (unspecified) and ::1 (loopback).
  const bool compat = bytes[10] == 0 && bytes[11] == 0 &&
                      ((bytes[12] | bytes[13] | bytes[14]) != 0 || bytes[15] > 1);
  if (!mapped && !compat) return *this;
  IpAddress v4;
  std::copy(bytes.begin() + 12, bytes.end(), v4.bytes.begin());
  return v4;
}

bool IpAddress::unspecified() const {
  if (!v6) return bytes[0] == 0;
  return std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; });
}

std::optional<IpAddress> parseIp(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']')
    text = text.substr(1, text.size() - 2);
  if (const std::size_t zone = text.find('%'); zone != std::string_view::npos) {
    if (zone == 0 || zone + 1 == text.size()) return std::nullopt;
    text = text.substr(0, zone);
  }
  // The longest IPv6 text (INET6_ADDRSTRLEN without its NUL).
  constexpr std::size_t kMaxText = 45;
  if (text.empty() || text.size() > kMaxText) return std::nullopt;
  // The same forms on every platform (Windows' inet_pton takes more).
  if (!config::ipTextIsStrict(text)) return std::nullopt;
  const std::string z(text);
  asio::error_code ec;
  IpAddress ip;
  if (const asio::ip::address_v4 v4 = asio::ip::make_address_v4(z, ec); !ec) {
    const asio::ip::address_v4::bytes_type b = v4.to_bytes();
    std::copy(b.begin(), b.end(), ip.bytes.begin());
    return ip;
  }
  if (const asio::ip::address_v6 v6 = asio::ip::make_address_v6(z, ec); !ec) {
    const asio::ip::address_v6::bytes_type b = v6.to_bytes();
    std::copy(b.begin(), b.end(), ip.bytes.begin());
    ip.v6 = true;
    return ip;
  }
  return std::nullopt;
}

bool CidrRange::contains(const IpAddress& ip) const {
  if (ip.v6 != base.v6) return false;
  const std::size_t whole = prefix / 8;
  if (std::memcmp(ip.bytes.data(), base.bytes.data(), whole) != 0) return false;
  const unsigned rest = prefix % 8;
  if (rest == 0) return true;
  const auto mask = static_cast<uint8_t>(0xFF << (8 - rest));
  return (ip.bytes[whole] & mask) == base.bytes[whole];
}

std::string CidrRange::str() const {
  return base.str() + "/" + std::to_string(prefix);
}

std::optional<CidrRange> parseCidr(std::string_view text, bool strict, std::string* error) {
  const std::size_t slash = text.find('/');
  const std::string_view addr = text.substr(0, slash);
  const std::optional<IpAddress> ip = parseIp(addr);
  if (!ip || addr.find('%') != std::string_view::npos) {
    *error = "'" + std::string(addr) + "' is not an IPv4 or IPv6 address";
    return std::nullopt;
  }
  const unsigned max = ip->v6 ? 128 : 32;
  unsigned prefix = max;
  if (slash != std::string_view::npos) {
    const std::string_view bits = text.substr(slash + 1);
    if (bits.empty() || bits.size() > 3 ||
        !std::all_of(bits.begin(), bits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      *error = "prefix length '" + std::string(bits) + "' is not a number";
      return std::nullopt;
    }
    prefix = 0;
    for (char c : bits) prefix = prefix * 10 + static_cast<unsigned>(c - '0');
    if (prefix > max) {
      *error = "prefix length /" + std::string(bits) + " is longer than the address (at most /" +
               std::to_string(max) + ")";
      return std::nullopt;
    }
  }
  CidrRange range;
  range.base = *ip;
  range.prefix = static_cast<uint8_t>(prefix);
  if (ip->v6 && prefix >= 96 && ip->bytes[10] == 0xFF && ip->bytes[11] == 0xFF &&
      std::all_of(ip->bytes.begin(), ip->bytes.begin() + 10, [](uint8_t b) { return b == 0; })) {
    range.base = IpAddress{};  // ::ffff:a.b.c.d/N is a.b.c.d/(N-96)
    std::copy(ip->bytes.begin() + 12, ip->bytes.end(), range.base.bytes.begin());
    range.prefix = static_cast<uint8_t>(prefix - 96);
    prefix -= 96;
  }
  const IpAddress given = range.base;
  for (unsigned i = 0; i < 16; ++i) {
    const unsigned keep = prefix >= (i + 1) * 8 ? 8 : prefix > i * 8 ? prefix - i * 8 : 0;
    range.base.bytes[i] &= static_cast<uint8_t>(keep == 0 ? 0 : 0xFF << (8 - keep));
  }
  if (strict && !(range.base == given)) {
    *error = "'" + std::string(text) + "' has host bits set (did you mean " + range.str() + "?)";
    return std::nullopt;
  }
  return range;
}

}  // namespace h2gate::net
