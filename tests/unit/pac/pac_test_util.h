// Helpers of the PAC unit tests: a resolver with a fixed table (and an
// optional delay, to act out a slow DNS server), a fixed clock, a way to
// evaluate one JavaScript expression in a PAC heap, a TCP server that
// never answers, and TZ set for one scope.
#pragma once

#include <chrono>
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

#include "filters/matcher.h"
#include "gateway/pac/pac_context.h"
#include "gateway/pac/resolver.h"
#include "tests/unit/config/test_util.h"

namespace h2gate::pac::test {

class TableResolver : public PacResolver {
 public:
  // "name" -> {"10.0.0.1", "2001:db8::1"}
  std::map<std::string, std::vector<std::string>> table;
  std::vector<std::string> local;
  std::chrono::milliseconds delay{0};  // each lookup takes this long (bounded by the deadline)
  bool ignore_deadline = false;        // ...or the whole delay, whatever the deadline

  std::vector<filters::IpAddress> resolve(const std::string& host, bool v4_only,
                                          Deadline deadline) override {
    {
      std::lock_guard lock(mutex_);
      ++lookups_;
      names_.push_back(host);
    }
    if (delay.count() > 0) {
      const auto end = std::chrono::steady_clock::now() + delay;
      const auto until = ignore_deadline ? end : std::min(deadline, end);
      // Until steady_clock says so: mingw's sleep_until can wake a little
      // early, and the caller checks the deadline against steady_clock.
      while (std::chrono::steady_clock::now() < until) std::this_thread::sleep_until(until);
      if (until == deadline) return {};
    }
    std::vector<filters::IpAddress> out;
    if (auto literal = filters::parseIp(host); literal && host.front() != '[') {
      if (!(v4_only && literal->v6)) out.push_back(*literal);
      return out;
    }
    auto it = table.find(host);
    if (it == table.end()) return out;
    for (const std::string& s : it->second) {
      filters::IpAddress ip = *filters::parseIp(s);
      if (!(v4_only && ip.v6)) out.push_back(ip);
    }
    return out;
  }
  std::vector<filters::IpAddress> localAddresses(Deadline) override {
    std::vector<filters::IpAddress> out;
    for (const std::string& s : local) out.push_back(*filters::parseIp(s));
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

 private:
  mutable std::mutex mutex_;
  int lookups_ = 0;
  std::vector<std::string> names_;
};

// 2024-03-15 10:30:00 UTC, a Friday.
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
