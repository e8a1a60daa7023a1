// Helpers of the PAC unit tests: a resolver with a fixed table (and an
// optional delay, to act out a slow DNS server), a fixed clock, a way to
// evaluate one JavaScript expression in a PAC heap, a TCP server that
// never answers, and TZ set for one scope.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <asio.hpp>

#include "gateway/net/ip_address.h"
#include "gateway/pac_engine/pac_context.h"
#include "gateway/pac_engine/resolver.h"
#include "tests/support/config_util.h"

namespace h2gate::pac::test {

class TableResolver : public PacResolver {
 public:
  // "name" -> {"10.0.0.1", "2001:db8::1"}
  std::map<std::string, std::vector<std::string>> table;
  std::vector<std::string> local;
  std::chrono::milliseconds delay{0};  // each lookup takes this long (bounded by the deadline)
  bool ignore_deadline = false;        // ...or the whole delay, whatever the deadline

  std::vector<net::IpAddress> resolve(const std::string& host, bool v4_only, Deadline deadline,
                                      std::string_view owner) override {
    {
      std::lock_guard lock(mutex_);
      ++lookups_;
      names_.push_back(host);
      owners_.emplace_back(owner);
    }
    if (delay.count() > 0) {
      const auto end = std::chrono::steady_clock::now() + delay;
      const auto until = ignore_deadline ? end : std::min(deadline, end);
      // Until steady_clock says so: mingw's sleep_until can wake a little
      // early, and the caller checks the deadline against steady_clock.
      while (std::chrono::steady_clock::now() < until) std::this_thread::sleep_until(until);
      if (until == deadline) return {};
    }
    std::vector<net::IpAddress> out;
    if (auto literal = net::parseIp(host); literal && host.front() != '[') {
      if (!(v4_only && literal->v6)) out.push_back(*literal);
      return out;
    }
    auto it = table.find(host);
    if (it == table.end()) return out;
    for (const std::string& s : it->second) {
      net::IpAddress ip = *net::parseIp(s);
      if (!(v4_only && ip.v6)) out.push_back(ip);
    }
    return out;
  }
  std::vector<net::IpAddress> localAddresses(Deadline) override {
    std::vector<net::IpAddress> out;
    for (const std::string& s : local) out.push_back(*net::parseIp(s));
    return out;
  }
  int lookups() const {
    std::lock_guard lock(mutex_);
    return lookups_;
  }
  std::vector<std::string> names() const {
    std::lock_guard lock(mutex_);
    return names_;
  }
  // Whom each lookup was for (PacResolver::resolve's owner), in order.
  std::vector<std::string> owners() const {
    std::lock_guard lock(mutex_);
    return owners_;
  }

 private:
  mutable std::mutex mutex_;
  int lookups_ = 0;
  std::vector<std::string> names_;
  std::vector<std::string> owners_;
};

// A lookup function for SystemResolver acting out a DNS server that does not
// answer: a name ending in ".dead" blocks until release() (or the
// destructor, or 30 s); "inhosts.test" answers 10.9.9.9 at once (as from
// /etc/hosts); anything else is not found.
class DeadDns {
 public:
  ~DeadDns() { release(); }
  SystemResolver::LookupFunction lookup() {
    return [this](const std::string& host, bool) -> std::vector<net::IpAddress> {
      if (host == "inhosts.test") return {*net::parseIp("10.9.9.9")};
      const std::string suffix = ".dead";
      if (host.size() < suffix.size() ||
          host.compare(host.size() - suffix.size(), suffix.size(), suffix) != 0)
        return {};
      std::unique_lock lock(mutex_);
      ++stuck_;
      ++calls_;
      cv_.wait_for(lock, std::chrono::seconds(30), [this] { return released_; });
      --stuck_;
      cv_.notify_all();
      return {};
    };
  }
  // Lets every blocked lookup return (not found) and waits until they have.
  void release() {
    std::unique_lock lock(mutex_);
    released_ = true;
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::seconds(5), [this] { return stuck_ == 0; });
  }
  int stuck() const {
    std::lock_guard lock(mutex_);
    return stuck_;
  }
  int calls() const {
    std::lock_guard lock(mutex_);
    return calls_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool released_ = false;
  int stuck_ = 0;
  int calls_ = 0;
};

// 2024-03-15 10:30:00 UTC, a Friday.// 2024-03-15 10:30:00 UTC, a Friday.
inline constexpr double kFriday1030Utc = 1710498600000.0;

inline Deadline in(std::chrono::milliseconds ms) {
  return std::chrono::steady_clock::now() + ms;
}

// A PAC heap whose FindProxyForURL returns String(<expression>).
class ExprRunner {
 public:
  explicit ExprRunner(std::shared_ptr<TableResolver> resolver, double now_ms = kFriday1030Utc)
      : resolver_(std::move(resolver)) {
    env_.resolver = resolver_;
    env_.clock = [this] { return now_; };
    env_.alert = [this](std::string_view m) { alerts.emplace_back(m); };
    now_ = now_ms;
  }
  void setNow(double ms) { now_ = ms; }

  // The expression's value as a string, or "ERROR <kind>: <message>".
  std::string eval(const std::string& expr) {
    PacContext ctx(env_);
    const std::string script =
        "function FindProxyForURL(url, host) { return String(" + expr + "); }";
    PacError err = ctx.load(script, "expr.pac", in(std::chrono::seconds(5)));
    if (err) return std::string("ERROR ") + kindName(err.kind) + ": " + err.message;
    RawAnswer a = ctx.findProxy("http://example.com/", "example.com", in(std::chrono::seconds(5)));
    if (a.error) return std::string("ERROR ") + kindName(a.error.kind) + ": " + a.error.message;
    return a.text;
  }

  std::vector<std::string> alerts;

 private:
  std::shared_ptr<TableResolver> resolver_;
  PacEnvironment env_;
  double now_ = 0;
};

// A TCP server on 127.0.0.1 that accepts and then does nothing (`hang`) or
// closes each connection at once.
class MuteServer {
 public:
  explicit MuteServer(bool hang) : acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    port_ = acceptor_.local_endpoint().port();
    accept(hang);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~MuteServer() {
    io_.stop();
    thread_.join();
  }
  uint16_t port() const { return port_; }
  int accepted() const { return accepted_; }

 private:
  void accept(bool hang) {
    acceptor_.async_accept([this, hang](const asio::error_code& ec, asio::ip::tcp::socket s) {
      if (ec) return;
      ++accepted_;
      if (hang)
        held_.push_back(std::move(s));
      else
        s.close();
      accept(hang);
    });
  }
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::vector<asio::ip::tcp::socket> held_;
  std::atomic<int> accepted_{0};
  uint16_t port_ = 0;
  std::thread thread_;
};

// TZ set to `tz` for one scope (the C library told to read it again, both
// ways). Use POSIX rules ("UTC0", "JST-9"): glibc and the Windows C runtime
// both read those; zone names such as "Asia/Tokyo" only glibc.
class ScopedTimeZone {
 public:
  explicit ScopedTimeZone(const char* tz) : env_(std::in_place, "TZ", tz) { reload(); }
  ~ScopedTimeZone() {
    env_.reset();
    reload();
  }
  ScopedTimeZone(const ScopedTimeZone&) = delete;
  ScopedTimeZone& operator=(const ScopedTimeZone&) = delete;

 private:
  static void reload() {
#ifdef _WIN32
    ::_tzset();
#else
    ::tzset();
#endif
  }
  std::optional<h2gate::testing::ScopedEnv> env_;
};

}  // namespace h2gate::pac::test
