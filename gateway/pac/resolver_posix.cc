// SystemResolver::localAddresses on POSIX: which address this machine would
// use, as browsers answer myIpAddress() (Chromium's order: the default
// route's source address first, the interfaces' addresses after).
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "gateway/pac/resolver.h"

namespace h2gate::pac {
namespace {

bool usable(const filters::IpAddress& ip) {
  if (!ip.v6) {
    const uint8_t* b = ip.bytes.data();
    if (b[0] == 127 || b[0] == 0) return false;    // loopback, "this network"
    if (b[0] == 169 && b[1] == 254) return false;  // link-local
    return true;
  }
  static const uint8_t kZero[16] = {};
  const uint8_t* b = ip.bytes.data();
  if (std::memcmp(b, kZero, 15) == 0 && (b[15] == 0 || b[15] == 1)) return false;  // ::, ::1
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return false;                         // fe80::/10
  return true;
}

// The source address the kernel picks for a UDP "connection" to `dest`
// (nothing is sent: connect() on a datagram socket only routes).
std::optional<filters::IpAddress> routeSource(const char* dest, bool v6) {
  const int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  sockaddr_storage ss{};
  socklen_t len = 0;
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
  if (connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0) {
    sockaddr_storage local{};
    socklen_t local_len = sizeof local;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0) {
      filters::IpAddress ip;
      if (local.ss_family == AF_INET) {
        std::memcpy(ip.bytes.data(), &reinterpret_cast<sockaddr_in*>(&local)->sin_addr, 4);
        out = ip;
      } else if (local.ss_family == AF_INET6) {
        ip.v6 = true;
        std::memcpy(ip.bytes.data(), &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr, 16);
        out = ip;
      }
    }
  }
  close(fd);
  if (out && !usable(*out)) out.reset();
  return out;
}

void addUnique(std::vector<filters::IpAddress>& out, const filters::IpAddress& ip) {
  for (const filters::IpAddress& o : out)
    if (o == ip) return;
  out.push_back(ip);
}

}  // namespace

std::vector<filters::IpAddress> platformLocalAddresses() {
  std::vector<filters::IpAddress> out;
  // Public resolvers' addresses only pick the route; private ranges cover
  // networks without a default route.
  for (const char* dest : {"8.8.8.8", "10.0.0.0", "172.16.0.0", "192.168.0.0"}) {
    if (auto ip = routeSource(dest, false)) {
      addUnique(out, *ip);
      break;
    }
  }
  if (auto ip = routeSource("2001:4860:4860::8888", true)) addUnique(out, *ip);
  if (!out.empty()) return out;

  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || (ifa->ifa_flags & IFF_UP) == 0 ||
        (ifa->ifa_flags & IFF_LOOPBACK) != 0)
      continue;
    filters::IpAddress ip;
    if (ifa->ifa_addr->sa_family == AF_INET) {
      std::memcpy(ip.bytes.data(), &reinterpret_cast<const sockaddr_in*>(ifa->ifa_addr)->sin_addr,
                  4);
    } else if (ifa->ifa_addr->sa_family == AF_INET6) {
      ip.v6 = true;
      std::memcpy(ip.bytes.data(), &reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr)->sin6_addr,
                  16);
    } else {
      continue;
    }
    if (usable(ip)) addUnique(out, ip);
  }
  freeifaddrs(list);
  // IPv4 first: myIpAddress() answers with the first IPv4 address.
  std::stable_partition(out.begin(), out.end(),
                        [](const filters::IpAddress& ip) { return !ip.v6; });
  return out;
}

}  // namespace h2gate::pac
