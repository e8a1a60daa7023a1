// The admin endpoint against what a hostile web page or app can send: a
// cross-site POST /reload, DNS rebinding (a foreign Host), and requests to
// the admin port or a proxy port through the proxy listener itself. Also
// its accept loop when the process is out of file descriptors.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/h2_env.h"
#include "tests/support/h2gate.h"
#include "tests/support/net.h"
#include "tests/support/origin.h"
#include "tests/support/scrape.h"
#include "tests/support/upstream_proxies.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

double reloads(uint16_t admin, const std::string& result) {
  return scrapeMetrics(admin).sum("h2gate_config_reloads_total", {{"result", result}});
}

// The status curl (a real client) gets for `url` through h2gate's proxy
// listener, as text ("200").
std::string statusThrough(const H2gate& gate, const std::string& url) {
  return runCurl({"-sS", "-x", gate.proxyUrl(), "-o", "/dev/null", "-w", "%{http_code}", url}).out;
}

H2gate::Options options(const std::string& listener_fields = "",
                        const std::string& admin_fields = "") {
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  std::string yaml = directModeYaml("", listener_fields);
  if (!admin_fields.empty()) {
    const std::string key = "    socket_address: {address: 127.0.0.1, port_value: 0}\n";
    const size_t at = yaml.find(key);
    REQUIRE(at != std::string::npos);
    yaml.insert(at + key.size(), admin_fields);
  }
  o.yaml = yaml;
  o.args = {"--log-level", "debug"};
  return o;
}

// One request as raw bytes (forms curl normalises away), its status.
HttpResponse rawRequest(uint16_t port, const std::string& request, bool head_only) {
  RawConnection c(port);
  REQUIRE(c.send(request));
  return c.readResponse(milliseconds(10000), head_only);
}

}  // namespace

TEST_CASE(
    "admin: a web page's cross-site POST /reload is refused; deploy/README.md's curl line works",
    "[admin][reload]") {
  H2gate gate(options());
  const uint16_t admin = gate.adminPort();

  // What a page on http://evil.example makes the browser send: a "simple"
  // request, no preflight.
  AdminReply r = adminRequest(
      "POST", admin, "/reload",
      {"Content-Type: text/plain", "Origin: http://evil.example", "Sec-Fetch-Site: cross-site"});
  CHECK(r.status == 403);
  CHECK(r.body.find("Origin 'http://evil.example'") != std::string::npos);
  // The same without Origin and Sec-Fetch-Site (an older browser, a form).
  r = adminRequest("POST", admin, "/reload", {"Content-Type: text/plain"});
  CHECK(r.status == 403);
  CHECK(r.body.find("POST needs the header X-H2gate-Admin: 1") != std::string::npos);
  CHECK(reloads(admin, "success") == 0);
  CHECK(reloads(admin, "failure") == 0);
  CHECK(gate.process().stderrText().find("reloading the configuration") == std::string::npos);

  // curl -X POST -H 'X-H2gate-Admin: 1' http://127.0.0.1:9901/reload
  r = adminRequest("POST", admin, "/reload", {"X-H2gate-Admin: 1"});
  CHECK(r.status == 200);
  CHECK(r.body.find("reloaded ") == 0);
  CHECK(reloads(admin, "success") == 1);

  // Refusals are logged, at most one line per 10 s.
  for (int i = 0; i < 5; ++i) adminRequest("POST", admin, "/reload", {});
  CHECK(countOccurrences(gate.process().stderrText(), "admin: refused a request") == 1);
}

TEST_CASE("admin: DNS rebinding (a foreign Host) cannot read it; allowed_hosts can",
          "[admin][reload]") {
  H2gate gate(options());
  const uint16_t admin = gate.adminPort();
  const std::string rebound = "evil.example:" + str(admin);
  for (const char* path : {"/config_dump", "/clusters", "/metrics", "/server_info", "/"}) {
    INFO(path);
    // A page at http://evil.example:PORT whose name now resolves to 127.0.0.1.
    const CommandResult c = runCurl({"-sS", "--resolve", rebound + ":127.0.0.1", "-w",
                                     "\n%{http_code}", "http://" + rebound + path});
    CHECK(c.out.ends_with("\n403"));
    CHECK(c.out.find("is not this admin endpoint's address") != std::string::npos);
    CHECK(c.out.find("static_resources") == std::string::npos);
  }
  CHECK(adminGet(admin, "/config_dump").status == 200);
  CHECK(adminRequest("GET", admin, "/healthz", {"Host: localhost:" + str(admin)}).status == 200);

  // A name monitoring uses: admin.allowed_hosts, which a reload applies.
  std::string yaml = directModeYaml();
  const std::string key = "    socket_address: {address: 127.0.0.1, port_value: 0}\n";
  yaml.insert(yaml.find(key) + key.size(), "  allowed_hosts: [h2gate.test]\n");
  gate.writeFile("h2gate.yaml", yaml);
  REQUIRE(adminPost(admin, "/reload").status == 200);
  const CommandResult named =
      runCurl({"-sS", "--resolve", "h2gate.test:" + str(admin) + ":127.0.0.1", "-w",
               "\n%{http_code}", "http://h2gate.test:" + str(admin) + "/config_dump"});
  CHECK(named.out.ends_with("\n200"));
  CHECK(named.out.find("allowed_hosts: [h2gate.test]") != std::string::npos);
}

