// NetworkMonitor (gateway/net/network_monitor.h): suspend detection with a
// fake clock, coalescing of event bursts, the rtnetlink tracker fed with
// hand-made messages, and (root only) the real monitor inside a network
// namespace while `ip` adds and removes an address there.
//
// The platform-neutral cases also run in the Windows cross build
// (tests/windows/) under wine.
#include "gateway/net/network_monitor.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#ifdef __linux__
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <cstring>

#include "gateway/net/network_monitor_linux.h"
#endif

using namespace h2gate::net;
using namespace std::chrono_literals;

namespace {

// Both clocks under the test's control: tick() is a second of normal
// running, sleep() a suspend (only the boot clock moves).
struct FakeClock {
  SuspendClockReading now{std::chrono::hours(1), std::chrono::hours(2)};
  void tick(std::chrono::nanoseconds d = 1s) {
    now.awake += d;
    now.boot += d;
  }
  void sleep(std::chrono::nanoseconds d) { now.boot += d; }
  SuspendClock clock() {
    return [this] { return now; };
  }
};

// Runs `io` until `done()` or `limit`, in small slices.
template <typename Pred>
void runUntil(asio::io_context& io, Pred done, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < end) {
    io.restart();
    io.run_for(5ms);
  }
}

}  // namespace

TEST_CASE("suspend detector: fires once for a jump, never for normal ticks", "[net][netmon]") {
  FakeClock fake;
  SuspendDetector d(fake.clock(), 2s);
  CHECK_FALSE(d.check());  // the first call only reads
  for (int i = 0; i < 100; ++i) {
    fake.tick(1s);
    // Ticks are late or early now and then, by the same amount on both clocks.
    if (i % 7 == 0) fake.tick(300ms);
    CHECK_FALSE(d.check());
  }
  // Jitter between the two clocks below the threshold is no suspend.
  fake.tick(1s);
  fake.sleep(1500ms);
  CHECK_FALSE(d.check());

  fake.tick(1s);
  fake.sleep(90s);
  const auto slept = d.check();
  REQUIRE(slept);
  CHECK(*slept == 90s);
  for (int i = 0; i < 10; ++i) {
    fake.tick(1s);
    CHECK_FALSE(d.check());
  }
  // A clock going backwards is not a suspend.
  fake.now.boot -= 10s;
  CHECK_FALSE(d.check());
}

TEST_CASE("monitor: a suspend gap becomes one callback that says how long", "[net][netmon]") {
  asio::io_context io;
  FakeClock fake;
  NetworkMonitor::Options o;
  o.debounce = 20ms;
  o.suspend_tick = 10ms;
  o.clock = fake.clock();
  o.watch_os = false;
  std::vector<std::string> reasons;
  NetworkMonitor m(io, o, [&](const std::string& r) { reasons.push_back(r); });
  CHECK(m.start().empty());
  // Normal running: the fake clocks move together between ticks.
  for (int i = 0; i < 10; ++i) {
    fake.tick(10ms);
    io.restart();
    io.run_for(10ms);
  }
  CHECK(reasons.empty());
  fake.sleep(61s);
  runUntil(
      io, [&] { return !reasons.empty(); }, 2000ms);
  io.restart();
  io.run_for(100ms);  // no second callback for the same gap
  REQUIRE(reasons.size() == 1);
  CHECK(reasons[0] == "resumed after ~61 s of suspend");
  m.stop();
}

