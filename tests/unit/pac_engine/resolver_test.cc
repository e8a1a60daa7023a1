// The PAC functions' resolver (gateway/pac_engine/resolver.h): its cache, lookups
// shared by callers of one name, and what a DNS server that does not answer
// may cost: the lookups of one request are bounded, another request's still
// start at once.
#include "gateway/pac_engine/resolver.h"

#include <atomic>
#include <thread>

#include <catch2/catch.hpp>

#include "tests/unit/pac_engine/pac_test_util.h"

using namespace h2gate::pac;
using namespace h2gate::pac::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// Counts the lookups that reach "getaddrinfo()" and answers from a table.
struct CountingLookup {
  std::map<std::string, std::string> table;
  std::atomic<int> calls{0};
  SystemResolver::LookupFunction fn() {
    return [this](const std::string& host, bool) -> std::vector<h2gate::net::IpAddress> {
      ++calls;
      auto it = table.find(host);
      if (it == table.end()) return {};
      return {*h2gate::net::parseIp(it->second)};
    };
  }
};

}  // namespace

TEST_CASE("pac resolver: a dead DNS server holds at most per_owner threads of one request",
          "[pac][resolver][dns]") {
  DeadDns dns;
  SystemResolver::Options o;
  o.per_owner = 4;
  SystemResolver resolver(o, dns.lookup());
  // One request's PAC file asks for ten names that never answer, each
  // given up after 30 ms. The lookups go on (getaddrinfo() cannot be
  // cancelled), four of them; the other six are refused at once.
  for (int i = 0; i < 10; ++i)
    CHECK(resolver.resolve("n" + std::to_string(i) + ".dead", true, in(30ms), "loop.example")
              .empty());
  // A lookup thread may reach getaddrinfo() after its caller gave up (on a
  // loaded machine, later than 30 ms): wait for the four, then none more.
  for (int i = 0; i < 500 && dns.calls() < 4; ++i) std::this_thread::sleep_for(10ms);
  CHECK(dns.calls() == 4);
  // Four lookups and six refusals; on a loaded machine a lookup that no
  // thread took before its caller gave up is dropped from the queue and frees
  // its slot (resolver.cc), so a later name gets it: a lookup more and a
  // refusal less, yet still four calls that hold threads.
  SystemResolver::Stats s = resolver.stats();
  CHECK(s.lookups >= 4);
  CHECK(s.lookups + s.refused == 10);
  CHECK(s.timed_out == s.lookups);
  // Another request's lookup of a name in /etc/hosts starts at once: it
  // does not wait for the dead ones (which end only at release()), so it
  // answers well before its deadline.
  const auto start = Clock::now();
  const auto ips = resolver.resolve("inhosts.test", true, in(10s), "other.example");
  CHECK(Clock::now() - start < 5s);
  REQUIRE(ips.size() == 1);
  CHECK(ips[0].str() == "10.9.9.9");
  CHECK(dns.calls() == 4);
  // When the dead lookups end (and their threads have seen it), the first
  // request may ask again: a lookup of its starts.
  dns.release();
  const uint64_t lookups = resolver.stats().lookups;
  for (int i = 0; i < 500 && resolver.stats().lookups == lookups; ++i) {
    resolver.resolve("again" + std::to_string(i) + ".dead", true, in(30ms), "loop.example");
    if (resolver.stats().lookups == lookups) std::this_thread::sleep_for(10ms);
  }
  CHECK(resolver.stats().lookups == lookups + 1);
}

TEST_CASE("pac resolver: answers and failures are cached briefly; one name, one lookup",
          "[pac][resolver][dns]") {
  CountingLookup counting;
  counting.table["a.example"] = "10.0.0.1";
  SystemResolver::Options o;
  o.ttl = 400ms;
  o.negative_ttl = 200ms;
  SystemResolver resolver(o, counting.fn());
  CHECK(resolver.resolve("a.example", true, in(1s), "x").size() == 1);
  CHECK(resolver.resolve("A.EXAMPLE", true, in(1s), "y").size() == 1);  // names ignore case
  CHECK(resolver.resolve("nx.example", true, in(1s), "x").empty());
  CHECK(resolver.resolve("nx.example", true, in(1s), "x").empty());
  CHECK(counting.calls == 2);
  CHECK(resolver.stats().cache_hits == 2);
  // IPv4-only and any-family answers are kept apart.
  CHECK(resolver.resolve("a.example", false, in(1s), "x").size() == 1);
  CHECK(counting.calls == 3);
  // "Not found" is forgotten first.
  std::this_thread::sleep_for(250ms);
  CHECK(resolver.resolve("nx.example", true, in(1s), "x").empty());
  CHECK(resolver.resolve("a.example", true, in(1s), "x").size() == 1);
  CHECK(counting.calls == 4);
  // A network change forgets everything.
  resolver.networkChanged();
  CHECK(resolver.resolve("a.example", true, in(1s), "x").size() == 1);
  CHECK(counting.calls == 5);
  // Literals need no lookup.
  CHECK(resolver.resolve("192.0.2.1", true, in(1s), "x").size() == 1);
  CHECK(counting.calls == 5);
}

TEST_CASE("pac resolver: callers of a name under way share its lookup, and its late answer",
          "[pac][resolver][dns]") {
  DeadDns dns;
  SystemResolver resolver(SystemResolver::Options{}, dns.lookup());
  std::vector<std::thread> callers;
  std::atomic<int> empty{0};
  for (int i = 0; i < 6; ++i)
    callers.emplace_back([&, i] {
      if (resolver.resolve("slow.dead", true, in(200ms), "r" + std::to_string(i)).empty()) ++empty;
    });
  for (auto& t : callers) t.join();
  CHECK(empty == 6);
  CHECK(dns.calls() == 1);
  CHECK(resolver.stats().joined == 5);
  // While it is still under way, the next caller joins it again.
  CHECK(resolver.resolve("slow.dead", true, in(20ms), "r9").empty());
  CHECK(dns.calls() == 1);
  // Its answer (not found) arrives after everybody gave up: cached, so the
  // name is not looked up again.
  dns.release();
  for (int i = 0; i < 100 && resolver.stats().cache_hits == 0; ++i) {
    CHECK(resolver.resolve("slow.dead", true, in(1s), "r10").empty());
    std::this_thread::sleep_for(10ms);
  }
  CHECK(resolver.stats().cache_hits >= 1);
  CHECK(dns.calls() == 1);
}