TEST_CASE("the proxy does not carry apps to h2gate's own admin endpoint or listeners",
          "[admin][listener]") {
  Nginx nginx;
  H2gate gate(options());
  const uint16_t admin = gate.adminPort();
  const uint16_t proxy = gate.port();
  const std::string a = str(admin);

  // curl through the proxy (a real client), to an origin: fine.
  CHECK(statusThrough(gate, nginx.httpUrl("/1k")) == "200");
  // To the admin endpoint: 403, and why.
  CommandResult c = runCurl(
      {"-sS", "-x", gate.proxyUrl(), "-w", "\n%{http_code}", "http://127.0.0.1:" + a + "/healthz"});
  CHECK(c.out.ends_with("\n403"));
  CHECK(c.out.find("is h2gate's own admin endpoint") != std::string::npos);
  CHECK(c.out.find("deny_own_addresses: false allows it") != std::string::npos);

  // Every spelling of the address, both forms. Standard ones get this
  // filter's 403; the numeric oddities may be refused by the request parser
  // (400) instead: either way the admin endpoint is not reached.
  struct Case {
    std::string host;
    bool standard;
  };
  const std::vector<Case> cases = {
      {"127.0.0.1", true},   {"localhost", true},
      {"LOCALHOST.", true},  {"[::ffff:127.0.0.1]", false},
      {"0x7f000001", false}, {"2130706433", false},
      {"127.1", false},      {"0177.0.0.1", false},
      {"0x7f.0.0.1", false}, {"0.0.0.0", false},
      {"0", false},
  };
  for (const Case& k : cases) {
    for (bool connect : {true, false}) {
      INFO(k.host << (connect ? " CONNECT" : " absolute-form"));
      const std::string authority = k.host + ":" + a;
      const HttpResponse r = rawRequest(
          proxy,
          connect ? "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n"
                  : "GET http://" + authority + "/healthz HTTP/1.1\r\nHost: " + authority +
                        "\r\nConnection: close\r\n\r\n",
          false);  // a refused CONNECT has a body
      if (k.standard) {
        CHECK(r.status == 403);
        CHECK(r.body.find("h2gate's own admin endpoint") != std::string::npos);
      } else {
        CHECK((r.status == 403 || r.status == 400));
      }
      CHECK(r.body.find("OK") == std::string::npos);
    }
  }
  // The proxy port itself: a loop.
  const HttpResponse loop = rawRequest(
      proxy,
      "CONNECT 127.0.0.1:" + str(proxy) + " HTTP/1.1\r\nHost: 127.0.0.1:" + str(proxy) + "\r\n\r\n",
      false);
  CHECK(loop.status == 403);
  CHECK(loop.body.find("the request would loop back into h2gate") != std::string::npos);
  const auto log = gate.waitForAccessLog(1 + 2 * cases.size() + 2);
  REQUIRE(log.size() >= 3);
  CHECK(log[1].get("result") == "rejected");
}

TEST_CASE("direct mode: a name that resolves to h2gate's own address is refused too",
          "[admin][listener]") {
  if (::geteuid() != 0) {
    WARN("skipped: needs root (an /etc/hosts of its own for h2gate: unshare -m)");
    return;
  }
  H2gate::Options o = options();
  o.hosts = "127.0.0.1 rebound.test\n";
  H2gate gate(std::move(o));
  const std::string a = str(gate.adminPort());
  for (bool connect : {true, false}) {
    INFO((connect ? "CONNECT" : "absolute-form"));
    const std::string authority = "rebound.test:" + a;
    const HttpResponse r =
        rawRequest(gate.port(),
                   connect ? "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n"
                           : "GET http://" + authority + "/healthz HTTP/1.1\r\nHost: " + authority +
                                 "\r\nConnection: close\r\n\r\n",
                   false);
    CHECK(r.status == 403);
    CHECK(r.body.find("destination rebound.test:" + a +
                      " (127.0.0.1) is h2gate's own admin endpoint") != std::string::npos);
  }
}

TEST_CASE("deny_own_addresses: false lets the proxy reach the admin endpoint",
          "[admin][listener]") {
  H2gate gate(options("    deny_own_addresses: false\n"));
  const CommandResult c = runCurl({"-sS", "-x", gate.proxyUrl(), "-w", "\n%{http_code}",
                                   "http://127.0.0.1:" + str(gate.adminPort()) + "/healthz"});
  CHECK(c.out == "OK\n\n200");
}