TEST_CASE("coalescing: a burst of events is one callback", "[net][netmon]") {
  asio::io_context io;
  std::vector<std::string> reasons;
  ChangeCoalescer c(io, 100ms, 1000ms, [&](const std::string& r) { reasons.push_back(r); });

  SECTION("N events within the window") {
    c.note("address 10.0.0.5/24 added on eth0");
    c.note("route default via 10.0.0.1 dev eth0 added");
    c.note("link eth0 up");
    c.note("link eth0 up");  // listed once
    CHECK(c.pending() == 3);
    runUntil(
        io, [&] { return !reasons.empty(); }, 2000ms);
    io.restart();
    io.run_for(250ms);
    REQUIRE(reasons.size() == 1);
    CHECK(reasons[0] ==
          "address 10.0.0.5/24 added on eth0; route default via 10.0.0.1 dev eth0 added; "
          "link eth0 up (4 events)");
    CHECK(c.pending() == 0);
  }
  SECTION("many events: the first few are named, all are counted") {
    for (int i = 0; i < 50; ++i) c.note("address 10.0.0." + std::to_string(i) + "/24 added");
    runUntil(
        io, [&] { return !reasons.empty(); }, 2000ms);
    REQUIRE(reasons.size() == 1);
    CHECK(reasons[0] ==
          "address 10.0.0.0/24 added; address 10.0.0.1/24 added; address 10.0.0.2/24 added; "
          "address 10.0.0.3/24 added (50 events)");
  }
  SECTION("one event is named as it is") {
    c.note("link wlan0 down");
    runUntil(
        io, [&] { return !reasons.empty(); }, 2000ms);
    REQUIRE(reasons.size() == 1);
    CHECK(reasons[0] == "link wlan0 down");
  }
  SECTION("two bursts apart are two callbacks") {
    c.note("link eth0 down");
    runUntil(
        io, [&] { return !reasons.empty(); }, 2000ms);
    c.note("link eth0 up");
    runUntil(
        io, [&] { return reasons.size() == 2; }, 2000ms);
    REQUIRE(reasons.size() == 2);
    CHECK(reasons[0] == "link eth0 down");
    CHECK(reasons[1] == "link eth0 up");
  }
  SECTION("a flapping source cannot postpone the callback beyond max_delay") {
    ChangeCoalescer fast(io, 50ms, 200ms, [&](const std::string& r) { reasons.push_back(r); });
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < 700ms) {
      fast.note("link wlan0 up");
      io.restart();
      io.run_for(10ms);
    }
    // Events never stop for 50 ms, yet a callback comes every ~200 ms.
    CHECK(reasons.size() >= 2);
    CHECK(reasons.size() <= 4);
  }
  SECTION("cancel drops the pending burst") {
    c.note("link eth0 down");
    c.cancel();
    io.restart();
    io.run_for(300ms);
    CHECK(reasons.empty());
  }
}

TEST_CASE("monitor: stop() and destruction silence pending callbacks", "[net][netmon]") {
  asio::io_context io;
  int calls = 0;
  NetworkMonitor::Options o;
  o.debounce = 10ms;
  o.watch_os = false;
  {
    NetworkMonitor m(io, o, [&](const std::string&) { ++calls; });
    CHECK(m.start().empty());
    m.note("link eth0 down");
    m.stop();
    io.restart();
    io.run_for(50ms);
    CHECK(calls == 0);
    CHECK(m.start().empty());  // restartable
    m.note("link eth0 up");
  }  // destroyed with a burst pending
  io.restart();
  io.run_for(50ms);
  CHECK(calls == 0);
}

#ifdef __linux__

namespace {

// Hand-made rtnetlink messages, appended to one datagram.
class NetlinkBuilder {
 public:
  template <typename Header>
  NetlinkBuilder& message(uint16_t type, const Header& h) {
    start_ = buf_.size();
    nlmsghdr nh{};
    nh.nlmsg_type = type;
    append(&nh, sizeof nh);
    append(&h, sizeof h);
    finish();
    return *this;
  }
  NetlinkBuilder& attr(uint16_t type, const void* data, size_t len) {
    rtattr a{};
    a.rta_type = type;
    a.rta_len = static_cast<uint16_t>(RTA_LENGTH(len));
    append(&a, sizeof a);
    append(data, len);
    finish();
    return *this;
  }
  NetlinkBuilder& str(uint16_t type, const std::string& s) {
    return attr(type, s.c_str(), s.size() + 1);
  }
  NetlinkBuilder& u32(uint16_t type, uint32_t v) { return attr(type, &v, sizeof v); }
  NetlinkBuilder& ip(uint16_t type, int family, const char* text) {
    uint8_t b[16];
    REQUIRE(inet_pton(family, text, b) == 1);
    return attr(type, b, family == AF_INET ? 4 : 16);
  }
  const std::vector<uint8_t>& bytes() const { return buf_; }

