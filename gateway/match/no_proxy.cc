#include "gateway/match/no_proxy.h"

#include <algorithm>

#include "gateway/base/ascii.h"
#include "gateway/net/host_name.h"

namespace h2gate::match {
namespace {

// Splits on commas (and, for curl, blanks); empty entries are dropped.
std::vector<std::string_view> entries(std::string_view list, bool blanks_separate) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    const bool end =
        i == list.size() || list[i] == ',' || (blanks_separate && isSpaceOrTab(list[i]));
    if (!end) continue;
    const std::string_view e = trimOws(list.substr(start, i - start));
    if (!e.empty()) out.push_back(e);
    start = i + 1;
  }
  return out;
}

bool allDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "8080" → 8080; 0 when not a port.
uint16_t portOf(std::string_view s) {
  if (!allDigits(s) || s.size() > 5) return 0;
  unsigned v = 0;
  for (char c : s) v = v * 10 + static_cast<unsigned>(c - '0');
  return v >= 1 && v <= 65535 ? static_cast<uint16_t>(v) : 0;
}

class Builder {
 public:
  void ignore(std::string_view entry, const std::string& why) {
    out_.ignored.push_back("'" + std::string(entry) + "': " + why);
  }
  void any(uint16_t port = 0) {
    HostPattern p;
    p.kind = HostPattern::Kind::Any;
    p.port = port;
    out_.patterns.push_back(std::move(p));
  }
  // An IP address or CIDR range (lenient: host bits are cleared, as the
  // programs do). False when `text` is not one.
  bool cidr(std::string_view text, uint16_t port) {
    std::string error;
    std::optional<CidrRange> range = parseCidr(text, /*strict=*/false, &error);
    if (!range) return false;
    HostPattern p;
    p.kind = HostPattern::Kind::Cidr;
    p.cidr = *range;
    p.port = port;
    out_.patterns.push_back(std::move(p));
    return true;
  }
  void name(std::string_view entry, std::string_view text, HostPattern::Kind kind, uint16_t port) {
    std::string error;
    std::optional<std::string> n = net::normalizeHostName(text, &error);
    if (!n) return ignore(entry, error);
    HostPattern p;
    p.kind = kind;
    p.name = std::move(*n);
    p.port = port;
    out_.patterns.push_back(std::move(p));
  }
  NoProxyList take() { return std::move(out_); }

 private:
  NoProxyList out_;
};

void parseCurl(std::string_view list, Builder& b) {
  if (list == "*") return b.any();
  for (std::string_view e : entries(list, /*blanks_separate=*/true)) {
    std::string_view t = e;
    if (t.back() == '.') t.remove_suffix(1);
    if (!t.empty() && t.front() == '.') t.remove_prefix(1);
    if (t.empty()) continue;
    if (b.cidr(t, 0)) continue;
    if (t == "*") {
      b.ignore(e, "curl honours '*' only as the whole list");
    } else if (t.find('*') != std::string_view::npos) {
      b.ignore(e, "curl has no wildcards in NO_PROXY (write the domain: it covers subdomains)");
    } else if (t.find(':') != std::string_view::npos || t.find('/') != std::string_view::npos) {
      b.ignore(e, "curl takes no ports in NO_PROXY and this is no IP range");
    } else {
      b.name(e, t, HostPattern::Kind::Domain, 0);
    }
  }
}

void parseGo(std::string_view list, Builder& b) {
  std::vector<std::string_view> all = entries(list, /*blanks_separate=*/false);
  if (std::find(all.begin(), all.end(), "*") != all.end()) return b.any();
  for (std::string_view e : all) {
    if (e.find('/') != std::string_view::npos) {
      if (!b.cidr(e, 0)) b.ignore(e, "not a CIDR range");
      continue;
    }
    // host:port, [v6]:port; a bare IPv6 address has several colons.
    std::string_view host = e;
    uint16_t port = 0;
    const std::size_t colon = e.rfind(':');
    const bool bracketed = e.front() == '[';
    if (colon != std::string_view::npos && (bracketed || e.find(':') == colon) &&
        (!bracketed || e[colon - 1] == ']')) {
      port = portOf(e.substr(colon + 1));
      if (port == 0) {
        b.ignore(e, "'" + std::string(e.substr(colon + 1)) + "' is not a port");
        continue;
      }
      host = e.substr(0, colon);
      if (bracketed) host = host.substr(1, host.size() - 2);
      if (host.empty()) {
        b.ignore(e, "no host before the port");
        continue;
      }
    }
    if (b.cidr(host, port)) continue;
    HostPattern::Kind kind = HostPattern::Kind::Domain;
    if (host.starts_with("*.")) host.remove_prefix(1);
    if (host.starts_with(".")) {
      kind = HostPattern::Kind::Subdomains;
      host.remove_prefix(1);
    }
    b.name(e, host, kind, port);
  }
  // Go's ProxyFunc never proxies these, whatever NO_PROXY says.
  b.name("localhost", "localhost", HostPattern::Kind::Exact, 0);
  b.cidr("127.0.0.0/8", 0);
  b.cidr("::1", 0);
}

void parsePython(std::string_view list, Builder& b) {
  if (list == "*") return b.any();
  for (std::string_view e : entries(list, /*blanks_separate=*/false)) {
    std::string_view t = e;
    while (!t.empty() && t.front() == '.') t.remove_prefix(1);
    if (t.empty()) continue;
    if (t.find('/') != std::string_view::npos) {
      std::string error;
      const std::optional<CidrRange> r = parseCidr(t, false, &error);
      if (!r)
        b.ignore(e, "not a CIDR range");
      else if (r->base.v6)
        b.ignore(e, "requests matches CIDR ranges for IPv4 only");
      else
        b.cidr(t, 0);
      continue;
    }
    if (b.cidr(t, 0)) continue;
    if (t.find('*') != std::string_view::npos) {
      b.ignore(e, "Python has no wildcards in NO_PROXY but a lone '*' as the whole list");
      continue;
    }
    uint16_t port = 0;
    if (const std::size_t colon = t.find(':'); colon != std::string_view::npos) {
      port = portOf(t.substr(colon + 1));
      if (port == 0 || t.find(':', colon + 1) != std::string_view::npos) {
        b.ignore(e, "not host:port");
        continue;
      }
      t = t.substr(0, colon);
      if (b.cidr(t, port)) continue;
    }
    b.name(e, t, HostPattern::Kind::Domain, port);
  }
}

}  // namespace

std::optional<NoProxyMode> parseNoProxyMode(std::string_view name) {
  if (name == "curl") return NoProxyMode::Curl;
  if (name == "go") return NoProxyMode::Go;
  if (name == "python") return NoProxyMode::Python;
  return std::nullopt;
}

const char* noProxyModeName(NoProxyMode mode) {
  switch (mode) {
    case NoProxyMode::Curl:
      return "curl";
    case NoProxyMode::Go:
      return "go";
    case NoProxyMode::Python:
      return "python";
  }
  return "curl";
}

NoProxyList parseNoProxy(std::string_view list, NoProxyMode mode) {
  Builder b;
  switch (mode) {
    case NoProxyMode::Curl:
      parseCurl(list, b);
      break;
    case NoProxyMode::Go:
      parseGo(list, b);
      break;
    case NoProxyMode::Python:
      parsePython(list, b);
      break;
  }
  return b.take();
}

}  // namespace h2gate::match