namespace {

// utime + stime of every thread of `pid`, in clock ticks, by thread id.
std::map<std::string, long> threadTicks(pid_t pid) {
  std::map<std::string, long> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(dir + "/" + e->d_name + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::vector<std::string> f;
    for (std::string x; fields >> x;) f.push_back(x);
    // Fields 14 and 15 (utime, stime); f[0] is field 3.
    if (f.size() > 12) out[e->d_name] = std::stol(f[11]) + std::stol(f[12]);
  }
  closedir(d);
  return out;
}

int openFds(pid_t pid) {
  int n = 0;
  DIR* d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (!d) return -1;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}

}  // namespace

TEST_CASE("out of file descriptors, no listener spins: accept backs off, warns once",
          "[admin][listener]") {
  // In the ASan+UBSan build, UBSan checks a polymorphic object's type the
  // first time it meets that (vtable, type) pair by reading the vtable
  // through a pipe(); once seen, the pair is cached. With no descriptor left
  // the pipe fails, UBSan cannot read the vtable and reports "invalid vptr"
  // for a sound object (a DownstreamConnection under construction, an
  // error_category); no suppression applies, as the type has no name it
  // could read. So before the descriptors run out, this h2gate meets every
  // type the idle connections below will touch: a proxied request served, one
  // refused (an error code's category), a connection opened and closed.
  H2gate gate(options());
  const pid_t pid = gate.process().pid();
  const uint16_t admin = gate.adminPort();
  REQUIRE(adminGet(admin, "/healthz").status == 200);
  Nginx nginx;
  REQUIRE(statusThrough(gate, nginx.httpUrl("/1k")) == "200");
  {
    RefusingPort refused;
    REQUIRE(statusThrough(gate, "http://127.0.0.1:" + std::to_string(refused.port()) + "/") ==
            "502");
  }
  {
    RawConnection warm(gate.port());
    warm.send("GET / HTTP/1.1\r\n\r\n");
    CHECK(warm.readResponse().status != 0);
  }

  // A few descriptors left, then taken by idle connections (an admin
  // connection waits 10 s for its request; a proxy one as long); the rest
  // wait in the listen queues, and every accept() fails with EMFILE.
  const int used = openFds(pid);
  REQUIRE(used > 0);
  // The soft limit only: raising the hard one back may need
  // CAP_SYS_RESOURCE.
  rlimit old{};
  REQUIRE(prlimit(pid, RLIMIT_NOFILE, nullptr, &old) == 0);
  rlimit limit{static_cast<rlim_t>(used + 3), old.rlim_max};
  REQUIRE(prlimit(pid, RLIMIT_NOFILE, &limit, nullptr) == 0);
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 8; ++i) {
    idle.push_back(std::make_unique<RawConnection>(admin));
    idle.push_back(std::make_unique<RawConnection>(gate.port()));
  }
  REQUIRE(
      gate.process().waitForLog("admin: accept failed: Too many open files", milliseconds(5000)));
  REQUIRE(gate.process().waitForLog("accept on listener local_proxy failed: Too many open files",
                                    milliseconds(5000)));

  const auto before = threadTicks(pid);
  const size_t warnings_before =
      countOccurrences(gate.process().stderrText(), "accept failed") +
      countOccurrences(gate.process().stderrText(), "accept on listener local_proxy failed");
  std::this_thread::sleep_for(milliseconds(2000));
  const auto after = threadTicks(pid);
  const long hz = sysconf(_SC_CLK_TCK);
  REQUIRE(!before.empty());
  for (const auto& [tid, ticks] : after) {
    const auto b = before.find(tid);
    if (b == before.end()) continue;
    const double seconds = static_cast<double>(ticks - b->second) / static_cast<double>(hz);
    std::cout << "[figures] EMFILE: thread " << tid
              << (tid == std::to_string(pid) ? " (main: admin)" : "") << " used " << seconds
              << " s CPU in 2 s (" << seconds / 2 * 100 << "%)\n";
    CHECK(seconds < 0.2);  // < 10% of one core
  }
  // No new warning within the 10 s interval, though ~20 accepts failed.
  CHECK(
      countOccurrences(gate.process().stderrText(), "accept failed") +
          countOccurrences(gate.process().stderrText(), "accept on listener local_proxy failed") ==
      warnings_before);

  // Descriptors back: both listeners serve again.
  REQUIRE(prlimit(pid, RLIMIT_NOFILE, &old, nullptr) == 0);
  idle.clear();
  CHECK(adminGet(admin, "/healthz").status == 200);
  CHECK(statusThrough(gate, nginx.httpUrl("/1k")) == "200");
}
