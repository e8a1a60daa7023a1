#include "gateway/match/matcher.h"

#include <algorithm>

#include "gateway/base/ascii.h"

namespace h2gate::match {
namespace {

bool endsWithLabel(std::string_view host, std::string_view name) {
  return host.size() > name.size() && host.ends_with(name) &&
         host[host.size() - name.size() - 1] == '.';
}

}  // namespace

Destination::Destination(std::string_view host, uint16_t port, bool is_connect)
    : port_(port), is_connect_(is_connect) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  // A name's root dot goes; an IPv6 literal has none (a zone id may end in
  // '.': "::1%." is ::1, and stripping the dot would leave it no address,
  // out of reach of every CIDR rule).
  if (!host.empty() && host.back() == '.' && host.find(':') == std::string_view::npos)
    host.remove_suffix(1);
  if (host.size() >= host_.size()) return;  // longer than any DNS name: matches no name
  std::transform(host.begin(), host.end(), host_.begin(), lowerAscii);
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

}  // namespace h2gate::match
