// Host names written in the config (route and ACL patterns, NO_PROXY
// entries) in the form the matchers compare (gateway/match/matcher.h), and the
// host of a request in the one form h2gate judges, sends on and connects to.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace h2gate::net {

// Lower case, one trailing dot removed, and internationalised names in
// their A-label form: "Bücher.Example." → "xn--bcher-kva.example" (IDNA2008
// with UTS #46 non-transitional mapping, libidn2 — what browsers and curl
// put on the wire, so the config may use either form). The result must be
// letters, digits, '-', '_' and dots between non-empty labels, at most 253
// characters. Returns nullopt and sets *error otherwise.
std::optional<std::string> normalizeHostName(std::string_view text, std::string* error);

// The WHATWG URL Standard's "ends in a number" test (host parsing, §3.5):
// the last label, one trailing dot aside, is decimal digits or 0x + hex
// digits. Such a host is an IPv4 address in some notation or invalid,
// never a name: "127.1", "0x7f.1", "2130706433", "1.2.3.256".
bool endsInNumber(std::string_view host);

// The host of a request target (`host` as split from a CONNECT authority
// or an absolute URL, without brackets; `bracketed` when it was written in
// brackets) in canonical form, as a browser's URL parser (WHATWG URL
// Standard) leaves it:
//   - a host that ends in a number is an IPv4 address in any notation the
//     standard (and inet_aton(3), which getaddrinfo uses) accepts: 1 to 4
//     parts, each decimal, octal (leading 0) or hex (0x); "127.1",
//     "0x7f000001", "0177.0.0.01", "127.0.0.1." are all "127.0.0.1";
//     "1.2.3.256" is an error.
//   - a bracketed host is an IPv6 address, written as inet_ntop(3) writes
//     it ("[0:0::1]" is "::1"); IPv4-mapped and IPv4-compatible addresses
//     are their IPv4 address ("[::ffff:7f00:1]" is "127.0.0.1"). A zone
//     ("%eth0") is kept as written.
//   - anything else is a name, returned unchanged.
// The unspecified address (0.0.0.0/8, ::) is an error: it is not a
// destination (connecting to it reaches this host). Returns nullopt and
// sets *error, a sentence for the app's 400.
std::optional<std::string> canonicalRequestHost(std::string_view host, bool bracketed,
                                                std::string* error);

}  // namespace h2gate::net
