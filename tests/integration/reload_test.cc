// Hot reload of the configuration (SIGHUP, POST /reload) against real peers:
// a cluster moved to another nghttpx while a tunnel through the first one
// is still open, broken configs rejected as a whole, listeners added and
// removed, and a process started from flags that has nothing to reload.
#include <catch2/catch.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/h2_env.h"
#include "tests/support/net.h"
#include "tests/support/origin.h"
#include "tests/support/scrape.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

double reloads(uint16_t admin, const std::string& result) {
  return scrapeMetrics(admin).sum("h2gate_config_reloads_total", {{"result", result}});
}

bool pollUntil(const std::function<bool()>& pred, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(50));
  }
}

// The port a listener bound after start (a reload), from h2gate's log.
uint16_t reloadedPort(H2gate& gate, const std::string& listener) {
  auto m = gate.process().waitForLog(
      "listening on 127\\.0\\.0\\.1:([0-9]+) \\(listener " + listener + "\\)", milliseconds(5000));
  INFO(gate.process().logTail());
  REQUIRE(m);
  return static_cast<uint16_t>(std::stoi((*m)[1]));
}

// Direct mode: admin on 127.0.0.1:0, one listener per entry of `listeners`
// ("name" or "name:port"), each with access_log + forward_proxy.
std::string directYaml(const std::vector<std::string>& listeners,
                       const std::string& h2gate_section = "") {
  std::string y;
  if (!h2gate_section.empty()) y += "h2gate:\n" + h2gate_section;
  y += "admin:\n"
       "  address:\n"
       "    socket_address: {address: 127.0.0.1, port_value: 0}\n"
       "static_resources:\n"
       "  listeners:\n";
  for (const std::string& l : listeners) {
    const size_t colon = l.find(':');
    const std::string name = l.substr(0, colon);
    const std::string port = colon == std::string::npos ? "0" : l.substr(colon + 1);
    y += "  - name: " + name +
         "\n"
         "    address:\n"
         "      socket_address: {address: 127.0.0.1, port_value: " +
         port +
         "}\n"
         "    filter_chains:\n"
         "    - filters:\n"
         "      - name: h2gate.filters.access_log\n"
         "      - name: h2gate.filters.forward_proxy\n";
  }
  return y;
}

H2gate::Options reloadGateOptions(std::string yaml, std::vector<std::string> listeners = {}) {
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  o.yaml = std::move(yaml);
  o.args = {"--log-level", "debug"};
  o.listeners = std::move(listeners);
  return o;
}

CommandResult fetch(const std::string& proxy, const std::string& url) {
  return runCurl(
      {"-sS", "-x", proxy, "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "20", url},
      milliseconds(25000));
}

}  // namespace

