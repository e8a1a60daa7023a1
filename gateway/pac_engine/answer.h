// The answer of a PAC file's FindProxyForURL(url, host): an ordered list of
// where to send the request, e.g. "PROXY a.corp:8080; PROXY b.corp:8080; DIRECT".
//
// Grammar (what browsers accept, Chromium's ProxyList::SetFromPacString and
// Mozilla's nsProtocolProxyService being the references):
//   answer  = entry *( ";" entry )      empty entries (";;", a trailing ";") are ignored
//   entry   = *WSP keyword [ 1*WSP address ] *WSP
//   keyword = DIRECT | PROXY | HTTP | HTTPS | SOCKS | SOCKS4 | SOCKS5 | QUIC  (any case)
//   address = host [ ":" port ]         host: a DNS name or IPv4 literal, IPv6 in brackets
// PROXY (and HTTP, its alias) is a plain HTTP proxy, default port 80; HTTPS a
// TLS proxy, default port 443; DIRECT takes no address. SOCKS* and QUIC are
// proxies h2gate cannot talk to: they are skipped and reported as
// unsupported, so the next entry applies. Anything else in an entry (an
// unknown keyword, a missing or malformed address, a port out of range,
// stray tokens, control characters) skips that entry with a reason; the
// others still count.
//
// Pure functions, no allocation beyond the result; safe on any input (there
// is a fuzz target: tests/fuzz/pac_answer_fuzz.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace h2gate::pac {

struct ProxyEntry {
  enum class Kind { Direct, Proxy, Https };
  Kind kind = Kind::Direct;
  std::string host;  // lower case, IPv6 without brackets; empty for Direct
  uint16_t port = 0;
  bool operator==(const ProxyEntry&) const = default;
  // "DIRECT", "PROXY host:port", "HTTPS [2001:db8::1]:443" (parses back to itself).
  std::string str() const;
};

struct SkippedEntry {
  std::string text;    // the entry as written (trimmed, at most 200 bytes)
  std::string reason;  // "SOCKS proxies are not supported", "port 70000 is out of range"...
  // A well-formed entry of a kind h2gate does not support (SOCKS, QUIC), as
  // opposed to garbage.
  bool unsupported = false;
};

struct ProxyList {
  // In the PAC's order, duplicates removed (the first occurrence stays).
  std::vector<ProxyEntry> entries;
  // The first kMaxSkipped entries left out, in order.
  std::vector<SkippedEntry> skipped;
  // How many entries were left out in all (skipped.size() or more).
  std::size_t skipped_count = 0;
  // "PROXY a:8080; DIRECT" (entries only).
  std::string str() const;
};

// At most this many entries are kept (the rest count as skipped): a failover
// list longer than this is a broken PAC file, not a plan.
inline constexpr std::size_t kMaxEntries = 32;
inline constexpr std::size_t kMaxSkipped = 8;

ProxyList parseProxyList(std::string_view answer);

}  // namespace h2gate::pac
