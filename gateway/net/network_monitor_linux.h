// rtnetlink messages -> what changed, for NetworkMonitor on Linux
// (network_monitor_linux.cc). Apart from the socket so unit tests can feed it
// hand-made messages.
//
// The tracker keeps what it knows (links and whether they are up,
// addresses, routes) and reports only differences: the kernel re-announces
// IPv6 addresses and routes on every router advertisement and wireless
// drivers send link messages for scans, none of which is a change. A dump
// (RTM_GETLINK/GETADDR/GETROUTE) fills it silently at start and after lost
// notifications.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace h2gate::net {

class NetlinkTracker {
 public:
  // One datagram from a NETLINK_ROUTE socket (any number of messages).
  // Returns the changes, one text each ("address 10.0.0.5/24 added on eth0",
  // "route default via 10.0.0.1 dev eth0 removed", "link eth0 down"). With
  // `learn_only` (dump replies) the state is updated and nothing returned.
  // Malformed or truncated messages are skipped.
  std::vector<std::string> feed(const void* data, size_t len, bool learn_only = false);
  void clear();

  // "if<N>" when the link is not known.
  std::string linkName(int index) const;
  size_t links() const { return links_.size(); }
  size_t addresses() const { return addrs_.size(); }
  size_t routes() const { return routes_.size(); }

 private:
  struct Link {
    std::string name;
    bool online = false;  // IFF_UP and IFF_RUNNING
  };
  void onLink(uint16_t type, const uint8_t* body, size_t len, bool learn,
              std::vector<std::string>& out);
  void onAddress(uint16_t type, const uint8_t* body, size_t len, bool learn,
                 std::vector<std::string>& out);
  void onRoute(uint16_t type, const uint8_t* body, size_t len, bool learn,
               std::vector<std::string>& out);
  // A link went away or down: the kernel drops its IPv4 routes without a
  // message, so forget them (and its addresses, when it went away).
  void forgetLink(int index, bool addresses);

  std::map<int, Link> links_;
  std::map<std::string, int> addrs_;   // key -> link index
  std::map<std::string, int> routes_;  // key -> output link index (0: none)
};

}  // namespace h2gate::net