TEST_CASE("reload: SIGHUP moves a cluster to another proxy; open tunnels stay on the old one",
          "[reload][upstream]") {
  H2Env env;
  H2gate& gate = env.startGateYaml({});
  const uint16_t admin = gate.adminPort();
  Nghttpx second(H2Env::nghttpxOptions(env.options, env.ca, env.squid.httpPort()));

  // 10 MiB at 2 MiB/s: about 5 s through the first proxy.
  const TestFile& f = testFile("10m");
  const std::string long_out = env.out.file("long");
  auto slow = startCurl({"-sS", "-x", gate.proxyUrl(), "--cacert", env.ca.caCertPath(),
                         "--limit-rate", "2M", "-o", long_out, env.nginx.httpsUrl("/10m")},
                        env.out.path().string(), "long");
  REQUIRE(waitForFileSize(long_out, 512 * 1024, milliseconds(10000)));

  gate.writeFile("h2gate.yaml", upstreamModeYaml(second.port(), env.ca.caCertPath()));
  gate.process().signalMain(SIGHUP);
  INFO(gate.process().logTail(30));
  REQUIRE(gate.process().waitForLog("configuration reloaded from .*clusters: 1 changed \\(proxy\\)",
                                    milliseconds(5000)));
  REQUIRE(gate.process().waitForLog(
      "proxy 127\\.0\\.0\\.1:" + str(second.port()) + " negotiated h2", milliseconds(10000)));
  CHECK(slow->running());  // the reload did not cut it

  // New tunnels go to the second proxy.
  for (int i = 0; i < 3; ++i) {
    auto r = env.curl({"-o", "/dev/null", "-w", "%{http_code}", env.nginx.httpsUrl("/1m")});
    INFO(r.err);
    CHECK(r.out == "200");
  }
  CHECK(second.waitForAccessLines(3, "CONNECT", milliseconds(5000)).size() == 3);

  // The old tunnel finishes, byte-identical, through the first proxy.
  const auto st = slow->wait(milliseconds(60000));
  REQUIRE(st);
  CHECK(st->exited);
  CHECK(st->code == 0);
  CHECK(sha256File(long_out) == f.sha256);
  const auto first_lines = env.nghttpx.waitForAccessLines(1, "CONNECT", milliseconds(5000));
  REQUIRE(first_lines.size() == 1);
  CHECK(first_lines[0].find(" 200") != std::string::npos);
  CHECK(second.accessLines("CONNECT").size() == 3);
  // With its last stream gone, the replaced pool closes its connection to
  // the old proxy; the new one stays.
  CHECK(pollUntil([&] { return establishedTo(env.nghttpx.port()) == 0; }, milliseconds(5000)));
  CHECK(establishedTo(second.port()) == 1);

  // /clusters and endpoint health describe the new proxy only.
  const AdminReply clusters = adminGet(admin, "/clusters");
  CHECK(clusters.body.find(":" + str(second.port()) + " state=up") != std::string::npos);
  CHECK(clusters.body.find(":" + str(env.nghttpx.port()) + " ") == std::string::npos);
  const Scrape s = scrapeMetrics(admin);
  CHECK(s.sum("h2gate_upstream_endpoint_up",
              {{"cluster", "proxy"}, {"endpoint", "127.0.0.1:" + str(second.port())}}) == 1);
  CHECK(s.count("h2gate_upstream_endpoint_up",
                {{"endpoint", "127.0.0.1:" + str(env.nghttpx.port())}}) == 0);
  CHECK(s.sum("h2gate_config_reloads_total", {{"result", "success"}}) == 1);
  CHECK(s.sum("h2gate_config_reloads_total", {{"result", "failure"}}) == 0);
  CHECK(adminGet(admin, "/config_dump").body.find("port_value: " + str(second.port())) !=
        std::string::npos);

  // Drain after a reload still exits 0.
  const ExitStatus exit = gate.terminate();
  CHECK(exit.exited);
  CHECK(exit.code == 0);
}

