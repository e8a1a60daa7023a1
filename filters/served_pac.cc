#include "filters/served_pac.h"

#include <algorithm>
#include <cstdio>

namespace h2gate::filters {
namespace {

// Helpers every file carries: the port from the URL, and IPv6 literals as
// eight 16-bit groups (null when not one) with a prefix test.
constexpr std::string_view kHelpers = R"JS(
function h2gatePort(url, scheme) {
  var rest = url.substring(url.indexOf("//") + 2);
  var end = rest.search(/[\/?#]/);
  var auth = end < 0 ? rest : rest.substring(0, end);
  auth = auth.substring(auth.lastIndexOf("@") + 1);
  var m = auth.match(/^(\[[^\]]*\]|[^:]*)(:(\d+))?$/);
  if (m && m[3]) return parseInt(m[3], 10);
  return scheme == "https" || scheme == "wss" ? 443 : scheme == "ftp" ? 21 : 80;
}

function h2gateGroups(s) {
  if (s == "") return [];
  var parts = s.split(":"), out = [];
  for (var i = 0; i < parts.length; i++) {
    var p = parts[i];
    if (i == parts.length - 1 && /^\d+\.\d+\.\d+\.\d+$/.test(p)) {
      var o = p.split(".");
      out.push(parseInt(o[0], 10) * 256 + parseInt(o[1], 10));
      out.push(parseInt(o[2], 10) * 256 + parseInt(o[3], 10));
    } else if (/^[0-9a-f]{1,4}$/.test(p)) {
      out.push(parseInt(p, 16));
    } else {
      return null;
    }
  }
  return out;
}

function h2gateV6(h) {
  if (h.indexOf(":") < 0) return null;
  var zone = h.indexOf("%");
  if (zone >= 0) h = h.substring(0, zone);
  var halves = h.split("::");
  if (halves.length > 2) return null;
  var head = h2gateGroups(halves[0]);
  var tail = halves.length == 2 ? h2gateGroups(halves[1]) : [];
  if (head == null || tail == null) return null;
  var missing = 8 - head.length - tail.length;
  if (halves.length == 1 ? missing != 0 : missing < 1) return null;
  for (var i = 0; i < missing; i++) head.push(0);
  return head.concat(tail);
}

function h2gateInNet6(a, base, bits) {
  for (var i = 0; i < 8 && bits > 0; i++, bits -= 16) {
    var mask = bits >= 16 ? 0xffff : (0xffff << (16 - bits)) & 0xffff;
    if ((a[i] & mask) != base[i]) return false;
  }
  return true;
}

function FindProxyForURL(url, host) {
  host = host.toLowerCase();
  if (host.charAt(0) == "[") host = host.substring(1, host.length - 1);
  if (host.charAt(host.length - 1) == ".") host = host.substring(0, host.length - 1);
  var scheme = url.substring(0, url.indexOf(":")).toLowerCase();
  var absolute = scheme == "http";
  var port = h2gatePort(url, scheme);
  var v4 = /^\d+\.\d+\.\d+\.\d+$/.test(host);
  var v6 = v4 ? null : h2gateV6(host);
  var ip = v4 || v6 != null;
)JS";

std::string jsString(std::string_view s) {
  // Names are [a-z0-9._-] (normalizeHostName); nothing to escape.
  return "\"" + std::string(s) + "\"";
}

std::string comment(std::string_view text) {
  std::string out(text);
  std::replace_if(
      out.begin(), out.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }, ' ');
  return "  // " + out + "\n";
}

std::string maskOf(unsigned prefix) {
  const uint32_t mask = prefix == 0 ? 0 : 0xFFFFFFFFu << (32 - prefix);
  char buf[20];
  std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", (mask >> 24) & 0xFF, (mask >> 16) & 0xFF,
                (mask >> 8) & 0xFF, mask & 0xFF);
  return buf;
}

std::string cidrCondition(const net::CidrRange& c) {
  if (!c.base.v6)
    return "(v4 && isInNet(host, " + jsString(c.base.str()) + ", " + jsString(maskOf(c.prefix)) +
           "))";
  std::string groups;
  for (std::size_t i = 0; i < 16; i += 2) {
    groups += groups.empty() ? "" : ", ";
    groups += std::to_string(c.base.bytes[i] * 256 + c.base.bytes[i + 1]);
  }
  return "(v6 != null && h2gateInNet6(v6, [" + groups + "], " + std::to_string(c.prefix) + "))";
}

std::string patternCondition(const match::HostPattern& p) {
  std::string cond;
  switch (p.kind) {
    case match::HostPattern::Kind::Exact:
      cond = "(!ip && host == " + jsString(p.name) + ")";
      break;
    case match::HostPattern::Kind::Domain:
      cond = "(!ip && (host == " + jsString(p.name) + " || dnsDomainIs(host, " +
             jsString("." + p.name) + ")))";
      break;
    case match::HostPattern::Kind::Subdomains:
      cond = "(!ip && dnsDomainIs(host, " + jsString("." + p.name) + "))";
      break;
    case match::HostPattern::Kind::Any:
      cond = "true";
      break;
    case match::HostPattern::Kind::Cidr:
      cond = cidrCondition(p.cidr);
      break;
  }
  if (p.port != 0) cond = "(" + cond + " && port == " + std::to_string(p.port) + ")";
  return cond;
}

std::string joined(const std::vector<std::string>& parts, std::string_view op,
                   std::string_view empty) {
  if (parts.empty()) return std::string(empty);
  if (parts.size() == 1) return parts.front();
  std::string out = "(";
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += std::string(" ") + std::string(op) + "\n      ";
    out += parts[i];
  }
  return out + ")";
}

}  // namespace

