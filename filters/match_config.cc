#include "filters/match_config.h"

#include "gateway/match/no_proxy.h"
#include "gateway/net/host_name.h"

namespace h2gate::filters {
namespace {

// The scalar of a list item, ${ENV} expanded; records an error otherwise.
std::optional<std::string> itemText(config::NodeReader& item) {
  if (!item.node().IsScalar() || item.node().Scalar().empty()) {
    item.error("expected a non-empty string");
    return std::nullopt;
  }
  std::string missing;
  std::optional<std::string> text = config::expandEnv(item.node().Scalar(), &missing);
  if (!text) item.error("environment variable " + missing + " is not set");
  return text;
}

void addName(config::NodeReader& item, std::string_view text, match::HostPattern::Kind kind,
             match::DestinationSet& out) {
  std::string error;
  std::optional<std::string> name = net::normalizeHostName(text, &error);
  if (!name) return item.error(error);
  match::HostPattern p;
  p.kind = kind;
  p.name = std::move(*name);
  out.add(std::move(p));
}

void addCidr(config::NodeReader& item, std::string_view text, match::DestinationSet& out) {
  std::string error;
  std::optional<net::CidrRange> range = net::parseCidr(text, /*strict=*/true, &error);
  if (!range) return item.error("bad CIDR range: " + error);
  match::HostPattern p;
  p.kind = match::HostPattern::Kind::Cidr;
  p.cidr = *range;
  out.add(std::move(p));
}

void parseHosts(config::NodeReader& r, match::DestinationSet& out) {
  for (config::NodeReader& item : r.list("hosts")) {
    const std::optional<std::string> text = itemText(item);
    if (!text) continue;
    const std::string_view t = *text;
    if (t == "*") {
      match::HostPattern p;
      p.kind = match::HostPattern::Kind::Any;
      out.add(std::move(p));
    } else if (net::parseIp(t)) {
      addCidr(item, t, out);  // an address: itself (/32, /128)
    } else if (net::endsInNumber(t)) {
      // Requests carry such hosts as canonical IPv4 addresses: as a name
      // this entry could never match.
      std::string error;
      const std::optional<std::string> ip = net::canonicalRequestHost(t, false, &error);
      item.error(ip ? "'" + *text + "' is the IPv4 address " + *ip +
                          " in a non-standard notation; write " + *ip +
                          " (requests are compared in that form)"
                    : error);
    } else if (t.starts_with("*.")) {
      addName(item, t.substr(2), match::HostPattern::Kind::Subdomains, out);
    } else if (t.find('*') != std::string_view::npos) {
      item.error("'" + *text + "': the only wildcards are a leading '*.' and '*' alone");
    } else if (t.front() == '.') {
      item.error("'" + *text +
                 "': a leading dot is a domain suffix; put it under host_suffixes (it matches " +
                 std::string(t.substr(1)) + " and its subdomains) or write '*" + *text +
                 "' (subdomains only)");
    } else {
      addName(item, t, match::HostPattern::Kind::Exact, out);
    }
  }
}

void parseSuffixes(config::NodeReader& r, match::DestinationSet& out) {
  for (config::NodeReader& item : r.list("host_suffixes")) {
    const std::optional<std::string> text = itemText(item);
    if (!text) continue;
    std::string_view t = *text;
    if (t.front() == '.') t.remove_prefix(1);
    if (t.find('*') != std::string_view::npos || t.find('/') != std::string_view::npos ||
        net::parseIp(t) || net::endsInNumber(t)) {
      item.error("'" + *text +
                 "' is not a domain (host_suffixes takes names such as corp.example; addresses "
                 "and ranges go under cidrs, wildcards under hosts)");
      continue;
    }
    addName(item, t, match::HostPattern::Kind::Domain, out);
  }
}

// 443 or "8000-8999".
void parsePorts(config::NodeReader& r, std::vector<match::PortRange>& out) {
  for (config::NodeReader& item : r.list("ports")) {
    const std::optional<std::string> text = itemText(item);
    if (!text) continue;
    const std::string& t = *text;
    const std::size_t dash = t.find('-');
    auto number = [](std::string_view s) -> long {
      if (s.empty() || s.size() > 5) return -1;
      long v = 0;
      for (char c : s) {
        if (c < '0' || c > '9') return -1;
        v = v * 10 + (c - '0');
      }
      return v;
    };
    const long low = number(std::string_view(t).substr(0, dash));
    const long high =
        dash == std::string::npos ? low : number(std::string_view(t).substr(dash + 1));
    if (low < 0 || high < 0) {
      item.error("bad port '" + t + "': expected a port (443) or a range (8000-8999)");
    } else if (low < 1 || high > 65535) {
      item.error("bad port '" + t + "': ports are 1..65535");
    } else if (low > high) {
      item.error("bad port range '" + t + "': the first port is above the last");
    } else {
      out.push_back(match::PortRange{static_cast<uint16_t>(low), static_cast<uint16_t>(high)});
    }
  }
}

}  // namespace

std::optional<match::Match> parseMatch(config::NodeReader& r, std::vector<std::string>* ignored) {
  if (!r.expectMap()) return std::nullopt;
  const std::size_t before = r.diagnostics().problems().size();
  r.allowOnly({"hosts", "host_suffixes", "cidrs", "ports", "kind", "no_proxy", "no_proxy_mode"});
  match::Match m;
  parseHosts(r, m.destinations);
  parseSuffixes(r, m.destinations);
  for (config::NodeReader& item : r.list("cidrs")) {
    if (const std::optional<std::string> text = itemText(item))
      addCidr(item, *text, m.destinations);
  }
  parsePorts(r, m.ports);
  if (auto kind = r.choice("kind", {"connect", "absolute"}))
    m.kind = *kind == "connect" ? match::Match::Kind::Connect : match::Match::Kind::Absolute;

  match::NoProxyMode mode = match::NoProxyMode::Curl;
  if (auto name = r.choice("no_proxy_mode", {"curl", "go", "python"})) {
    mode = *match::parseNoProxyMode(*name);
    if (!r.has("no_proxy")) r.errorAt("no_proxy_mode", "applies only with no_proxy");
  }
  if (auto list = r.string("no_proxy")) {
    // An empty list (NO_PROXY unset or empty) bypasses nothing: the rule
    // then matches nothing, as for the apps.
    match::NoProxyList parsed = match::parseNoProxy(*list, mode);
    for (match::HostPattern& p : parsed.patterns) m.destinations.add(std::move(p));
    for (const std::string& why : parsed.ignored)
      ignored->push_back(r.path() + ".no_proxy: " + why + " (" + match::noProxyModeName(mode) +
                         " mode)");
  }
  m.has_destinations =
      r.has("hosts") || r.has("host_suffixes") || r.has("cidrs") || r.has("no_proxy");
  if (r.diagnostics().problems().size() != before) return std::nullopt;
  return m;
}

}  // namespace h2gate::filters
