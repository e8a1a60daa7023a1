// NetworkMonitor's Linux parts: an rtnetlink socket subscribed to link,
// address and route changes, read on the io_context, and CLOCK_BOOTTIME vs
// CLOCK_MONOTONIC for suspend detection.
//
// The socket belongs to the network namespace of the thread that calls
// start() (tests rely on this: they setns() a thread first).
#include "gateway/net/network_monitor_linux.h"

#include <arpa/inet.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gateway/base/log.h"
#include "gateway/net/network_monitor.h"

namespace h2gate::net {
namespace {

// Calls fn(type, body, body_len) for each well-formed message of a netlink
// datagram; stops at the first malformed one. Reads through memcpy: test
// buffers need not be aligned.
template <typename Fn>
void forEachMessage(const void* data, size_t len, Fn&& fn) {
  const auto* p = static_cast<const uint8_t*>(data);
  size_t off = 0;
  while (len - off >= sizeof(nlmsghdr)) {
    nlmsghdr h;
    std::memcpy(&h, p + off, sizeof h);
    if (h.nlmsg_len < NLMSG_HDRLEN || h.nlmsg_len > len - off) return;
    if (!fn(h.nlmsg_type, p + off + NLMSG_HDRLEN, h.nlmsg_len - NLMSG_HDRLEN)) return;
    off += NLMSG_ALIGN(h.nlmsg_len);
    if (off > len) return;
  }
}

// The attributes after a fixed header of `fixed` bytes: type -> payload.
struct Attrs {
  std::map<uint16_t, std::pair<const uint8_t*, size_t>> items;

