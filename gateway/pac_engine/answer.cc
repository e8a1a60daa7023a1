#include "gateway/pac_engine/answer.h"

#include <algorithm>
#include <charconv>

#include "gateway/base/ascii.h"
#include "gateway/net/ip_address.h"

namespace h2gate::pac {
namespace {

constexpr std::size_t kMaxQuoted = 200;

// Printable ASCII for logs: anything else becomes '?'.
std::string printable(std::string_view s) {
  std::string out(s.substr(0, kMaxQuoted));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7F) c = '?';
  if (s.size() > kMaxQuoted) out += "...";
  return out;
}

bool nameChar(char c) {
  return isAsciiAlnum(c) || c == '-' || c == '_' || c == '.';
}

// A DNS name or IPv4 literal: [A-Za-z0-9_-] labels between single dots, one
// trailing dot allowed, at most 253 characters.
bool validName(std::string_view host) {
  if (host.empty() || host.size() > 254) return false;
  if (host.back() == '.') host.remove_suffix(1);
  if (host.empty() || host.size() > 253 || host.front() == '.') return false;
  char prev = 0;
  for (char c : host) {
    if (!nameChar(c) || (c == '.' && prev == '.')) return false;
    prev = c;
  }
  return true;
}

// Reads "host[:port]" into e.host/e.port. Returns "" or why not.
std::string parseAddress(std::string_view addr, uint16_t default_port, ProxyEntry& e) {
  std::string_view host;
  std::string_view rest;
  if (addr.find("://") != std::string_view::npos)
    return "'" + printable(addr) + "' is a URL, not host:port";
  if (addr.front() == '[') {
    const std::size_t close = addr.find(']');
    if (close == std::string_view::npos) return "unclosed '[' in the address";
    host = addr.substr(1, close - 1);
    rest = addr.substr(close + 1);
    const std::optional<net::IpAddress> ip = net::parseIp(host);
    if (!ip || !ip->v6 || host.find('%') != std::string_view::npos)
      return "'" + printable(host) + "' in brackets is not an IPv6 address";
    e.host = ip->str();
    if (!rest.empty() && rest.front() != ':') return "unexpected text after ']'";
  } else {
    const std::size_t colon = addr.find(':');
    if (colon != std::string_view::npos && addr.find(':', colon + 1) != std::string_view::npos)
      return "an IPv6 address needs brackets ([2001:db8::1]:8080)";
    host = addr.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view() : addr.substr(colon);
    if (!validName(host)) return "'" + printable(host) + "' is not a host name or address";
    e.host.assign(host);
    lowerAsciiInPlace(e.host);
  }
  e.port = default_port;
  if (rest.empty()) return {};
  const std::string_view digits = rest.substr(1);
  if (digits.empty()) return "empty port after ':'";
  if (digits.size() > 5 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return "port '" + printable(digits) + "' is not a number";
  unsigned port = 0;
  for (char c : digits) port = port * 10 + static_cast<unsigned>(c - '0');
  if (port == 0 || port > 65535) return "port " + std::string(digits) + " is out of range";
  e.port = static_cast<uint16_t>(port);
  return {};
}

struct Keyword {
  const char* name;
  enum { Direct, Proxy, Https, Unsupported } what;
};
constexpr Keyword kKeywords[] = {
    {"DIRECT", Keyword::Direct},      {"PROXY", Keyword::Proxy},
    {"HTTP", Keyword::Proxy},         {"HTTPS", Keyword::Https},
    {"SOCKS", Keyword::Unsupported},  {"SOCKS4", Keyword::Unsupported},
    {"SOCKS5", Keyword::Unsupported}, {"QUIC", Keyword::Unsupported},
};

// One trimmed, non-empty entry: fills `e` and returns true, or fills `skip`.
bool parseEntry(std::string_view text, ProxyEntry& e, SkippedEntry& skip) {
  skip.text = printable(text);
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 && !isAsciiSpace(c)) {
      skip.reason = "control character in the entry";
      return false;
    }
  }
  std::size_t end = 0;
  while (end < text.size() && !isAsciiSpace(text[end])) ++end;
  const std::string_view word = text.substr(0, end);
  const std::string_view addr = trim(text.substr(end));
  const Keyword* kw = nullptr;
  for (const Keyword& k : kKeywords)
    if (iequals(word, k.name)) kw = &k;
  if (kw == nullptr) {
    skip.reason = "unknown keyword '" + printable(word) +
                  "' (expected DIRECT, PROXY host:port or HTTPS host:port)";
    return false;
  }
  if (kw->what == Keyword::Unsupported) {
    skip.reason = toUpperAscii(word) + " proxies are not supported by h2gate";
    skip.unsupported = true;
    return false;
  }
  if (kw->what == Keyword::Direct) {
    if (!addr.empty()) {
      skip.reason = "DIRECT takes no address";
      return false;
    }
    e = ProxyEntry{};
    return true;
  }
  if (addr.empty()) {
    skip.reason = std::string(kw->what == Keyword::Https ? "HTTPS" : "PROXY") + " needs host:port";
    return false;
  }
  if (std::any_of(addr.begin(), addr.end(), isAsciiSpace)) {
    skip.reason = "more than one address in the entry";
    return false;
  }
  e = ProxyEntry{};
  e.kind = kw->what == Keyword::Https ? ProxyEntry::Kind::Https : ProxyEntry::Kind::Proxy;
  const std::string why = parseAddress(addr, kw->what == Keyword::Https ? 443 : 80, e);
  if (!why.empty()) {
    skip.reason = why;
    return false;
  }
  return true;
}

}  // namespace

std::string ProxyEntry::str() const {
  if (kind == Kind::Direct) return "DIRECT";
  // Built in one allocation: a PAC route makes one per request.
  const bool v6 = host.find(':') != std::string::npos;
  char digits[8];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, port);
  std::string out;
  out.reserve(6 + host.size() + 2 + 1 + static_cast<std::size_t>(end - digits));
  out += kind == Kind::Https ? "HTTPS " : "PROXY ";
  if (v6) out += '[';
  out += host;
  if (v6) out += ']';
  out += ':';
  out.append(digits, end);
  return out;
}

std::string ProxyList::str() const {
  std::string out;
  for (const ProxyEntry& e : entries) {
    if (!out.empty()) out += "; ";
    out += e.str();
  }
  return out;
}

ProxyList parseProxyList(std::string_view answer) {
  ProxyList out;
  auto skip = [&out](SkippedEntry s) {
    if (out.skipped.size() < kMaxSkipped) out.skipped.push_back(std::move(s));
    ++out.skipped_count;
  };
  while (true) {
    const std::size_t semi = answer.find(';');
    const std::string_view text = trim(answer.substr(0, semi));
    if (!text.empty()) {
      ProxyEntry e;
      SkippedEntry s;
      if (!parseEntry(text, e, s)) {
        skip(std::move(s));
      } else if (std::find(out.entries.begin(), out.entries.end(), e) != out.entries.end()) {
        // A repeat adds nothing to a failover list.
      } else if (out.entries.size() >= kMaxEntries) {
        skip({printable(text), "more than " + std::to_string(kMaxEntries) + " entries", false});
      } else {
        out.entries.push_back(std::move(e));
      }
    }
    if (semi == std::string_view::npos) break;
    answer.remove_prefix(semi + 1);
  }
  return out;
}

}  // namespace h2gate::pac
