// Internationalised domain names: a UTF-8 host name (U-labels) to its
// A-label form ("bücher.example" -> "xn--bcher-kva.example"), lower-cased.
// libidn2 (IDNA2008, non-transitional) in idn_posix.cc; on Windows the
// system's IdnToAscii (idn_win.cc).
#pragma once

#include <optional>
#include <string>

namespace h2gate::net {

// nullopt with `*error` set (naming the input) when the name cannot be
// converted (disallowed code points, bad bidi, not UTF-8).
std::optional<std::string> idnToAscii(const std::string& utf8, std::string* error);

}  // namespace h2gate::net