TEST_CASE("reload: a broken config is rejected as a whole and the old one keeps serving",
          "[reload][upstream]") {
  H2Env env;
  H2gate& gate = env.startGateYaml({});
  const uint16_t admin = gate.adminPort();
  const std::string good = upstreamModeYaml(env.nghttpx.port(), env.ca.caCertPath());

  // An unknown field, by SIGHUP: logged with file:line:col, counted.
  gate.writeFile("h2gate.yaml", good + "  bogus_field: 1\n");
  gate.process().signalMain(SIGHUP);
  {
    INFO(gate.process().logTail(20));
    CHECK(gate.process().waitForLog(
        "error reload: [^ ]*h2gate\\.yaml:[0-9]+:[0-9]+: static_resources\\.bogus_field: unknown "
        "field",
        milliseconds(5000)));
    CHECK(gate.process().waitForLog("reload rejected: 1 problem", milliseconds(5000)));
  }
  CHECK(reloads(admin, "failure") == 1);
  CHECK(reloads(admin, "success") == 0);
  auto r = env.curl({"-o", "/dev/null", "-w", "%{http_code}", env.nginx.httpsUrl("/1m")});
  CHECK(r.out == "200");  // still through the old config

  // A YAML syntax error, by POST: 400 with the error in the body.
  gate.writeFile("h2gate.yaml", good + "  listeners: [\n");
  AdminReply post = adminPost(admin, "/reload");
  CHECK(post.status == 400);
  CHECK(post.body.find("reload rejected") != std::string::npos);
  CHECK(post.body.find("h2gate.yaml:") != std::string::npos);
  CHECK(reloads(admin, "failure") == 2);

  // A TLS context that cannot be built (the CA file is not PEM).
  const std::string bad_ca = gate.writeFile("bad-ca.pem", "not a certificate\n");
  gate.writeFile("h2gate.yaml", upstreamModeYaml(env.nghttpx.port(), bad_ca));
  post = adminPost(admin, "/reload");
  CHECK(post.status == 400);
  CHECK(post.body.find("bad-ca.pem") != std::string::npos);

  // A listener that cannot bind (the admin port is taken, by h2gate itself).
  std::string taken = good;
  const std::string from =
      "socket_address: {address: 127.0.0.1, port_value: 0}\n"
      "    filter_chains:";
  const size_t at = taken.find(from);
  REQUIRE(at != std::string::npos);
  taken.replace(
      at, from.size(),
      "socket_address: {address: 127.0.0.1, port_value: " + str(admin) + "}\n    filter_chains:");
  gate.writeFile("h2gate.yaml", taken);
  post = adminPost(admin, "/reload");
  CHECK(post.status == 400);
  CHECK(post.body.find("cannot listen on 127.0.0.1:" + str(admin)) != std::string::npos);
  CHECK(reloads(admin, "failure") == 4);

  // Nothing of the rejected configs took effect.
  r = env.curl({"-o", "/dev/null", "-w", "%{http_code}", env.nginx.httpsUrl("/1m")});
  CHECK(r.out == "200");
  CHECK(adminGet(admin, "/ready").status == 200);
  CHECK(adminGet(admin, "/config_dump").body.find("bogus") == std::string::npos);

  // Fixed: 200 and a one-line summary.
  gate.writeFile("h2gate.yaml", good);
  post = adminPost(admin, "/reload");
  CHECK(post.status == 200);
  CHECK(post.body.find("reloaded ") == 0);
  CHECK(post.body.find("listeners: 1 unchanged; clusters: 1 unchanged") != std::string::npos);
  CHECK(reloads(admin, "success") == 1);
  CHECK(reloads(admin, "failure") == 4);
  r = env.curl({"-o", "/dev/null", "-w", "%{http_code}", env.nginx.httpsUrl("/1m")});
  CHECK(r.out == "200");
  // An unchanged cluster keeps its pool: still the one h2 connection.
  CHECK(env.gateConnections() == 1);

  // Other methods on /reload, POST elsewhere.
  CHECK(adminGet(admin, "/reload").status == 405);
  CHECK(adminPost(admin, "/metrics").status == 405);
}

TEST_CASE("reload: a listener opened to others needs source_prefix_ranges; a new list applies",
          "[reload][listener][sources]") {
  Nginx nginx;
  H2gate gate(reloadGateOptions(directYaml({"local_proxy"})));
  const uint16_t admin = gate.adminPort();
  const std::string loopback = directYaml({"local_proxy"});
  const std::string on =
      "socket_address: {address: 127.0.0.1, port_value: 0}\n    filter_chains:\n    - filters:\n";
  const auto wildcard = [&](const std::string& match) {
    std::string y = loopback;
    const size_t at = y.find(on);
    REQUIRE(at != std::string::npos);
    y.replace(at, on.size(),
              "socket_address: {address: 0.0.0.0, port_value: 0}\n    filter_chains:\n    - " +
                  (match.empty() ? "" : "filter_chain_match: " + match + "\n      ") +
                  "filters:\n");
    return y;
  };

  // Open to whoever reaches 0.0.0.0: rejected, the running one stays.
  gate.writeFile("h2gate.yaml", wildcard(""));
  AdminReply post = adminPost(admin, "/reload");
  INFO(post.body);
  CHECK(post.status == 400);
  CHECK(post.body.find("listener 'local_proxy' listens on 0.0.0.0:0 without source_prefix_ranges "
                       "(--allow): anyone who can reach it could use the proxy") !=
        std::string::npos);
  CHECK(reloads(admin, "failure") == 1);
  CHECK(adminGet(admin, "/config_dump").body.find("0.0.0.0") == std::string::npos);
  CHECK(fetch(gate.proxyUrl(), nginx.httpUrl("/1k")).out == "200");

  // With a list that holds loopback: taken; loopback clients are served.
  gate.writeFile("h2gate.yaml",
                 wildcard("{source_prefix_ranges: [{address_prefix: 127.0.0.0, prefix_len: 8}]}"));
  post = adminPost(admin, "/reload");
  INFO(gate.process().logTail(20));
  REQUIRE(post.status == 200);
  auto m = gate.process().waitForLog(
      "listening on 0\\.0\\.0\\.0:([0-9]+) \\(listener local_proxy\\)", milliseconds(5000));
  REQUIRE(m);
  const std::string proxy = "http://127.0.0.1:" + std::string((*m)[1]);
  CHECK(fetch(proxy, nginx.httpUrl("/1k")).out == "200");
  CHECK(adminGet(admin, "/config_dump").body.find("source_prefix_ranges") != std::string::npos);

  // A list without loopback: the same socket now closes loopback clients.
  gate.writeFile("h2gate.yaml",
                 wildcard("{source_prefix_ranges: [{address_prefix: 10.0.0.0, prefix_len: 8}]}"));
  post = adminPost(admin, "/reload");
  REQUIRE(post.status == 200);
  const CommandResult refused = fetch(proxy, nginx.httpUrl("/1k"));
  CHECK((refused.exit_code == 52 || refused.exit_code == 56));
  CHECK(refused.out == "000");
  CHECK(gate.process().waitForLog(
      "listener local_proxy: refused a connection from 127\\.0\\.0\\.1:[0-9]+: not in its "
      "source_prefix_ranges \\(10\\.0\\.0\\.0/8\\)",
      milliseconds(5000)));
  CHECK(scrapeMetrics(admin).sum("h2gate_downstream_connections_refused_total",
                                 {{"listener", "local_proxy"}, {"reason", "source_not_allowed"}}) ==
        1);
}

