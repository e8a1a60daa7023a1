// The textual form of IP addresses that h2gate accepts, checked the same way
// on every platform: IPv4 as exactly four decimal parts 0-255 without
// leading zeros ("127.0.0.1", not "127.1" or "0177.0.0.1"); IPv6 as hex
// groups of up to four digits, optionally ending in such an IPv4 part; no
// brackets, no zone. This is what glibc's inet_pton(3) takes; Windows'
// (and so asio's there) also takes shortened and octal IPv4 forms, which
// the config must refuse on Windows too.
#pragma once

#include <string_view>

namespace h2gate::config {

// False for text outside that form; true does not mean valid (the system
// parser still checks group counts and "::").
bool ipTextIsStrict(std::string_view text);

}  // namespace h2gate::config
