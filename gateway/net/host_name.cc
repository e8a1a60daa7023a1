#include "gateway/net/host_name.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "gateway/base/ascii.h"
#include "gateway/net/idn.h"
#include "gateway/net/ip_address.h"

namespace h2gate::net {
namespace {

bool validChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool hasHexPrefix(std::string_view s) {
  return s.size() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
}

// The URL Standard's IPv4 number parser: "0x1F" hex, "017" octal, "17"
// decimal, "0x" zero. Values beyond 2^32 saturate (they are too big for any
// part). nullopt for an empty part or a digit outside the radix.
std::optional<uint64_t> ipv4Number(std::string_view s) {
  if (s.empty()) return std::nullopt;
  unsigned radix = 10;
  if (hasHexPrefix(s)) {
    s.remove_prefix(2);
    radix = 16;
  } else if (s.size() >= 2 && s[0] == '0') {
    s.remove_prefix(1);
    radix = 8;
  }
  uint64_t value = 0;
  for (char c : s) {
    const int d = hexValue(c);
    if (d < 0 || static_cast<unsigned>(d) >= radix) return std::nullopt;
    value = std::min<uint64_t>(value * radix + static_cast<unsigned>(d), uint64_t{1} << 33);
  }
  return value;
}

// The URL Standard's IPv4 parser, for a host that ends in a number.
std::optional<uint32_t> parseUrlIpv4(std::string_view host) {
  if (!host.empty() && host.back() == '.' && host.size() > 1) host.remove_suffix(1);
  std::array<uint64_t, 4> parts{};
  size_t n = 0;
  for (;;) {
    const size_t dot = host.find('.');
    if (n == parts.size()) return std::nullopt;  // more than four parts
    const std::optional<uint64_t> v = ipv4Number(host.substr(0, dot));
    if (!v) return std::nullopt;
    parts[n++] = *v;
    if (dot == std::string_view::npos) break;
    host.remove_prefix(dot + 1);
  }
  for (size_t i = 0; i + 1 < n; ++i)
    if (parts[i] > 255) return std::nullopt;
  // The last part fills the bytes the others left: "127.1" is 127.0.0.1.
  const uint64_t last_limit = uint64_t{1} << (8 * (5 - n));
  if (parts[n - 1] >= last_limit) return std::nullopt;
  uint64_t out = parts[n - 1];
  for (size_t i = 0; i + 1 < n; ++i) out += parts[i] << (8 * (3 - i));
  return static_cast<uint32_t>(out);
}

std::string unspecifiedError(const std::string& written) {
  return "'" + written +
         "' is the unspecified address (0.0.0.0/8, ::), which means this host and is not a "
         "destination";
}

}  // namespace

bool endsInNumber(std::string_view host) {
  if (!host.empty() && host.back() == '.') {
    if (host.size() == 1) return false;
    host.remove_suffix(1);
  }
  const size_t dot = host.rfind('.');
  const std::string_view last = dot == std::string_view::npos ? host : host.substr(dot + 1);
  if (last.empty()) return false;
  if (std::all_of(last.begin(), last.end(), isDigit)) return true;
  return hasHexPrefix(last) &&
         std::all_of(last.begin() + 2, last.end(), [](char c) { return hexValue(c) >= 0; });
}

std::optional<std::string> canonicalRequestHost(std::string_view host, bool bracketed,
                                                std::string* error) {
  if (bracketed) {
    std::string_view zone;
    std::string_view addr = host;
    if (const size_t pct = host.find('%'); pct != std::string_view::npos) {
      addr = host.substr(0, pct);
      zone = host.substr(pct);
    }
    std::optional<IpAddress> ip = addr.empty() ? std::nullopt : parseIp(addr);
    if (!ip || !ip->v6 || zone.size() == 1) {
      *error = "'[" + std::string(host) + "]' is not an IPv6 address";
      return std::nullopt;
    }
    const IpAddress unmapped = ip->unmapped();
    if (unmapped.unspecified()) {
      *error = unspecifiedError("[" + std::string(host) + "]");
      return std::nullopt;
    }
    if (!unmapped.v6) return unmapped.str();  // mapped/compatible: the IPv4 address, no zone
    return unmapped.str() + std::string(zone);
  }
  if (!endsInNumber(host)) return std::string(host);
  const std::optional<uint32_t> v4 = parseUrlIpv4(host);
  if (!v4) {
    *error = "'" + std::string(host) +
             "' ends in a number, so it must be an IPv4 address (as in a browser), and it is not "
             "one";
    return std::nullopt;
  }
  IpAddress ip;
  for (int i = 0; i < 4; ++i) ip.bytes[i] = static_cast<uint8_t>(*v4 >> (24 - 8 * i));
  if (ip.unspecified()) {
    *error = unspecifiedError(std::string(host));
    return std::nullopt;
  }
  return ip.str();
}

std::optional<std::string> normalizeHostName(std::string_view text, std::string* error) {
  if (!text.empty() && text.back() == '.') text.remove_suffix(1);
  std::string out;
  if (isAscii(text)) {
    out = toLowerAscii(text);
  } else {
    std::optional<std::string> ascii = idnToAscii(std::string(text), error);
    if (!ascii) return std::nullopt;
    out = std::move(*ascii);
  }
  if (out.empty()) {
    *error = "empty host name";
    return std::nullopt;
  }
  if (out.size() > 253) {
    *error = "host name longer than 253 characters";
    return std::nullopt;
  }
  if (!std::all_of(out.begin(), out.end(), validChar)) {
    *error =
        "'" + std::string(text) + "' is not a host name (letters, digits, '-', '_' and '.' only)";
    return std::nullopt;
  }
  if (out.front() == '.' || out.find("..") != std::string::npos) {
    *error = "'" + std::string(text) + "' has an empty label";
    return std::nullopt;
  }
  return out;
}

}  // namespace h2gate::net