TEST_CASE("reload: POST /reload adds a listener on a new port", "[reload][listener]") {
  Nginx nginx;
  H2gate gate(reloadGateOptions(directYaml({"local_proxy"})));
  const uint16_t admin = gate.adminPort();

  // concurrency cannot change at runtime: a warning, not an error.
  gate.writeFile("h2gate.yaml", directYaml({"local_proxy", "extra"}, "  concurrency: 3\n"));
  const AdminReply post = adminPost(admin, "/reload");
  INFO(gate.process().logTail(20));
  REQUIRE(post.status == 200);
  CHECK(post.body.find("listeners: 1 added (extra), 1 unchanged") != std::string::npos);
  CHECK(gate.process().waitForLog("concurrency 1 -> 3 needs a restart; keeping 1",
                                  milliseconds(1000)));
  const uint16_t extra = reloadedPort(gate, "extra");
  CHECK(extra != gate.port("local_proxy"));

  auto r = fetch("http://127.0.0.1:" + str(extra), nginx.httpUrl("/1k"));
  INFO(r.err);
  CHECK(r.out == "200");
  r = fetch(gate.proxyUrl(), nginx.httpUrl("/1k"));
  CHECK(r.out == "200");
  const auto log = gate.waitForAccessLog(2);
  REQUIRE(log.size() == 2);
  CHECK(log[0].get("listener") == "extra");
  CHECK(log[1].get("listener") == "local_proxy");
  // The unchanged listener kept its socket: the same port as before.
  CHECK(gate.process().stderrText().find("(listener local_proxy)") ==
        gate.process().stderrText().rfind("(listener local_proxy)"));
  CHECK(adminGet(admin, "/config_dump").body.find("concurrency: 1") != std::string::npos);
}

