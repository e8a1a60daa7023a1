#include <winsock2.h>
#include <ws2tcpip.h>
// iphlpapi.h after winsock2.h: GetAdaptersAddresses.
#include <iphlpapi.h>

#include <algorithm>
#include <cstdint>
#include <memory>

#include "gateway/base/ascii.h"
#include "gateway/net/host_addresses.h"

namespace h2gate::net {

std::optional<asio::ip::address_v4> parseIpv4AnyNotation(const std::string& text) {
  // WinSock has no inet_aton; Windows' resolver reads the same notations
  // (inet_addr's): 1 to 4 parts, each decimal, octal (leading 0) or hex
  // (0x); the last part fills the remaining bytes.
  if (text.empty() || text.size() > 64) return std::nullopt;
  uint64_t parts[4];
  size_t n = 0;
  size_t i = 0;
  while (true) {
    if (n == 4 || i >= text.size()) return std::nullopt;
    unsigned base = 10;
    if (text[i] == '0' && i + 1 < text.size() && (text[i + 1] == 'x' || text[i + 1] == 'X')) {
      base = 16;
      i += 2;
    } else if (text[i] == '0') {
      base = 8;
    }
    const size_t start = i;
    uint64_t v = 0;
    for (; i < text.size() && text[i] != '.'; ++i) {
      const char c = lowerAscii(text[i]);
      unsigned d;
      if (c >= '0' && c <= '9')
        d = static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        d = static_cast<unsigned>(c - 'a' + 10);
      else
        return std::nullopt;
      if (d >= base) return std::nullopt;
      v = v * base + d;
      if (v > 0xffffffffull) return std::nullopt;
    }
    if (i == start && base != 8) return std::nullopt;  // "0x" or an empty part
    parts[n++] = v;
    if (i == text.size()) break;
    ++i;  // the dot
  }
  uint64_t value = 0;
  for (size_t k = 0; k + 1 < n; ++k) {
    if (parts[k] > 0xff) return std::nullopt;
    value |= parts[k] << (8 * (3 - k));
  }
  const uint64_t last_max = 0xffffffffull >> (8 * (n - 1));
  if (parts[n - 1] > last_max) return std::nullopt;
  value |= parts[n - 1];
  return asio::ip::address_v4(static_cast<uint32_t>(value));
}

std::vector<asio::ip::address> interfaceAddresses(Interfaces which) {
  std::vector<asio::ip::address> out;
  ULONG size = 16 * 1024;
  std::unique_ptr<char[]> buf;
  ULONG rc = ERROR_BUFFER_OVERFLOW;
  for (int attempt = 0; attempt < 3 && rc == ERROR_BUFFER_OVERFLOW; ++attempt) {
    buf = std::make_unique<char[]>(size);
    rc = ::GetAdaptersAddresses(
        AF_UNSPEC, GAA_FLAG_SKIP_ANYCAST | GAA_FLAG_SKIP_MULTICAST | GAA_FLAG_SKIP_DNS_SERVER,
        nullptr, reinterpret_cast<IP_ADAPTER_ADDRESSES*>(buf.get()), &size);
  }
  if (rc != NO_ERROR) return out;
  for (auto* a = reinterpret_cast<const IP_ADAPTER_ADDRESSES*>(buf.get()); a; a = a->Next) {
    if (which == Interfaces::kUp && a->OperStatus != IfOperStatusUp) continue;
    for (const IP_ADAPTER_UNICAST_ADDRESS* u = a->FirstUnicastAddress; u; u = u->Next) {
      const sockaddr* sa = u->Address.lpSockaddr;
      if (!sa) continue;
      if (sa->sa_family == AF_INET) {
        const auto* sin = reinterpret_cast<const sockaddr_in*>(sa);
        out.push_back(asio::ip::address_v4(ntohl(sin->sin_addr.s_addr)));
      } else if (sa->sa_family == AF_INET6) {
        const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(sa);
        asio::ip::address_v6::bytes_type bytes;
        std::copy(sin6->sin6_addr.s6_addr, sin6->sin6_addr.s6_addr + 16, bytes.begin());
        out.push_back(asio::ip::address_v6(bytes));
      }
    }
  }
  // Loopback is an interface on POSIX; GetAdaptersAddresses lists it too
  // on Windows, but not under every wine: make sure it is there.
  const asio::ip::address lo4 = asio::ip::address_v4::loopback();
  const asio::ip::address lo6 = asio::ip::address_v6::loopback();
  if (std::find(out.begin(), out.end(), lo4) == out.end()) out.push_back(lo4);
  if (std::find(out.begin(), out.end(), lo6) == out.end()) out.push_back(lo6);
  return out;
}

}  // namespace h2gate::net
