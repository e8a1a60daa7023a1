#include "filters/matcher.h"

#ifdef _WIN32
#include <ws2tcpip.h>
#else
#include <arpa/inet.h>
#endif

#include <algorithm>
#include <cstring>

namespace h2gate::filters {
namespace {

char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool endsWithLabel(std::string_view host, std::string_view name) {
  return host.size() > name.size() && host.ends_with(name) &&
         host[host.size() - name.size() - 1] == '.';
}

}  // namespace

std::string IpAddress::str() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof buf);
  return buf;
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
  char buf[INET6_ADDRSTRLEN + 1];
  if (text.empty() || text.size() >= sizeof buf) return std::nullopt;
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  IpAddress ip;
  if (inet_pton(AF_INET, buf, ip.bytes.data()) == 1) return ip;
  if (inet_pton(AF_INET6, buf, ip.bytes.data()) == 1) {
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

Destination::Destination(std::string_view host, uint16_t port, bool is_connect)
    : port_(port), is_connect_(is_connect) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (!host.empty() && host.back() == '.') host.remove_suffix(1);
  if (host.size() >= host_.size()) return;  // longer than any DNS name: matches no name
  std::transform(host.begin(), host.end(), host_.begin(), lower);
  length_ = host.size();
  ip_ = parseIp(this->host());
  if (ip_) ip_ = ip_->unmapped();
}

Destination::Destination(const IpAddress& ip, uint16_t port, bool is_connect)
    : ip_(ip.unmapped()), port_(port), is_connect_(is_connect) {}

std::string PortRange::str() const {
  return low == high ? std::to_string(low) : std::to_string(low) + "-" + std::to_string(high);
}

bool nameMatches(HostPattern::Kind kind, std::string_view name, std::string_view host) {
  switch (kind) {
    case HostPattern::Kind::Exact:
      return host == name;
    case HostPattern::Kind::Domain:
      return host == name || endsWithLabel(host, name);
    case HostPattern::Kind::Subdomains:
      return endsWithLabel(host, name);
    case HostPattern::Kind::Any:
      return true;
    case HostPattern::Kind::Cidr:
      return false;
  }
  return false;
}

void DestinationSet::add(HostPattern p) {
  if (p.port != 0) {
    with_port_.push_back(p);
  } else {
    switch (p.kind) {
      case HostPattern::Kind::Exact:
        exact_.insert(p.name);
        break;
      case HostPattern::Kind::Domain:
        domains_.insert(p.name);
        break;
      case HostPattern::Kind::Subdomains:
        subdomains_.insert(p.name);
        break;
      case HostPattern::Kind::Any:
        any_ = true;
        break;
      case HostPattern::Kind::Cidr:
        cidrs_.push_back(p.cidr);
        break;
    }
  }
  patterns_.push_back(std::move(p));
}

bool DestinationSet::matches(const Destination& d) const {
  if (any_) return true;
  const std::string_view host = d.host();
  if (d.ip()) {
    for (const CidrRange& c : cidrs_)
      if (c.contains(*d.ip())) return true;
  } else if (!host.empty()) {
    if (exact_.find(host) != exact_.end() || domains_.find(host) != domains_.end()) return true;
    // Every parent domain of the host: "a.b.example" → "b.example", "example".
    if (!domains_.empty() || !subdomains_.empty()) {
      for (std::size_t dot = host.find('.'); dot != std::string_view::npos;
           dot = host.find('.', dot + 1)) {
        const std::string_view parent = host.substr(dot + 1);
        if (domains_.find(parent) != domains_.end() ||
            subdomains_.find(parent) != subdomains_.end())
          return true;
      }
    }
  }
  for (const HostPattern& p : with_port_) {
    if (p.port != d.port()) continue;
    if (p.kind == HostPattern::Kind::Any) return true;
    if (p.kind == HostPattern::Kind::Cidr) {
      if (d.ip() && p.cidr.contains(*d.ip())) return true;
    } else if (!d.ip() && !host.empty() && nameMatches(p.kind, p.name, host)) {
      return true;
    }
  }
  return false;
}

bool Match::matches(const Destination& d) const {
  if (kind == Kind::Connect && !d.isConnect()) return false;
  if (kind == Kind::Absolute && d.isConnect()) return false;
  if (!ports.empty() && std::none_of(ports.begin(), ports.end(),
                                     [&](const PortRange& r) { return r.contains(d.port()); }))
    return false;
  return !has_destinations || destinations.matches(d);
}

}  // namespace h2gate::filters