 private:
  void append(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
    buf_.resize((buf_.size() + 3) & ~size_t{3});
  }
  void finish() {
    const uint32_t len = static_cast<uint32_t>(buf_.size() - start_);
    std::memcpy(buf_.data() + start_, &len, sizeof len);  // nlmsg_len comes first
  }
  std::vector<uint8_t> buf_;
  size_t start_ = 0;
};

ifinfomsg link(int index, bool up) {
  ifinfomsg m{};
  m.ifi_family = AF_UNSPEC;
  m.ifi_index = index;
  m.ifi_flags = up ? (IFF_UP | IFF_RUNNING) : 0;
  return m;
}

ifaddrmsg addr(int family, int index, int prefix, uint8_t flags = 0) {
  ifaddrmsg m{};
  m.ifa_family = static_cast<uint8_t>(family);
  m.ifa_index = static_cast<uint32_t>(index);
  m.ifa_prefixlen = static_cast<uint8_t>(prefix);
  m.ifa_flags = flags;
  return m;
}

rtmsg route(int family, int dst_len, uint8_t table = RT_TABLE_MAIN, uint8_t type = RTN_UNICAST) {
  rtmsg m{};
  m.rtm_family = static_cast<uint8_t>(family);
  m.rtm_dst_len = static_cast<uint8_t>(dst_len);
  m.rtm_table = table;
  m.rtm_type = type;
  return m;
}

std::vector<std::string> feed(NetlinkTracker& t, const NetlinkBuilder& b, bool learn = false) {
  return t.feed(b.bytes().data(), b.bytes().size(), learn);
}

using Texts = std::vector<std::string>;

}  // namespace

TEST_CASE("netlink tracker: changes are reported, refreshes are not", "[net][netmon]") {
  NetlinkTracker t;
  // What a dump at start finds: learnt silently.
  NetlinkBuilder dump;
  dump.message(RTM_NEWLINK, link(1, true)).str(IFLA_IFNAME, "lo");
  dump.message(RTM_NEWLINK, link(2, true)).str(IFLA_IFNAME, "eth0");
  dump.message(RTM_NEWADDR, addr(AF_INET, 2, 24)).ip(IFA_LOCAL, AF_INET, "10.0.0.5");
  dump.message(RTM_NEWROUTE, route(AF_INET, 0))
      .ip(RTA_GATEWAY, AF_INET, "10.0.0.1")
      .u32(RTA_OIF, 2);
  CHECK(feed(t, dump, true).empty());
  CHECK(t.links() == 2);
  CHECK(t.addresses() == 1);
  CHECK(t.routes() == 1);
  CHECK(t.linkName(2) == "eth0");
  CHECK(t.linkName(9) == "if9");
  // The same again (a refresh) changes nothing.
  CHECK(feed(t, dump).empty());

  NetlinkBuilder add;
  add.message(RTM_NEWADDR, addr(AF_INET, 1, 24)).ip(IFA_LOCAL, AF_INET, "10.203.0.1");
  CHECK(feed(t, add) == Texts{"address 10.203.0.1/24 added on lo"});
  CHECK(feed(t, add).empty());
  NetlinkBuilder del;
  del.message(RTM_DELADDR, addr(AF_INET, 1, 24)).ip(IFA_LOCAL, AF_INET, "10.203.0.1");
  CHECK(feed(t, del) == Texts{"address 10.203.0.1/24 removed from lo"});
  CHECK(feed(t, del).empty());

  // IPv6: an address counts once duplicate address detection is done.
  NetlinkBuilder tentative;
  tentative.message(RTM_NEWADDR, addr(AF_INET6, 2, 64, IFA_F_TENTATIVE))
      .ip(IFA_ADDRESS, AF_INET6, "2001:db8::5");
  CHECK(feed(t, tentative).empty());
  NetlinkBuilder ready;
  ready.message(RTM_NEWADDR, addr(AF_INET6, 2, 64)).ip(IFA_ADDRESS, AF_INET6, "2001:db8::5");
  CHECK(feed(t, ready) == Texts{"address 2001:db8::5/64 added on eth0"});
  // Router advertisements refresh lifetimes: same address, no change.
  NetlinkBuilder deprecated;
  deprecated.message(RTM_NEWADDR, addr(AF_INET6, 2, 64, IFA_F_DEPRECATED))
      .ip(IFA_ADDRESS, AF_INET6, "2001:db8::5");
  CHECK(feed(t, deprecated).empty());

  // Routes: local-table and cloned routes are ignored; others reported once.
  NetlinkBuilder local;
  local.message(RTM_NEWROUTE, route(AF_INET, 32, RT_TABLE_LOCAL, RTN_LOCAL))
      .ip(RTA_DST, AF_INET, "10.203.0.1")
      .u32(RTA_OIF, 1);
  CHECK(feed(t, local).empty());
  NetlinkBuilder r6;
  r6.message(RTM_NEWROUTE, route(AF_INET6, 0))
      .ip(RTA_GATEWAY, AF_INET6, "fe80::1")
      .u32(RTA_OIF, 2)
      .u32(RTA_PRIORITY, 1024);
  CHECK(feed(t, r6) == Texts{"route default via fe80::1 dev eth0 added"});
  CHECK(feed(t, r6).empty());
  NetlinkBuilder net;
  net.message(RTM_NEWROUTE, route(AF_INET, 8)).ip(RTA_DST, AF_INET, "10.0.0.0").u32(RTA_OIF, 2);
  net.message(RTM_DELROUTE, route(AF_INET, 0)).ip(RTA_GATEWAY, AF_INET, "10.0.0.1").u32(RTA_OIF, 2);
  CHECK(feed(t, net) ==
        Texts{"route 10.0.0.0/8 dev eth0 added", "route default via 10.0.0.1 dev eth0 removed"});

  // Links: only up/down matters, not other attributes (wireless scans).
  NetlinkBuilder same;
  same.message(RTM_NEWLINK, link(2, true)).str(IFLA_IFNAME, "eth0").u32(IFLA_MTU, 1400);
  CHECK(feed(t, same).empty());
  NetlinkBuilder down;
  down.message(RTM_NEWLINK, link(2, false)).str(IFLA_IFNAME, "eth0");
  CHECK(feed(t, down) == Texts{"link eth0 down"});
  NetlinkBuilder up;
  up.message(RTM_NEWLINK, link(2, true)).str(IFLA_IFNAME, "eth0");
  CHECK(feed(t, up) == Texts{"link eth0 up"});
  NetlinkBuilder gone;
  gone.message(RTM_DELLINK, link(2, true)).str(IFLA_IFNAME, "eth0");
  CHECK(feed(t, gone) == Texts{"link eth0 removed"});
  CHECK(t.addresses() == 0);  // its addresses went with it
  // A new link that is still down is no change yet.
  NetlinkBuilder fresh;
  fresh.message(RTM_NEWLINK, link(7, false)).str(IFLA_IFNAME, "veth0");
  CHECK(feed(t, fresh).empty());
}

