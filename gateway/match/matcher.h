// Destination matchers shared by the routing and policy filters
// (forward_proxy routes, acl) and by the PAC engine (the NO_PROXY list of the
// system settings, gateway/match/no_proxy.h): host names (exact, domain
// suffix, wildcard), IPv4/IPv6 CIDR ranges, ports and port ranges, and the
// kind of request (CONNECT or absolute-form). They sit below both, so
// neither filters/ nor gateway/pac_engine/ needs the other for them.
//
// Host names are compared in a normal form: ASCII lower case, one trailing
// dot removed, no IPv6 brackets, IDN in the A-label (xn--) form. Requests
// carry A-labels (the request parser refuses non-ASCII hosts); the config
// loader turns U-labels into A-labels (filters/match_config.h).
//
// Everything here is built once from the config and then only read: a
// Match is shared by all workers. Matching allocates nothing: the request's
// host is normalised into a fixed buffer on the stack (Destination) and
// looked up in hash sets with string_view keys.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "gateway/net/ip_address.h"

namespace h2gate::match {

// The address types the matchers compare (gateway/net/ip_address.h).
using net::CidrRange;
using net::IpAddress;
using net::parseCidr;
using net::parseIp;

// The request's destination in normal form. Built on the stack per request.
class Destination {
 public:
  // `host` as the request parser left it (no brackets; IP literals already
  // canonical, see net::canonicalRequestHost() in gateway/net/host_name.h); port;
  // CONNECT or not. An IPv4-mapped IPv6 literal is taken as its IPv4
  // address all the same.
  Destination(std::string_view host, uint16_t port, bool is_connect);
  // An address itself (direct mode: one the destination name resolved to),
  // unmapped. host() is empty: only address patterns match it, and writing
  // the text would cost more than the matching.
  Destination(const IpAddress& ip, uint16_t port, bool is_connect);
  Destination(const Destination&) = delete;
  Destination& operator=(const Destination&) = delete;

  // Lower-case, without a trailing dot; empty when the host was longer than
  // a DNS name may be (then no name pattern matches it).
  std::string_view host() const { return std::string_view(host_.data(), length_); }
  // Set when the host is an IP literal.
  const std::optional<IpAddress>& ip() const { return ip_; }
  uint16_t port() const { return port_; }
  bool isConnect() const { return is_connect_; }

 private:
  std::array<char, 256> host_{};
  std::size_t length_ = 0;
  std::optional<IpAddress> ip_;
  uint16_t port_ = 0;
  bool is_connect_ = false;
};

struct PortRange {
  uint16_t low = 0;
  uint16_t high = 0;
  bool contains(uint16_t port) const { return port >= low && port <= high; }
  std::string str() const;  // "443" or "8000-8999"
};

// One destination pattern as written in the config or a NO_PROXY entry.
struct HostPattern {
  enum class Kind {
    Exact,       // "example.com": that name only
    Domain,      // "example.com" as a suffix: the name and every subdomain
    Subdomains,  // "*.example.com": every subdomain, not the name itself
    Any,         // "*": every destination, names and addresses
    Cidr,        // IP destinations in `cidr` (literals; in direct mode also
                 // the addresses a name resolves to, see Filter::checkAddress)
  };
  Kind kind = Kind::Exact;
  std::string name;   // normal form, without "*." or a leading dot
  CidrRange cidr;     // Kind::Cidr only
  uint16_t port = 0;  // NO_PROXY "host:port" entries (Go, Python); 0: any port
};

// A set of destination patterns, any of which may match.
class DestinationSet {
 public:
  void add(HostPattern pattern);
  bool matches(const Destination& d) const;
  bool empty() const { return patterns_.empty(); }
  bool matchesAny() const { return any_; }  // holds a port-less "*"
  // In the order added, for the PAC file and messages.
  const std::vector<HostPattern>& patterns() const { return patterns_; }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using NameSet = std::unordered_set<std::string, Hash, std::equal_to<>>;

  std::vector<HostPattern> patterns_;
  // Port-less name patterns, by kind, for lookups without a scan.
  NameSet exact_;
  NameSet domains_;
  NameSet subdomains_;
  std::vector<CidrRange> cidrs_;
  // Patterns with a port (NO_PROXY "host:port"): few, scanned.
  std::vector<HostPattern> with_port_;
  bool any_ = false;
};

// True when `host` (normal form) matches a name pattern of `kind`/`name`.
bool nameMatches(HostPattern::Kind kind, std::string_view name, std::string_view host);

// One rule's conditions. A request matches when its destination matches one
// of `destinations` (unless has_destinations is false: then any
// destination), its port is in one of `ports` (none: any port) and its kind
// is `kind`.
struct Match {
  enum class Kind { Any, Connect, Absolute };
  DestinationSet destinations;
  // Destination patterns were given, maybe none (an empty NO_PROXY list):
  // then no destination matches.
  bool has_destinations = false;
  std::vector<PortRange> ports;
  Kind kind = Kind::Any;

  bool matches(const Destination& d) const;
  // Matches every request: no condition, or only a "*" destination.
  bool catchAll() const {
    return (!has_destinations || destinations.matchesAny()) && ports.empty() && kind == Kind::Any;
  }
};

}  // namespace h2gate::match