std::string pacCondition(const match::Match& m) {
  std::vector<std::string> all;
  if (m.kind == match::Match::Kind::Connect) all.push_back("!absolute");
  if (m.kind == match::Match::Kind::Absolute) all.push_back("absolute");
  if (!m.ports.empty()) {
    std::vector<std::string> ports;
    for (const match::PortRange& r : m.ports)
      ports.push_back(r.low == r.high ? "port == " + std::to_string(r.low)
                                      : "(port >= " + std::to_string(r.low) +
                                            " && port <= " + std::to_string(r.high) + ")");
    all.push_back(joined(ports, "||", "false"));
  }
  if (m.has_destinations) {
    std::vector<std::string> dests;
    for (const match::HostPattern& p : m.destinations.patterns())
      dests.push_back(patternCondition(p));
    all.push_back(joined(dests, "||", "false"));
  }
  return joined(all, "&&", "true");
}

void PacBuilder::add(const match::Match& m, Action action, std::string_view what) {
  statements_.push_back(comment(what) + "  if (" + pacCondition(m) + ")\n    return " +
                        (action == Action::Direct ? "DIRECT" : "PROXY") + ";\n");
}

void PacBuilder::addUnlessAny(const std::vector<const match::Match*>& ms, Action action,
                              std::string_view what) {
  std::vector<std::string> conds;
  for (const match::Match* m : ms) conds.push_back(pacCondition(*m));
  statements_.push_back(comment(what) + "  if (!(" + joined(conds, "||", "false") +
                        "))\n    return " + (action == Action::Direct ? "DIRECT" : "PROXY") +
                        ";\n");
}

void PacBuilder::setDefault(Action action, std::string_view what) {
  default_ = action;
  default_comment_ = what;
}

std::string PacBuilder::build(const std::string& proxy) const {
  const std::string address = options_.proxy.empty() ? proxy : options_.proxy;
  std::string out =
      "// Proxy auto-config generated by h2gate from its routing configuration.\n"
      "// Rules in order, first match wins; DIRECT routes go DIRECT, everything else\n"
      "// through h2gate at " +
      address + ".\n";
  out += kHelpers;
  out += "  var PROXY = \"PROXY " + address + (options_.direct_fallback ? "; DIRECT" : "") +
         "\";\n  var DIRECT = \"DIRECT\";\n";
  for (const std::string& s : statements_) out += s;
  out += comment(default_comment_);
  out += std::string("  return ") + (default_ == Action::Direct ? "DIRECT" : "PROXY") + ";\n}\n";
  return out;
}

std::string pacProxyAddress(const std::string& address, uint16_t port) {
  std::string host = address;
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host == "::" || host == "::0") host = "::1";
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return host + ":" + std::to_string(port);
}

}  // namespace h2gate::filters
