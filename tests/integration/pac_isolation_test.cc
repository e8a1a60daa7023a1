// What a PAC file cannot do to h2gate (tests/support/pac_env.h):
//  - run a native function for minutes (Array.prototype.indexOf over an
//    array-like of length 2^31 - 1, which never reaches the interpreter's
//    deadline check): the request gets the fallback at its deadline, the
//    CPU is free again right after, POST /reload and GET /config_dump
//    answer while two such calls run, and SIGTERM ends h2gate within its
//    drain time while they run [pac_native];
//  - starve the DNS lookups of other requests by looping over dnsResolve()
//    with a DNS server that does not answer (on loopback, in a network
//    namespace): another request's isResolvable() of a name in /etc/hosts
//    still says true, so its route does not change [pac_dns].
// [pac_routing]
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/netns.h"
#include "tests/support/pac_env.h"
#include "tests/support/scrape.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

// Two requests at once for hosts whose evaluation runs a native function
// for minutes (two hosts: one evaluation per host is shared): both PAC
// worker processes busy.
std::vector<std::unique_ptr<Process>> twoNativeRequests(PacEnv& env, const std::string& tag) {
  std::vector<std::unique_ptr<Process>> out;
  for (int i = 0; i < 2; ++i)
    out.push_back(
        startCurl({"-sS", "-o", "/dev/null", "-w", "%{http_code}", "-x", env.gate->proxyUrl(),
                   "--max-time", "60", "http://native" + std::to_string(i) + ".test/" + tag},
                  env.out.path().string(), tag + std::to_string(i)));
  return out;
}

// The worker processes h2gate runs now.
std::vector<pid_t> workers(pid_t gate) {
  std::vector<pid_t> out;
  for (pid_t p : descendants(gate))
    if (commandLine(p).find("--pac-worker") != std::string::npos) out.push_back(p);
  return out;
}

// A "DNS server" on 127.0.0.1:53 (UDP) that reads every query and answers
// none, counting them.
class MuteDnsServer {
 public:
  MuteDnsServer() {
    fd_ = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(53);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    timeval tv{0, 100000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    thread_ = std::thread([this] {
      char buf[1500];
      while (!stop_)
        if (::recv(fd_, buf, sizeof buf, 0) > 0) ++queries_;
    });
  }
  ~MuteDnsServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  int queries() const { return queries_; }

 private:
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> queries_{0};
  std::thread thread_;
};

}  // namespace

