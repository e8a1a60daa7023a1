// NO_PROXY-style lists ("localhost,127.0.0.1,.svc,10.0.0.0/8,host:8080")
// read the way a given family of programs reads them, so a route can reuse
// the list the apps already have. The programs disagree (the README has the
// table); a mode picks one:
//
//   curl    entries separated by commas and blanks; "*" only as the whole
//           list; one leading and one trailing dot ignored; a name matches
//           itself and its subdomains; IP addresses and CIDR ranges match
//           IP-literal destinations; no ports, no other wildcards.
//   go      (golang.org/x/net/http/httpproxy) comma-separated, trimmed;
//           "*" as any entry; "name" matches itself and its subdomains,
//           ".name" and "*.name" only subdomains; "host:port" and
//           "[v6]:port" restrict to that port; IP and CIDR for IP literals;
//           and, as Go does whatever the list says, localhost and loopback
//           addresses always match.
//   python  (urllib's proxy_bypass_environment, plus requests' CIDR)
//           comma-separated, trimmed; "*" only as the whole list; leading
//           dots ignored; a name matches itself and its subdomains;
//           "host:port" restricts to that port; IPv4 CIDR ranges and IP
//           addresses match IP literals; no wildcards.
//
// Entries the chosen programs would never match (a port for curl, "*.x" for
// curl and Python, an IPv6 range for Python, malformed ones) are left out
// and described, so h2gate can say so instead of silently differing.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/match/matcher.h"

namespace h2gate::match {

enum class NoProxyMode { Curl, Go, Python };

// "curl", "go", "python"; nullopt otherwise.
std::optional<NoProxyMode> parseNoProxyMode(std::string_view name);
const char* noProxyModeName(NoProxyMode mode);

struct NoProxyList {
  std::vector<HostPattern> patterns;
  // One line per entry left out: "'host:8080': curl ignores ports in NO_PROXY".
  std::vector<std::string> ignored;
};

NoProxyList parseNoProxy(std::string_view list, NoProxyMode mode);

}  // namespace h2gate::match
