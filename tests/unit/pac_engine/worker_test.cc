// One PAC worker process seen from the evaluator's side
// (gateway/pac_engine/worker.h), this test binary being the worker
// (tests/unit/unit_main.cc): a file loads and answers in another process,
// the script's DNS questions, alert() and Date come back to the caller's
// environment, a native function that does not stop is killed at its
// deadline, and a load that fails keeps the file that worked.
#include "gateway/pac_engine/worker.h"

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/unit/pac_engine/pac_test_util.h"

using namespace h2gate::pac;
using namespace h2gate::pac::test;
using namespace std::chrono_literals;

namespace {

const char* kPac =
    "function FindProxyForURL(url, host) {\n"
    "  alert('asked for ' + host);\n"
    "  return 'PROXY ' + dnsResolve(host) + ':3128; DIRECT # ' + new Date().getTime();\n"
    "}";

struct Env {
  Env() {
    resolver->table["a.test"] = {"10.1.2.3"};
    env.resolver = resolver;
    env.heap_limit = 16u << 20;
    env.dns_timeout = 300ms;
    env.clock = [] { return kFriday1030Utc; };
    env.alert = [this](std::string_view m) {
      std::lock_guard lock(mutex);
      alerts.emplace_back(m);
    };
  }
  std::shared_ptr<TableResolver> resolver = std::make_shared<TableResolver>();
  PacEnvironment env;
  std::mutex mutex;
  std::vector<std::string> alerts;
};

}  // namespace

TEST_CASE(
    "pac worker: a file loads and answers in its own process, DNS, alert and Date "
    "answered here",
    "[pac][worker]") {
  Env e;
  PacWorker w(e.env, "worker_test");
  CHECK_FALSE(w.running());
  REQUIRE(w.load(kPac, "w.pac", in(20000ms)).ok());
  REQUIRE(w.running());
  CHECK(w.pid() != 0);
  const RawAnswer a = w.findProxy("http://a.test/", "a.test", in(20000ms));
  INFO(a.error.message);
  CHECK(a.error.ok());
  CHECK(a.text == "PROXY 10.1.2.3:3128; DIRECT # 1710498600000");
  CHECK(e.resolver->lookups() == 1);
  CHECK(e.resolver->owners() == std::vector<std::string>{"a.test"});
  std::lock_guard lock(e.mutex);
  CHECK(e.alerts == std::vector<std::string>{"asked for a.test"});
}

TEST_CASE("pac worker: a load that fails keeps the file that worked", "[pac][worker]") {
  Env e;
  PacWorker w(e.env, "worker_test");
  REQUIRE(w.load("function FindProxyForURL(u, h) { return 'DIRECT'; }", "a.pac", in(20000ms)).ok());
  const long pid = w.pid();
  const PacError bad = w.load("function FindProxyForURL(u, h) {", "b.pac", in(20000ms));
  CHECK(bad.kind == PacError::Kind::Syntax);
  CHECK(w.pid() == pid);  // the same process
  CHECK(w.findProxy("http://x/", "x", in(20000ms)).text == "DIRECT");
}

TEST_CASE("pac worker: a native function past the deadline: killed, Timeout, then a fresh one",
          "[pac][worker]") {
  Env e;
  PacWorker w(e.env, "worker_test");
  // indexOf over two billion array-like slots runs minutes in one native
  // call: Duktape's interrupt never comes; only killing the process helps.
  REQUIRE(w.load("function FindProxyForURL(u, h) {\n"
                 "  if (h == 'slow') Array.prototype.indexOf.call({length: 2147483647}, 1);\n"
                 "  return 'DIRECT';\n"
                 "}",
                 "slow.pac", in(20000ms))
              .ok());
  const long first = w.pid();
  const auto start = std::chrono::steady_clock::now();
  const RawAnswer a = w.findProxy("http://slow/", "slow", in(300ms));
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(a.error.kind == PacError::Kind::Timeout);
  CHECK(took < 300ms + kKillGrace + 3s);
  CHECK(w.timedOutKills() == 1);
  CHECK_FALSE(w.running());
  CHECK(w.findProxy("http://x/", "x", in(20000ms)).error.kind == PacError::Kind::NoScript);
  // The next load starts another process, which answers.
  REQUIRE(w.load("function FindProxyForURL(u, h) { return 'DIRECT'; }", "a.pac", in(20000ms)).ok());
  CHECK(w.pid() != first);
  CHECK(w.findProxy("http://x/", "x", in(20000ms)).text == "DIRECT");
}

TEST_CASE("pac worker: after shutdown every call answers Shutdown and starts nothing",
          "[pac][worker]") {
  Env e;
  PacWorker w(e.env, "worker_test");
  REQUIRE(w.load("function FindProxyForURL(u, h) { return 'DIRECT'; }", "a.pac", in(20000ms)).ok());
  w.shutdown();
  CHECK(w.findProxy("http://x/", "x", in(20000ms)).error.kind == PacError::Kind::Shutdown);
  CHECK(w.load("function FindProxyForURL(u, h) { return 'DIRECT'; }", "a.pac", in(20000ms)).kind ==
        PacError::Kind::Shutdown);
  CHECK_FALSE(w.running());
}
