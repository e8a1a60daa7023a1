// h2gate's own addresses, and the built-in filter that keeps apps from
// reaching them through the proxy (config: a listener's deny_own_addresses,
// on by default).
//
// Through a proxy listener, "CONNECT 127.0.0.1:9901" or "GET
// http://127.0.0.1:9901/reload" would carry an app, or a web page whose
// browser uses h2gate, to the admin endpoint, past its Host and Origin
// checks (gateway/server/admin.h); a request to a proxy listener's own address
// loops back into h2gate, each turn taking another connection. Both get
// 403 with the reason.
//
// A destination is compared as the operating system would connect to it:
// IPv4 in every form inet_aton() reads (127.1, 0x7f.0.0.1, 0177.0.0.1,
// 2130706433), IPv6 (IPv4-mapped and -compatible addresses as IPv4),
// 0.0.0.0 and :: (which connect to the local host), "localhost" and names
// under .localhost (RFC 6761: loopback), with or without a trailing dot.
// (The request parser already canonicalises numeric hosts and refuses the
// unspecified address; this filter does not rely on it.) Other names are
// not resolved here; in direct mode the addresses they resolve to are
// judged too (checkAddress).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <asio/ip/tcp.hpp>

#include "filters/filter.h"
#include "gateway/net/ip_address.h"

namespace h2gate {

class OwnAddresses {
 public:
  struct Socket {
    asio::ip::tcp::endpoint endpoint;  // as bound; the address may be unspecified
    std::string what;                  // "admin endpoint", "listener 'local_proxy'"
    bool admin = false;
    bool dual_stack = false;  // an unspecified IPv6 address that takes IPv4 too
  };

  void add(Socket socket);
  // The machine's interface addresses, which reach a socket bound to
  // 0.0.0.0 or ::. Read once (net::interfaceAddresses), when a context is
  // built.
  void addInterfaceAddresses();
  bool hasWildcard() const;

  // The own socket that a connection to host:port would reach, or nullptr.
  // `host` as the request parser left it (no brackets).
  const Socket* find(std::string_view host, uint16_t port) const;
  // The same for an address (IPv4-mapped IPv6 taken as IPv4).
  const Socket* find(const asio::ip::address& address, uint16_t port) const;

  // The addresses the system would connect to for `host` (see above):
  // empty when it is a name other than localhost.
  static std::vector<asio::ip::address> destinationAddresses(std::string_view host);

 private:
  bool reaches(const Socket& s, const asio::ip::address& dest) const;
  std::vector<Socket> sockets_;
  std::vector<asio::ip::address> interfaces_;
};

// Rejects, with 403 and the reason, requests and tunnels to an own socket:
// by the destination as written (onRequestHead) and, in direct mode, by
// every address its name resolved to (checkAddress: a name rebound to
// 127.0.0.1). Put by the server just before the terminal forward_proxy
// filter of every listener whose deny_own_addresses is on.
class OwnAddressFilter : public filters::Filter {
 public:
  OwnAddressFilter(std::shared_ptr<const OwnAddresses> own, std::string listener);
  filters::FilterStatus onRequestHead(const RequestHead& head, StreamInfo& info) const override;
  std::optional<Refusal> checkAddress(const RequestHead& head, const StreamInfo& info,
                                      const net::IpAddress& address) const override;

 private:
  std::string reason(const RequestHead& head, const std::string& resolved,
                     const OwnAddresses::Socket& s) const;
  std::shared_ptr<const OwnAddresses> own_;
  std::string listener_;
};

}  // namespace h2gate
