// Proxy-Authenticate parsing (RFC 9110 §11.6.1 and §11.3):
//
//   Proxy-Authenticate = #challenge
//   challenge   = auth-scheme [ 1*SP ( token68 / #auth-param ) ]
//   auth-param  = token BWS "=" BWS ( token / quoted-string )
//   token68     = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
//
// A proxy may send several Proxy-Authenticate lines and several challenges
// on one line ("Negotiate, NTLM, Basic realm=\"corp\""); auth-params and
// challenges are both separated by commas, so after a comma a
// `token BWS "=" BWS value` continues the current challenge's parameters and
// anything else starts a new challenge. Portable: no platform or OpenSSL
// code, so the Windows build and the fuzz target use it as it is.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gateway/base/http_types.h"

namespace h2gate::upstream::auth {

struct Challenge {
  std::string scheme;   // as sent; compare case-insensitively
  std::string token68;  // e.g. an NTLM challenge or a Negotiate token; may be empty
  // auth-params in order, names as sent, quoted-string values unescaped.
  std::vector<std::pair<std::string, std::string>> params;

  // The value of the first param named `name` (case-insensitive), or nullptr.
  const std::string* param(std::string_view name) const;
  bool operator==(const Challenge&) const = default;
};

// Parses one header value, appending its challenges to `out`. Returns false
// at the first syntax error; the challenges before it are kept (a proxy's
// one malformed challenge must not hide the good ones before it).
bool parseChallenges(std::string_view value, std::vector<Challenge>* out);

// Every challenge of every header named `header_name` (Proxy-Authenticate
// by default), in order. Malformed remainders of a line are dropped.
std::vector<Challenge> challengesOf(const Headers& headers,
                                    std::string_view header_name = "proxy-authenticate");

// The first challenge whose scheme is `scheme` (case-insensitive), or nullptr.
const Challenge* findChallenge(const std::vector<Challenge>& challenges, std::string_view scheme);

}  // namespace h2gate::upstream::auth
