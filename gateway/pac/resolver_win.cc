// SystemResolver::localAddresses on Windows: the source address of the
// default routes (a UDP "connect", nothing sent), else the unicast addresses
// of the adapters that are up (GetAdaptersAddresses), loopback and
// link-local left out: what myIpAddress() answers in Chromium.
#include <winsock2.h>
#include <ws2tcpip.h>

#include <iphlpapi.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "gateway/pac/resolver.h"

namespace h2gate::pac {
namespace {

bool usable(const filters::IpAddress& ip) {
  const uint8_t* b = ip.bytes.data();
  if (!ip.v6) return !(b[0] == 127 || b[0] == 0 || (b[0] == 169 && b[1] == 254));
  static const uint8_t kZero[16] = {};
  if (std::memcmp(b, kZero, 15) == 0 && (b[15] == 0 || b[15] == 1)) return false;
  return !(b[0] == 0xfe && (b[1] & 0xc0) == 0x80);
}

bool fromSockaddr(const sockaddr* sa, filters::IpAddress& ip) {
  if (sa->sa_family == AF_INET) {
    std::memcpy(ip.bytes.data(), &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    ip.v6 = true;
    std::memcpy(ip.bytes.data(), &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, 16);
    return true;
  }
  return false;
}

std::optional<filters::IpAddress> routeSource(const char* dest, bool v6) {
  SOCKET s = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM, IPPROTO_UDP);
  if (s == INVALID_SOCKET) return std::nullopt;
  sockaddr_storage ss{};
  int len = 0;
  if (v6) {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(53);
    inet_pton(AF_INET6, dest, &sin6->sin6_addr);
    len = sizeof(sockaddr_in6);
  } else {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(53);
    inet_pton(AF_INET, dest, &sin->sin_addr);
    len = sizeof(sockaddr_in);
  }
  std::optional<filters::IpAddress> out;
  if (connect(s, reinterpret_cast<sockaddr*>(&ss), len) == 0) {
    sockaddr_storage local{};
    int local_len = sizeof local;
    filters::IpAddress ip;
    if (getsockname(s, reinterpret_cast<sockaddr*>(&local), &local_len) == 0 &&
        fromSockaddr(reinterpret_cast<sockaddr*>(&local), ip) && usable(ip))
      out = ip;
  }
  closesocket(s);
  return out;
}

void addUnique(std::vector<filters::IpAddress>& out, const filters::IpAddress& ip) {
  if (std::find(out.begin(), out.end(), ip) == out.end()) out.push_back(ip);
}

}  // namespace

std::vector<filters::IpAddress> platformLocalAddresses() {
  std::vector<filters::IpAddress> out;
  for (const char* dest : {"8.8.8.8", "10.0.0.0", "172.16.0.0", "192.168.0.0"}) {
    if (auto ip = routeSource(dest, false)) {
      addUnique(out, *ip);
      break;
    }
  }
  if (auto ip = routeSource("2001:4860:4860::8888", true)) addUnique(out, *ip);
  if (!out.empty()) return out;

  ULONG size = 16 * 1024;
  std::vector<unsigned char> buf;
  ULONG rc = ERROR_BUFFER_OVERFLOW;
  for (int tries = 0; tries < 3 && rc == ERROR_BUFFER_OVERFLOW; ++tries) {
    buf.resize(size);
    rc = GetAdaptersAddresses(
        AF_UNSPEC, GAA_FLAG_SKIP_ANYCAST | GAA_FLAG_SKIP_MULTICAST | GAA_FLAG_SKIP_DNS_SERVER,
        nullptr, reinterpret_cast<IP_ADAPTER_ADDRESSES*>(buf.data()), &size);
  }
  if (rc != NO_ERROR) return out;
  for (auto* a = reinterpret_cast<IP_ADAPTER_ADDRESSES*>(buf.data()); a != nullptr; a = a->Next) {
    if (a->OperStatus != IfOperStatusUp || a->IfType == IF_TYPE_SOFTWARE_LOOPBACK) continue;
    for (auto* u = a->FirstUnicastAddress; u != nullptr; u = u->Next) {
      filters::IpAddress ip;
      if (fromSockaddr(u->Address.lpSockaddr, ip) && usable(ip)) addUnique(out, ip);
    }
  }
  std::stable_partition(out.begin(), out.end(),
                        [](const filters::IpAddress& ip) { return !ip.v6; });
  return out;
}

}  // namespace h2gate::pac