TEST_CASE(
    "pac native: a native function past the deadline is stopped; reload and SIGTERM "
    "do not wait for it",
    "[pac_routing][pac_native]") {
  if (!haveMountNamespaces()) FAIL("needs root for a private /etc/hosts (unshare -m)");
  PacEnv env;
  // indexOf looks up 2^31 - 1 properties in one native call: about four
  // minutes of one core, no bytecode, so no deadline check on the way.
  const std::string pac =
      env.writePac("native.pac",
                   "function FindProxyForURL(url, host) {\n"
                   "  if (host.indexOf(\"native\") == 0)\n"
                   "    return String(Array.prototype.indexOf.call({length: 2147483647}, 1));\n"
                   "  return \"DIRECT\";\n"
                   "}\n");
  auto listener = [&](const std::string& timeout) {
    return PacEnv::listener("local_proxy", "              file: " + pac +
                                               "\n"
                                               "              evaluation: {timeout: " +
                                               timeout +
                                               "}\n"
                                               "              fallback: {reject: 503}\n");
  };
  H2gate& gate = env.start(listener("2s"), {"local_proxy"}, [](H2gate::Options& o) {
    o.yaml = "h2gate:\n  drain_timeout: 3s\n" + o.yaml;
    o.check_clean_exit = false;  // checked here, with its time
  });
  INFO(gate.process().logTail(60));
  REQUIRE(gate.process().waitForLog("using the PAC file from", kPacLoadTimeout));
  const pid_t pid = gate.process().pid();

  SECTION("the requests get the fallback at the deadline, and the CPU is free right after") {
    const auto start = Clock::now();
    auto requests = twoNativeRequests(env, "a");
    for (auto& r : requests) {
      const auto st = r->wait(milliseconds(20000));
      REQUIRE(st);
      CHECK(st->exited);
      CHECK(readFile(r->stdoutPath()) == "503");
    }
    const double took = std::chrono::duration<double>(Clock::now() - start).count();
    INFO("both answered after " << took << " s");
    CHECK(took < 5);  // 2 s deadline, the workers killed 0.2 s later
    // Nothing computes any more: two cores would give ~4 s here before.
    std::this_thread::sleep_for(milliseconds(1000));
    const double cpu0 = treeCpuSeconds(pid);
    std::this_thread::sleep_for(milliseconds(2000));
    const double cpu = treeCpuSeconds(pid) - cpu0;
    INFO("CPU of h2gate and its workers over 2 s: " << cpu << " s");
    CHECK(cpu < 0.5);
    const Scrape m = scrapeMetrics(gate.adminPort());
    CHECK(m.sum("h2gate_pac_timeouts_total", {}) >= 2);
    CHECK(countOccurrences(gate.stderrText(), "its worker process was killed") >= 1);
    // Other requests are answered as before (new workers, same file).
    CHECK(env.fetch("", env.url("web.internal.test", false, "/1m?after"), "after"));
    CHECK(gate.terminate(milliseconds(10000)).exited);
  }

  SECTION("POST /reload and GET /config_dump answer while two such calls run") {
    auto requests = twoNativeRequests(env, "b");
    std::this_thread::sleep_for(milliseconds(700));  // both workers deep in indexOf
    const std::vector<pid_t> busy = workers(pid);
    CHECK(busy.size() == 2);
    gate.writeFile("h2gate.yaml", "h2gate:\n  drain_timeout: 3s\n" + PacEnv::yaml(listener("3s")));
    const AdminReply reload = adminPost(gate.adminPort(), "/reload", milliseconds(5000));
    INFO(reload.body);
    CHECK(reload.status == 200);
    REQUIRE(gate.process().waitForLog("configuration reloaded from", milliseconds(5000)));
    // The two requests keep the old route until they are answered, at
    // their deadline; the server's config thread frees it at its next
    // sweep of retired configs (each second), which stops its evaluator
    // (and once waited there for the calls to return, minutes).
    for (auto& r : requests) {
      const auto st = r->wait(milliseconds(20000));
      REQUIRE(st);
      CHECK(st->exited);
      CHECK(readFile(r->stdoutPath()) == "503");
    }
    CHECK(gate.process().waitForLog("routes\\[0\\]: evaluator stopped", milliseconds(3000)));
    std::this_thread::sleep_for(milliseconds(500));
    const AdminReply dump = adminGet(gate.adminPort(), "/config_dump", milliseconds(3000));
    CHECK(dump.status == 200);
    CHECK(dump.seconds < 2);
    // The busy workers of the first route are gone.
    for (pid_t w : busy) CHECK(commandLine(w).find("--pac-worker") == std::string::npos);
    // A second reload answers too; the route it replaces goes with its
    // workers, and the new route's two run.
    const std::vector<pid_t> second = workers(pid);
    gate.writeFile("h2gate.yaml", "h2gate:\n  drain_timeout: 3s\n" + PacEnv::yaml(listener("2s")));
    CHECK(adminPost(gate.adminPort(), "/reload", milliseconds(5000)).status == 200);
    auto settled = [&] {
      for (pid_t w : second)
        if (commandLine(w).find("--pac-worker") != std::string::npos) return false;
      return workers(pid).size() == 2;
    };
    for (int i = 0; i < 50 && !settled(); ++i) std::this_thread::sleep_for(milliseconds(100));
    CHECK(settled());
    CHECK(gate.terminate(milliseconds(10000)).exited);
  }

  SECTION("SIGTERM ends h2gate within its drain time while two such calls run") {
    auto requests = twoNativeRequests(env, "c");
    std::this_thread::sleep_for(milliseconds(700));
    const std::vector<pid_t> busy = workers(pid);
    CHECK(busy.size() == 2);
    const auto start = Clock::now();
    const ExitStatus st = gate.terminate(milliseconds(30000));
    const double took = std::chrono::duration<double>(Clock::now() - start).count();
    INFO("exit " << st.str() << " after " << took << " s");
    CHECK(st.exited);
    CHECK(st.code == 0);
    CHECK(took < 3 + 1.5);  // drain_timeout: 3s
    // No worker outlives h2gate.
    std::this_thread::sleep_for(milliseconds(300));
    for (pid_t w : busy) CHECK(commandLine(w).find("--pac-worker") == std::string::npos);
  }
}