TEST_CASE("reload: a removed listener stops accepting; its open connection finishes",
          "[reload][listener]") {
  Nginx nginx;
  H2gate gate(reloadGateOptions(directYaml({"local_proxy", "old"}), {"local_proxy", "old"}));
  const uint16_t admin = gate.adminPort();
  const uint16_t old_port = gate.port("old");
  TempDir out("reload-out");

  // 64 MiB at 8 MiB/s: more than socket buffers hold, so h2gate's side of
  // the connection stays open for seconds.
  const TestFile& f = testFile("64m");
  const std::string long_out = out.file("long");
  auto slow = startCurl({"-sS", "-x", gate.proxyUrl("old"), "--limit-rate", "8M", "-o", long_out,
                         nginx.httpUrl("/64m")},
                        out.path().string(), "long");
  REQUIRE(waitForFileSize(long_out, 512 * 1024, milliseconds(10000)));

  gate.writeFile("h2gate.yaml", directYaml({"local_proxy"}));
  const AdminReply post = adminPost(admin, "/reload");
  INFO(gate.process().logTail(20));
  REQUIRE(post.status == 200);
  CHECK(post.body.find("listeners: 1 removed (old), 1 unchanged") != std::string::npos);
  CHECK(gate.accessLog().empty());  // the download is still open on h2gate's side

  // New connections to the old port are refused (curl: 7, couldn't connect).
  CHECK(pollUntil(
      [&] {
        return fetch("http://127.0.0.1:" + str(old_port), nginx.httpUrl("/1k")).exit_code == 7;
      },
      milliseconds(3000)));
  CHECK(fetch(gate.proxyUrl(), nginx.httpUrl("/1k")).out == "200");
  CHECK(slow->running());

  const auto st = slow->wait(milliseconds(60000));
  REQUIRE(st);
  CHECK(st->exited);
  CHECK(st->code == 0);
  CHECK(sha256File(long_out) == f.sha256);
  CHECK(reloads(admin, "success") == 1);

  // Back again: a new socket (the old one is closed), announced like at start.
  gate.writeFile("h2gate.yaml", directYaml({"local_proxy", "old"}));
  const AdminReply again = adminPost(admin, "/reload");
  CHECK(again.status == 200);
  CHECK(again.body.find("listeners: 1 added (old), 1 unchanged") != std::string::npos);
  CHECK(countOccurrences(gate.process().stderrText(), "(listener old)") == 2);
  CHECK(reloads(admin, "success") == 2);
}

TEST_CASE("reload: started without -c there is nothing to reload", "[reload][admin]") {
  H2gate::Options o;  // flags only: --listen, --admin, --log-level
  o.binary = H2GATE_BINARY;
  H2gate gate(std::move(o));
  const uint16_t admin = gate.adminPort();
  const AdminReply post = adminPost(admin, "/reload");
  CHECK(post.status == 409);
  CHECK(post.body.find("nothing to reload") != std::string::npos);

  gate.process().signalMain(SIGHUP);
  CHECK(gate.process().waitForLog("SIGHUP: nothing to reload", milliseconds(5000)));
  CHECK(gate.process().running());
  CHECK(adminGet(admin, "/healthz").status == 200);
  CHECK(reloads(admin, "success") == 0);
  CHECK(reloads(admin, "failure") == 0);
}

namespace {

// POST /reload over a raw connection (1,000 curl processes would take long):
// the status.
int rawReload(uint16_t admin) {
  RawConnection c(admin);
  if (!c.send("POST /reload HTTP/1.1\r\nHost: 127.0.0.1:" + str(admin) +
              "\r\nX-H2gate-Admin: 1\r\nContent-Length: 0\r\n\r\n"))
    return 0;
  return c.readResponse(milliseconds(30000)).status;
}

// Direct mode with an acl of `hosts` names (about 44 bytes of YAML each).
std::string aclYaml(size_t hosts) {
  std::string y =
      "admin:\n"
      "  address: {socket_address: {address: 127.0.0.1, port_value: 0}}\n"
      "static_resources:\n"
      "  listeners:\n"
      "  - name: local_proxy\n"
      "    address: {socket_address: {address: 127.0.0.1, port_value: 0}}\n"
      "    filter_chains:\n"
      "    - filters:\n"
      "      - name: h2gate.filters.acl\n"
      "        typed_config:\n"
      "          deny:\n"
      "          - reason: blocklist\n"
      "            match:\n"
      "              hosts:\n";
  y.reserve(y.size() + hosts * 44);
  char line[64];
  for (size_t i = 0; i < hosts; ++i) {
    std::snprintf(line, sizeof line, "              - host%07zu.blocked.example\n", i);
    y += line;
  }
  y += "      - name: h2gate.filters.forward_proxy\n";
  return y;
}

}  // namespace