  Attrs(const uint8_t* body, size_t len, size_t fixed) {
    size_t off = NLMSG_ALIGN(fixed);
    while (off + sizeof(rtattr) <= len) {
      rtattr a;
      std::memcpy(&a, body + off, sizeof a);
      if (a.rta_len < sizeof(rtattr) || a.rta_len > len - off) return;
      items[a.rta_type] = {body + off + RTA_LENGTH(0), a.rta_len - RTA_LENGTH(0)};
      off += RTA_ALIGN(a.rta_len);
    }
  }
  bool has(uint16_t type) const { return items.count(type) != 0; }
  std::string str(uint16_t type) const {
    auto it = items.find(type);
    if (it == items.end()) return {};
    const auto [p, n] = it->second;
    return std::string(reinterpret_cast<const char*>(p),
                       strnlen(reinterpret_cast<const char*>(p), n));
  }
  uint32_t u32(uint16_t type, uint32_t fallback = 0) const {
    auto it = items.find(type);
    if (it == items.end() || it->second.second < 4) return fallback;
    uint32_t v;
    std::memcpy(&v, it->second.first, 4);
    return v;
  }
  // An IPv4 or IPv6 address as text, "" when absent or of the wrong size.
  std::string ip(uint16_t type, int family) const {
    auto it = items.find(type);
    if (it == items.end()) return {};
    const size_t want = family == AF_INET ? 4 : family == AF_INET6 ? 16 : 0;
    if (want == 0 || it->second.second < want) return {};
    char text[INET6_ADDRSTRLEN] = "";
    if (!inet_ntop(family, it->second.first, text, sizeof text)) return {};
    return text;
  }
};

}  // namespace

void NetlinkTracker::clear() {
  links_.clear();
  addrs_.clear();
  routes_.clear();
}

std::string NetlinkTracker::linkName(int index) const {
  auto it = links_.find(index);
  if (it != links_.end() && !it->second.name.empty()) return it->second.name;
  return "if" + std::to_string(index);
}

std::vector<std::string> NetlinkTracker::feed(const void* data, size_t len, bool learn_only) {
  std::vector<std::string> out;
  forEachMessage(data, len, [&](uint16_t type, const uint8_t* body, size_t n) {
    switch (type) {
      case RTM_NEWLINK:
      case RTM_DELLINK:
        onLink(type, body, n, learn_only, out);
        break;
      case RTM_NEWADDR:
      case RTM_DELADDR:
        onAddress(type, body, n, learn_only, out);
        break;
      case RTM_NEWROUTE:
      case RTM_DELROUTE:
        onRoute(type, body, n, learn_only, out);
        break;
      default:  // NLMSG_DONE, NLMSG_ERROR, NLMSG_NOOP, others
        break;
    }
    return true;
  });
  return out;
}

void NetlinkTracker::onLink(uint16_t type, const uint8_t* body, size_t len, bool learn,
                            std::vector<std::string>& out) {
  if (len < sizeof(ifinfomsg)) return;
  ifinfomsg m;
  std::memcpy(&m, body, sizeof m);
  const Attrs attrs(body, len, sizeof m);
  const int index = m.ifi_index;
  auto it = links_.find(index);
  if (type == RTM_DELLINK) {
    if (it == links_.end()) return;
    const std::string name = linkName(index);
    const bool was_online = it->second.online;
    forgetLink(index, true);
    links_.erase(index);
    if (!learn && was_online) out.push_back("link " + name + " removed");
    return;
  }
  const bool online = (m.ifi_flags & IFF_UP) && (m.ifi_flags & IFF_RUNNING);
  std::string name = attrs.str(IFLA_IFNAME);
  if (it == links_.end()) {
    links_[index] = Link{name, online};
    // A new link that is not up yet changes nothing; its "up" will.
    if (!learn && online) out.push_back("link " + linkName(index) + " up");
    return;
  }
  if (!name.empty()) it->second.name = std::move(name);
  if (it->second.online == online) return;  // stats, wireless scans, other attributes
  it->second.online = online;
  if (!online) forgetLink(index, false);
  if (!learn) out.push_back("link " + linkName(index) + (online ? " up" : " down"));
}

void NetlinkTracker::forgetLink(int index, bool addresses) {
  std::erase_if(routes_, [&](const auto& kv) { return kv.second == index; });
  if (addresses) std::erase_if(addrs_, [&](const auto& kv) { return kv.second == index; });
}

void NetlinkTracker::onAddress(uint16_t type, const uint8_t* body, size_t len, bool learn,
                               std::vector<std::string>& out) {
  if (len < sizeof(ifaddrmsg)) return;
  ifaddrmsg m;
  std::memcpy(&m, body, sizeof m);
  if (m.ifa_family != AF_INET && m.ifa_family != AF_INET6) return;
  const Attrs attrs(body, len, sizeof m);
  // IFA_LOCAL is the local end of a point-to-point link; IFA_ADDRESS the peer.
  std::string ip = attrs.ip(IFA_LOCAL, m.ifa_family);
  if (ip.empty()) ip = attrs.ip(IFA_ADDRESS, m.ifa_family);
  if (ip.empty()) return;
  const std::string text = ip + "/" + std::to_string(m.ifa_prefixlen);
  const int index = static_cast<int>(m.ifa_index);
  const std::string key = std::to_string(index) + " " + text;
  // An IPv6 address under duplicate address detection (or that failed it)
  // cannot be used yet: it counts as present once DAD is done, so an added
  // address is one change, not two.
  const uint32_t flags = attrs.u32(IFA_FLAGS, m.ifa_flags);
  const bool usable = type == RTM_NEWADDR && !(flags & (IFA_F_TENTATIVE | IFA_F_DADFAILED));
  const bool known = addrs_.count(key) != 0;
  if (usable == known) return;  // a refresh (lifetimes, deprecation)
  if (usable)
    addrs_[key] = index;
  else
    addrs_.erase(key);
  if (!learn)
    out.push_back("address " + text + (usable ? " added on " : " removed from ") + linkName(index));
}

void NetlinkTracker::onRoute(uint16_t type, const uint8_t* body, size_t len, bool learn,
                             std::vector<std::string>& out) {
  if (len < sizeof(rtmsg)) return;
  rtmsg m;
  std::memcpy(&m, body, sizeof m);
  if (m.rtm_family != AF_INET && m.rtm_family != AF_INET6) return;
  const Attrs attrs(body, len, sizeof m);
  const uint32_t table = attrs.u32(RTA_TABLE, m.rtm_table);
  // Local and broadcast routes follow addresses (reported as such); cloned
  // routes are the IPv6 route cache.
  if (table == RT_TABLE_LOCAL || (m.rtm_flags & RTM_F_CLONED)) return;
  if (m.rtm_type == RTN_LOCAL || m.rtm_type == RTN_BROADCAST || m.rtm_type == RTN_MULTICAST ||
      m.rtm_type == RTN_ANYCAST)
    return;
  std::string dst = attrs.ip(RTA_DST, m.rtm_family);
  dst = m.rtm_dst_len == 0 ? std::string("default")
                           : (dst.empty() ? "?" : dst) + "/" + std::to_string(m.rtm_dst_len);
  std::string text = dst;
  if (std::string gw = attrs.ip(RTA_GATEWAY, m.rtm_family); !gw.empty()) text += " via " + gw;
  const int oif = static_cast<int>(attrs.u32(RTA_OIF));
  if (oif) text += " dev " + linkName(oif);
  const std::string key = std::to_string(m.rtm_family) + " " + std::to_string(table) + " " +
                          std::to_string(m.rtm_type) + " " + text + " metric " +
                          std::to_string(attrs.u32(RTA_PRIORITY));
  const bool known = routes_.count(key) != 0;
  if (type == RTM_NEWROUTE) {
    if (known) return;  // a refresh (IPv6 router advertisements)
    routes_[key] = oif;
  } else {
    if (!known) return;
    routes_.erase(key);
  }
  if (!learn) out.push_back("route " + text + (type == RTM_NEWROUTE ? " added" : " removed"));
}

namespace {

std::string errnoText(const char* what, int err) {
  return std::string(what) + ": " + std::strerror(err);
}

// Reads the kernel's current links, addresses or routes (a dump, on a
// separate blocking socket with a 2 s receive timeout) into `tracker`.
std::string dumpInto(NetlinkTracker& tracker, uint16_t type) {
  const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return errnoText("netlink socket", errno);
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  // Each request carries its own header struct (the kernel reads the family
  // from its first byte); AF_UNSPEC asks for IPv4 and IPv6.
  alignas(nlmsghdr) uint8_t req[NLMSG_SPACE(sizeof(ifinfomsg))] = {};
  const size_t body = type == RTM_GETLINK   ? sizeof(ifinfomsg)
                      : type == RTM_GETADDR ? sizeof(ifaddrmsg)
                                            : sizeof(rtmsg);
  nlmsghdr h{};
  h.nlmsg_len = static_cast<uint32_t>(NLMSG_LENGTH(body));
  h.nlmsg_type = type;
  h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  h.nlmsg_seq = 1;
  std::memcpy(req, &h, sizeof h);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(fd, req, h.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
    const int err = errno;
    ::close(fd);
    return errnoText("netlink dump request", err);
  }
  std::vector<uint64_t> buf(8192);  // 64 KiB, aligned for nlmsghdr
  std::string error;
  for (bool done = false; !done;) {
    const ssize_t n = ::recv(fd, buf.data(), buf.size() * sizeof buf[0], 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      error = errnoText("netlink dump", errno);
      break;
    }
    if (n == 0) break;
    forEachMessage(buf.data(), static_cast<size_t>(n),
                   [&](uint16_t t, const uint8_t* b, size_t len) {
                     if (t == NLMSG_DONE) done = true;
                     if (t == NLMSG_ERROR) {
                       nlmsgerr e{};
                       if (len >= sizeof e) std::memcpy(&e, b, sizeof e);
                       if (e.error) error = errnoText("netlink dump", -e.error);
                       done = true;
                     }
                     return !done;
                   });
    tracker.feed(buf.data(), static_cast<size_t>(n), true);
  }
  ::close(fd);
  return error;
}

class NetlinkWatcher final : public NetworkWatcher {
 public:
  NetlinkWatcher(asio::io_context& io, Note note)
      : io_(io), sock_(io), retry_(io), note_(std::move(note)), buf_(8192) {}
  ~NetlinkWatcher() override { stop(); }