TEST_CASE(
    "pac dns: a request whose PAC loops over a DNS server that does not answer does not "
    "change another request's answer",
    "[pac_routing][pac_dns]") {
  std::string why;
  if (!haveNetns(&why)) FAIL(why);
  if (!haveMountNamespaces()) FAIL("needs root for a private /etc/hosts (unshare -m)");
  InNetns ns("pacdns");
  REQUIRE(ns.error() == "");
  MuteDnsServer dns;
  // The fixture, proven with bind's `host` first: a query to it times out.
  const CommandResult probe = runCommand(
      {"host", "-W", "1", "-R", "1", "probe.dead.test", "127.0.0.1"}, milliseconds(10000));
  INFO("host: exit " << probe.exit_code << " out " << probe.out << " err " << probe.err);
  CHECK(probe.exit_code != 0);
  CHECK((probe.out + probe.err).find("timed out") != std::string::npos);
  CHECK(dns.queries() >= 1);

  PacEnv env;
  // Other requests: DIRECT when inhosts.test (in /etc/hosts) resolves, else
  // a proxy where nothing listens (502: the route changed).
  const std::string pac =
      env.writePac("dns.pac",
                   "function FindProxyForURL(url, host) {\n"
                   "  if (host.indexOf(\"loop\") == 0) {\n"
                   "    for (var i = 0; ; i++) dnsResolve(\"n\" + i + \".dead.test\");\n"
                   "  }\n"
                   "  return isResolvable(\"inhosts.test\") ? \"DIRECT\" : \"PROXY 127.0.0.1:9\";\n"
                   "}\n");
  H2gate& gate = env.start(
      PacEnv::listener("local_proxy", "              file: " + pac +
                                          "\n"
                                          "              evaluation: {timeout: 4s, dns_timeout: "
                                          "300ms, cache_entries: 0}\n"
                                          "              fallback: {reject: 503}\n"),
      {"local_proxy"},
      [](H2gate::Options& o) {
        o.resolv_conf = "nameserver 127.0.0.1\noptions timeout:5 attempts:2\n";
      },
      "127.0.0.1 web.internal.test\n127.0.0.1 inhosts.test\n");
  INFO(gate.process().logTail(60));
  REQUIRE(gate.process().waitForLog("using the PAC file from", kPacLoadTimeout));
  CHECK(env.fetch("", env.url("web.internal.test", false, "/1m?before"), "before"));

  // Three requests (three hosts: three evaluations) whose evaluations loop
  // over names the DNS server never answers, a lookup given up every
  // 300 ms; each gets the fallback at its deadline. 4 s: room for the fifth
  // lookup of each (the one refused while 4 are under way) on a loaded machine.
  std::vector<std::unique_ptr<Process>> loops;
  for (int i = 0; i < 3; ++i)
    loops.push_back(
        startCurl({"-sS", "-o", "/dev/null", "-w", "%{http_code}", "-x", gate.proxyUrl(),
                   "--max-time", "30", "http://loop" + std::to_string(i) + ".test/"},
                  env.out.path().string(), "loop" + std::to_string(i)));
  for (auto& l : loops) {
    const auto st = l->wait(milliseconds(20000));
    REQUIRE(st);
    CHECK(readFile(l->stdoutPath()) == "503");
  }
  // Their lookups still wait for the DNS server (glibc: 5 s, twice).
  CHECK(dns.queries() >= 3);
  // Another request: its isResolvable("inhosts.test") still answers true.
  CHECK(env.fetch("", env.url("web.internal.test", false, "/1m?after"), "after"));
  const auto log = gate.waitForAccessLog(2, milliseconds(5000));
  bool direct_after = false;
  for (const auto& e : log)
    if (e.get("path").find("after") != std::string::npos ||
        e.line.find("after") != std::string::npos)
      direct_after = e.get("protocol") == "direct";
  CHECK(direct_after);
  CHECK(gate.stderrText().find("of its lookups are still under way") != std::string::npos);
}
