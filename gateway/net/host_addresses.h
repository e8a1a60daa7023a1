// Addresses of this machine, and IPv4 in the notations the system's
// resolver reads: what a connect() would reach. Platform code in
// host_addresses_posix.cc.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <asio/ip/address.hpp>

namespace h2gate::net {

// IPv4 in any notation inet_aton(3) (and so getaddrinfo) reads: 1 to 4
// parts, each decimal, octal (leading 0) or hex (0x): "127.1",
// "0x7f000001", "0177.0.0.1", "2130706433". nullopt for anything else,
// trailing text included.
std::optional<asio::ip::address_v4> parseIpv4AnyNotation(const std::string& text);

// The addresses of the machine's network interfaces, IPv4 and IPv6
// (loopback included); empty when they cannot be read.
std::vector<asio::ip::address> interfaceAddresses();

}  // namespace h2gate::net