TEST_CASE("netlink tracker: malformed datagrams are skipped", "[net][netmon]") {
  NetlinkTracker t;
  NetlinkBuilder b;
  b.message(RTM_NEWADDR, addr(AF_INET, 1, 24)).ip(IFA_LOCAL, AF_INET, "10.203.0.1");
  const std::vector<uint8_t> whole = b.bytes();
  for (size_t n = 0; n < whole.size(); ++n) CHECK(t.feed(whole.data(), n).empty());
  std::vector<uint8_t> bad = whole;
  bad[0] = 3;  // nlmsg_len below the header
  CHECK(t.feed(bad.data(), bad.size()).empty());
  // An attribute longer than its message.
  bad = whole;
  bad[NLMSG_HDRLEN + sizeof(ifaddrmsg)] = 200;
  CHECK(t.feed(bad.data(), bad.size()).empty());
  CHECK(t.feed(whole.data(), whole.size()) == Texts{"address 10.203.0.1/24 added on if1"});
}

namespace {

bool run(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

// A network namespace for one test, deleted at scope exit.
struct NetNs {
  std::string name = "h2g-netmon-" + std::to_string(::getpid());
  bool ok = false;
  NetNs() {
    run("ip netns del " + name);
    ok = run("ip netns add " + name);
  }
  ~NetNs() {
    if (ok) run("ip netns del " + name);
  }
};

// The monitor on its own thread and io_context, inside the namespace.
class MonitorInNs {
 public:
  explicit MonitorInNs(const std::string& ns) {
    thread_ = std::thread([this, ns] {
      const int fd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
        std::lock_guard<std::mutex> lock(mu_);
        error_ = "setns into " + ns + " failed: " + std::strerror(errno);
        started_ = true;
        cv_.notify_all();
        if (fd >= 0) ::close(fd);
        return;
      }
      ::close(fd);
      asio::io_context io;
      auto guard = asio::make_work_guard(io);
      NetworkMonitor::Options o;  // the defaults: 500 ms debounce
      NetworkMonitor m(io, o, [this](const std::string& r) {
        std::lock_guard<std::mutex> lock(mu_);
        reasons_.push_back(r);
        cv_.notify_all();
      });
      {
        std::lock_guard<std::mutex> lock(mu_);
        error_ = m.start();
        io_ = &io;
        started_ = true;
        cv_.notify_all();
      }
      io.run();
      m.stop();
      std::lock_guard<std::mutex> lock(mu_);
      io_ = nullptr;
    });
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return started_; });
  }
  ~MonitorInNs() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (io_) io_->stop();
    }
    thread_.join();
  }
  std::string error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }
  // Waits for the callback after the first `seen` whose reason contains `text`.
  std::optional<std::string> waitFor(const std::string& text, size_t seen,
                                     std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<std::string> found;
    cv_.wait_for(lock, timeout, [&] {
      for (size_t i = seen; i < reasons_.size(); ++i)
        if (reasons_[i].find(text) != std::string::npos) found = reasons_[i];
      return found.has_value();
    });
    return found;
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu_);
    return reasons_.size();
  }
  std::vector<std::string> reasons() {
    std::lock_guard<std::mutex> lock(mu_);
    return reasons_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;
  std::string error_;
  asio::io_context* io_ = nullptr;
  std::vector<std::string> reasons_;
  std::thread thread_;
};

}  // namespace

