#include "gateway/net/host_addresses.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>

namespace h2gate::net {

std::optional<asio::ip::address_v4> parseIpv4AnyNotation(const std::string& text) {
  // inet_aton() stops at white space and accepts what follows: only its
  // own characters are let through.
  if (text.empty() || !std::all_of(text.begin(), text.end(), [](char c) {
        return std::isxdigit(static_cast<unsigned char>(c)) || c == 'x' || c == 'X' || c == '.';
      }))
    return std::nullopt;
  in_addr a{};
  if (inet_aton(text.c_str(), &a) == 0) return std::nullopt;
  return asio::ip::address_v4(ntohl(a.s_addr));
}

std::vector<asio::ip::address> interfaceAddresses(Interfaces which) {
  std::vector<asio::ip::address> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (const ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    if (which == Interfaces::kUp && (i->ifa_flags & IFF_UP) == 0) continue;
    if (i->ifa_addr->sa_family == AF_INET) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      out.push_back(asio::ip::address_v4(ntohl(sin->sin_addr.s_addr)));
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      asio::ip::address_v6::bytes_type bytes;
      std::copy(sin6->sin6_addr.s6_addr, sin6->sin6_addr.s6_addr + 16, bytes.begin());
      out.push_back(asio::ip::address_v6(bytes));
    }
  }
  freeifaddrs(list);
  return out;
}

}  // namespace h2gate::net