TEST_CASE("reload: 1,000 reloads keep RSS flat (replaced configurations are freed)", "[reload]") {
  H2gate gate(reloadGateOptions(aclYaml(100)));  // about 5 KB, like the report's config
  const uint16_t admin = gate.adminPort();
  const pid_t pid = gate.process().pid();
  REQUIRE(rawReload(admin) == 200);
  // Replaced configurations are freed within a second or two of their last
  // use (gateway/server/server.h).
  std::this_thread::sleep_for(milliseconds(2500));
  const long before = procStatusKiB(pid, "VmRSS");
  const auto t0 = Clock::now();
  int ok = 0;
  for (int i = 0; i < 1000; ++i) ok += rawReload(admin) == 200;
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  CHECK(ok == 1000);
  std::this_thread::sleep_for(milliseconds(2500));
  const long after = procStatusKiB(pid, "VmRSS");
  std::cout << "[figures] 1000 reloads in " << secs << " s: h2gate VmRSS " << before << " -> "
            << after << " KiB, " << static_cast<double>(after - before) / 1000
            << " KiB per reload\n";
  CHECK(before > 0);
  if (gate.sanitized()) {
    WARN("RSS not checked under AddressSanitizer (its quarantine keeps freed memory)");
  } else {
    CHECK(after - before < 4 * 1024);
  }
  // Still serving, with the last configuration.
  Nginx nginx;
  CHECK(fetch(gate.proxyUrl(), nginx.httpUrl("/1k")).out == "200");
  CHECK(fetch(gate.proxyUrl(), "http://host0000042.blocked.example/").out == "403");
  CHECK(reloads(admin, "success") == 1001);
}

TEST_CASE("reload: /healthz answers within 1 s while a big config loads; size limit", "[reload]") {
  H2gate gate(reloadGateOptions(aclYaml(10)));
  // 4.4 MB; an ASan build parses far slower, and the point stands with 20,000.
  const size_t hosts = gate.sanitized() ? 20000 : 100000;
  const uint16_t admin = gate.adminPort();
  gate.writeFile("h2gate.yaml", aclYaml(hosts));

  std::atomic<int> status{0};
  std::atomic<double> reload_secs{0};
  std::thread reloader([&] {
    const auto t0 = Clock::now();
    status = rawReload(admin);
    reload_secs = std::chrono::duration<double>(Clock::now() - t0).count();
  });
  double slowest = 0;
  int probes = 0;
  int healthy = 0;
  while (status == 0) {
    const auto t0 = Clock::now();
    RawConnection c(admin);
    REQUIRE(c.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    const HttpResponse r = c.readResponse(milliseconds(10000));
    slowest = std::max(slowest, std::chrono::duration<double>(Clock::now() - t0).count());
    ++probes;
    healthy += r.status == 200;
    std::this_thread::sleep_for(milliseconds(100));
  }
  reloader.join();
  std::cout << "[figures] reload of an acl of " << hosts << " hosts took " << reload_secs
            << " s; /healthz asked " << probes << " times meanwhile, slowest answer " << slowest
            << " s\n";
  CHECK(status == 200);
  CHECK(healthy == probes);
  CHECK(slowest < 1.0);
  CHECK(fetch(gate.proxyUrl(), "http://host0000007.blocked.example/").out == "403");

  // Above --max-config-size (default 8 MiB): refused before it is parsed,
  // the running configuration stays.
  gate.writeFile("h2gate.yaml", aclYaml(10) + "# " + std::string(9u << 20, 'x') + "\n");
  const AdminReply big = adminPost(admin, "/reload");
  CHECK(big.status == 400);
  CHECK(big.body.find("bytes, more than the 8 MiB a config file may have (h2gate "
                      "--max-config-size SIZE raises the limit)") != std::string::npos);
  CHECK(fetch(gate.proxyUrl(), "http://host0000007.blocked.example/").out == "403");
}

TEST_CASE("reload: reloads asked for while one runs read the file again after it", "[reload]") {
  H2gate gate(reloadGateOptions(aclYaml(10)));
  const uint16_t admin = gate.adminPort();
  gate.writeFile("h2gate.yaml", aclYaml(20000));
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) threads.emplace_back([&] { ok += rawReload(admin) == 200; });
  for (auto& t : threads) t.join();
  CHECK(ok == 4);
  // The first one, then one more for the three that came while it ran.
  CHECK(reloads(admin, "success") >= 2);
  CHECK(reloads(admin, "success") <= 4);
  CHECK(gate.process().waitForLog("a reload is running; reloading again after it",
                                  milliseconds(1000)));
}