TEST_CASE("monitor in a network namespace sees an address come and go", "[net][netmon][netns]") {
  if (::geteuid() != 0) {
    WARN("skipped: creating a network namespace needs root");
    return;
  }
  if (!run("ip netns list")) {
    WARN("skipped: `ip netns` is unavailable");
    return;
  }
  NetNs ns;
  if (!ns.ok) {
    WARN("skipped: `ip netns add` failed");
    return;
  }
  MonitorInNs mon(ns.name);
  REQUIRE(mon.error() == "");

  size_t seen = mon.count();
  REQUIRE(run("ip -n " + ns.name + " addr add 10.203.0.1/24 dev lo"));
  auto added = mon.waitFor("address 10.203.0.1/24 added on lo", seen, 2000ms);
  INFO("callbacks: " << mon.reasons().size());
  REQUIRE(added);
  CHECK(*added == "address 10.203.0.1/24 added on lo");  // its local routes are not news

  seen = mon.count();
  REQUIRE(run("ip -n " + ns.name + " link set lo up"));
  CHECK(mon.waitFor("link lo up", seen, 2000ms));

  seen = mon.count();
  REQUIRE(run("ip -n " + ns.name + " addr del 10.203.0.1/24 dev lo"));
  CHECK(mon.waitFor("address 10.203.0.1/24 removed from lo", seen, 2000ms));

  // Nothing else happens in the namespace: no more callbacks.
  seen = mon.count();
  std::this_thread::sleep_for(1200ms);
  std::string all;
  for (const auto& r : mon.reasons()) all += "\n  " + r;
  INFO("callbacks:" << all);
  CHECK(mon.count() == seen);

  // A route through a new (veth) link, where the kernel has veth. (Its IPv6
  // link-local addresses arrive a little later, after DAD.)
  if (run("ip -n " + ns.name + " link add h2gv0 type veth peer name h2gv1")) {
    REQUIRE(run("ip -n " + ns.name + " addr add 10.204.0.1/24 dev h2gv0"));
    REQUIRE(run("ip -n " + ns.name + " link set h2gv1 up"));
    seen = mon.count();
    REQUIRE(run("ip -n " + ns.name + " link set h2gv0 up"));
    CHECK(mon.waitFor("link h2gv0 up", seen, 2000ms));
    seen = mon.count();
    REQUIRE(run("ip -n " + ns.name + " route add 10.99.0.0/16 via 10.204.0.2"));
    CHECK(mon.waitFor("route 10.99.0.0/16 via 10.204.0.2 dev h2gv0 added", seen, 2000ms));
    seen = mon.count();
    REQUIRE(run("ip -n " + ns.name + " link del h2gv0"));
    // The kernel takes it down first ("link h2gv0 down"), then removes it.
    auto gone = mon.waitFor("link h2gv0 ", seen, 2000ms);
    REQUIRE(gone);
    CHECK((gone->find("link h2gv0 down") != std::string::npos ||
           gone->find("link h2gv0 removed") != std::string::npos));
  }
}

#endif  // __linux__