  std::string start() override {
    const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) return errnoText("netlink socket", errno);
    // Bursts (an interface with many routes going down) must not overflow
    // the default ~200 KiB; FORCE works for root, plain SO_RCVBUF up to
    // rmem_max otherwise.
    const int size = 1 << 20;
    if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) != 0)
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    sockaddr_nl sa{};
    sa.nl_family = AF_NETLINK;
    sa.nl_groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_ROUTE |
                   RTMGRP_IPV6_ROUTE;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      const int err = errno;
      ::close(fd);
      return errnoText("netlink bind", err);
    }
    asio::error_code ec;
    sock_.assign(fd, ec);
    if (ec) {
      ::close(fd);
      return "netlink: " + ec.message();
    }
    // Subscribed first, then the dump: a change in between is seen twice at
    // worst (and then ignored as known), never missed.
    const std::string err = resync();
    wait();
    return err.empty() ? "" : err + " (changes to what exists now may be reported late)";
  }

  void stop() override {
    if (stopped_) return;
    stopped_ = true;
    retry_.cancel();
    asio::error_code ec;
    sock_.close(ec);
  }

 private:
  std::string resync() {
    tracker_.clear();
    for (uint16_t type : {RTM_GETLINK, RTM_GETADDR, RTM_GETROUTE})
      if (std::string err = dumpInto(tracker_, type); !err.empty()) return err;
    H2G_LOG(Debug, 0, 0,
            "netlink: " << tracker_.links() << " link(s), " << tracker_.addresses()
                        << " address(es), " << tracker_.routes() << " route(s)");
    return {};
  }

  void wait() {
    sock_.async_wait(asio::posix::stream_descriptor::wait_read,
                     [this, life = std::weak_ptr<int>(life_)](const asio::error_code& ec) {
                       if (ec == asio::error::operation_aborted || !life.lock() || stopped_) return;
                       if (ec) return backOff(ec.message());
                       readAvailable();
                     });
  }

  // Reads what is queued, a bounded number of datagrams per turn so other
  // handlers run between bursts.
  void readAvailable() {
    for (int i = 0; i < 64; ++i) {
      sockaddr_nl from{};
      socklen_t from_len = sizeof from;
      const ssize_t n = ::recvfrom(sock_.native_handle(), buf_.data(), buf_.size() * sizeof buf_[0],
                                   MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &from_len);
      if (n < 0) {
        const int err = errno;
        if (err == EINTR) continue;
        if (err == EAGAIN || err == EWOULDBLOCK) return wait();
        if (err == ENOBUFS) {
          // The kernel dropped notifications: what we know is stale.
          note_("netlink notifications were lost (receive buffer full)");
          if (std::string e = resync(); !e.empty()) H2G_LOG(Warn, 0, 0, "network monitor: " << e);
          continue;
        }
        return backOff(std::strerror(err));
      }
      errors_ = 0;
      if (from.nl_pid != 0) continue;  // only the kernel's messages count
      for (std::string& what : tracker_.feed(buf_.data(), static_cast<size_t>(n))) {
        note_(std::move(what));
        if (stopped_) return;
      }
    }
    asio::post(io_, [this, life = std::weak_ptr<int>(life_)] {
      if (life.lock() && !stopped_) readAvailable();
    });
  }

  // An unexpected error: try again in a second rather than spin; the first
  // one and every 60th after is logged.
  void backOff(const std::string& why) {
    if (errors_++ % 60 == 0)
      H2G_LOG(Warn, 0, 0, "network monitor: reading netlink failed: " << why << "; retrying");
    retry_.expires_after(std::chrono::seconds(1));
    retry_.async_wait([this, life = std::weak_ptr<int>(life_)](const asio::error_code& ec) {
      if (ec || !life.lock() || stopped_) return;
      readAvailable();
    });
  }

  asio::io_context& io_;
  asio::posix::stream_descriptor sock_;
  asio::steady_timer retry_;
  Note note_;
  NetlinkTracker tracker_;
  std::vector<uint64_t> buf_;  // 64 KiB, aligned for nlmsghdr
  bool stopped_ = false;
  int errors_ = 0;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);  // handlers' weak_ptr target
};

std::chrono::nanoseconds readClock(clockid_t id) {
  timespec ts{};
  ::clock_gettime(id, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

}  // namespace

SuspendClock systemSuspendClock() {
  return [] { return SuspendClockReading{readClock(CLOCK_MONOTONIC), readClock(CLOCK_BOOTTIME)}; };
}

std::unique_ptr<NetworkWatcher> makeNetworkWatcher(asio::io_context& io,
                                                   NetworkWatcher::Note note) {
  return std::make_unique<NetlinkWatcher>(io, std::move(note));
}

}  // namespace h2gate::net
