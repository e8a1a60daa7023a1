// Addresses of this machine, and IPv4 in the notations the system's
// resolver reads: what a connect() would reach. Platform code in
// host_addresses_posix.cc and host_addresses_win.cc; routeSourceAddress,
// which Asio makes portable, in host_addresses.cc.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <asio/ip/address.hpp>

#include "gateway/net/ip_address.h"

namespace h2gate::net {

// IPv4 in any notation inet_aton(3) (and so getaddrinfo) reads: 1 to 4
// parts, each decimal, octal (leading 0) or hex (0x): "127.1",
// "0x7f000001", "0177.0.0.1", "2130706433". nullopt for anything else,
// trailing text included.
std::optional<asio::ip::address_v4> parseIpv4AnyNotation(const std::string& text);

enum class Interfaces {
  kAll,  // every interface, up or down
  kUp,   // those that are up (POSIX IFF_UP; Windows IfOperStatusUp)
};

// The addresses of the machine's network interfaces, IPv4 and IPv6
// (loopback included); empty when they cannot be read.
std::vector<asio::ip::address> interfaceAddresses(Interfaces which = Interfaces::kAll);

// `a` as the IpAddress h2gate's rules compare (IPv4 stays IPv4).
IpAddress toIpAddress(const asio::ip::address& a);

// The local address the system would send from to reach `destination`: the
// source address of its route (a UDP socket's connect(), which only routes:
// nothing is sent). nullopt when there is no route.
std::optional<asio::ip::address> routeSourceAddress(const asio::ip::address& destination);

}  // namespace h2gate::net
