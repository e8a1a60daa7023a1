// h2gate's metrics and admin endpoints against real peers: the h2 chain
// (nghttpx → squid → nginx), promtool, and a real Prometheus server that
// scrapes h2gate during a transfer.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/h2_env.h"
#include "tests/support/net.h"
#include "tests/support/pac_env.h"
#include "tests/support/prometheus.h"
#include "tests/support/scrape.h"
#include "tests/support/temp_dir.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

using Labels = std::map<std::string, std::string>;

// Polls /metrics until `pred` holds; returns the last scrape.
Scrape scrapeUntil(uint16_t admin, const std::function<bool(const Scrape&)>& pred,
                   milliseconds timeout = milliseconds(10000)) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    Scrape s = scrapeMetrics(admin);
    if (pred(s) || Clock::now() >= deadline) return s;
    std::this_thread::sleep_for(milliseconds(100));
  }
}

// The families a scrape declares (# TYPE lines).
std::set<std::string> servedFamilies(const Scrape& s) {
  std::set<std::string> served;
  std::istringstream exposition(s.text());
  for (std::string line; std::getline(exposition, line);)
    if (line.starts_with("# TYPE ")) served.insert(line.substr(7, line.find(' ', 7) - 7));
  return served;
}

// The families deploy/prometheus/metric_names.txt lists: those marked
// "# with a pac route" (`pac_route`: true), or all the others.
std::set<std::string> listedFamilies(bool pac_route) {
  std::set<std::string> listed;
  std::istringstream names(
      readFile(std::string(H2GATE_SOURCE_DIR) + "/deploy/prometheus/metric_names.txt"));
  for (std::string line; std::getline(names, line);) {
    const bool marked = line.find("# with a pac route") != std::string::npos;
    line = line.substr(0, line.find_first_of(" #"));
    if (!line.empty() && marked == pac_route) listed.insert(line);
  }
  return listed;
}

AdminReply adminUntil(uint16_t admin, const std::string& path, int status,
                      milliseconds timeout = milliseconds(15000)) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    AdminReply r = adminGet(admin, path);
    if (r.status == status || Clock::now() >= deadline) return r;
    std::this_thread::sleep_for(milliseconds(100));
  }
}

// `promtool check metrics` on a scrape; returns its output, "" when clean.
std::string promtoolProblems(const std::string& exposition, const TempDir& dir) {
  const std::string path = dir.write("scrape.prom", exposition);
  CommandResult r = runCommand({"sh", "-c", "promtool check metrics < '" + path + "' 2>&1"});
  return r.exit_code == 0 && r.out.empty() ? "" : "exit " + str(r.exit_code) + ": " + r.out;
}

bool exitsCleanly(Process& p, milliseconds timeout) {
  const auto st = p.wait(timeout);
  return st && st->exited && st->code == 0;
}

}  // namespace

TEST_CASE("metrics: bytes and tunnel counters match what was relayed, both directions",
          "[metrics][upstream][h2]") {
  H2Env::Options o;
  o.window_size = 16 << 20;
  o.connection_window_size = 64 << 20;
  H2Env env(o);
  H2gate& gate = env.startGate();
  const uint16_t admin = gate.adminPort();
  const Labels down{{"cluster", "upstream"}, {"protocol", "h2"}, {"direction", "downstream"}};
  const Labels up{{"cluster", "upstream"}, {"protocol", "h2"}, {"direction", "upstream"}};

  // A scrape taken during a transfer is valid exposition format.
  {
    const TestFile& f = testFile("10m");
    auto slow =
        startCurl({"-sS", "-x", gate.proxyUrl(), "--cacert", env.ca.caCertPath(), "--limit-rate",
                   "2M", "-o", env.out.file("slow"), env.nginx.httpsUrl("/10m")},
                  env.out.path().string(), "slow");
    Scrape during = scrapeUntil(
        admin, [&](const Scrape& s) { return s.sum("h2gate_relayed_bytes_total", down) > 1e6; });
    CHECK(during.sum("h2gate_requests_active", {{"kind", "connect"}}) == 1);
    CHECK(during.sum("h2gate_upstream_streams_active", {{"cluster", "upstream"}}) == 1);
    CHECK(during.sum("h2gate_relayed_bytes_total", down) < static_cast<double>(f.size));
    INFO(during.text());
    CHECK(promtoolProblems(during.text(), env.out) == "");
    CHECK(exitsCleanly(*slow, milliseconds(30000)));
    CHECK(sha256File(env.out.file("slow")) == f.sha256);
  }
  const Scrape before =
      scrapeUntil(admin, [](const Scrape& s) { return s.sum("h2gate_requests_active") == 0; });
  const double down0 = before.sum("h2gate_relayed_bytes_total", down);
  const double up0 = before.sum("h2gate_relayed_bytes_total", up);

  // 20 × 10 MiB down, then 20 × 10 MiB up, through CONNECT tunnels.
  const TestFile& f = testFile("10m");
  env.parallelDownloads(20, "/10m", f.sha256, f.size, "d");
  std::vector<std::string> args{"--parallel", "--parallel-max", "20", "--parallel-immediate",
                                "--http1.1"};
  for (int i = 0; i < 20; ++i)
    args.insert(args.end(), {"-T", f.path, "-X", "POST", "-o", env.out.file("u" + str(i)),
                             env.nginx.httpsUrl("/upload/" + str(i))});
  auto r = env.curl(args, milliseconds(180000));
  INFO(r.err << "\n" << gate.process().logTail(20));
  REQUIRE(r.exit_code == 0);
  for (int i = 0; i < 20; ++i)
    CHECK(readFile(env.out.file("u" + str(i))) == f.sha256 + " " + str(f.size) + "\n");

  const Scrape after = scrapeUntil(admin, [](const Scrape& s) {
    return s.sum("h2gate_requests_active") == 0 && s.sum("h2gate_upstream_streams_active") == 0 &&
           s.sum("h2gate_downstream_connections_active") == 0;
  });
  INFO(after.text());
  const double payload = 20.0 * static_cast<double>(f.size);
  const double got_down = after.sum("h2gate_relayed_bytes_total", down) - down0;
  const double got_up = after.sum("h2gate_relayed_bytes_total", up) - up0;
  std::cout << "[figures] relayed after 20 x 10 MiB each way: down " << got_down << " B, up "
            << got_up << " B (payload " << payload << " B each)\n";
  // The tunnels carry TLS: a little more than the payload, never less.
  CHECK(got_down >= payload);
  CHECK(got_down <= payload * 1.01);
  CHECK(got_up >= payload);
  CHECK(got_up <= payload * 1.01);
  // The counters agree exactly with the access log's per-tunnel figures.
  auto log = gate.waitForAccessLog(41);
  double log_down = 0, log_up = 0;
  for (const auto& e : log) {
    log_down += static_cast<double>(e.num("bytes_down"));
    log_up += static_cast<double>(e.num("bytes_up"));
  }
  CHECK(after.sum("h2gate_relayed_bytes_total", down) == log_down);
  CHECK(after.sum("h2gate_relayed_bytes_total", up) == log_up);

  // 41 tunnels: started = finished ok, nothing active, one h2 connection.
  const Labels connect{{"listener", "local_proxy"}, {"kind", "connect"}};
  CHECK(after.sum("h2gate_requests_started_total", connect) == 41);
  CHECK(after.sum(
            "h2gate_requests_finished_total",
            {{"kind", "connect"}, {"cluster", "upstream"}, {"protocol", "h2"}, {"result", "ok"}}) ==
        41);
  CHECK(after.sum("h2gate_requests_active") == 0);
  CHECK(after.sum("h2gate_upstream_streams_active") == 0);
  CHECK(after.sum("h2gate_upstream_streams_stalled") == 0);
  CHECK(after.sum("h2gate_downstream_connections_active") == 0);
  CHECK(after.sum("h2gate_upstream_connections_active", {{"protocol", "h2"}}) == 1);
  CHECK(after.sum("h2gate_upstream_connections_opened_total", {{"protocol", "h2"}}) == 1);
  CHECK(after.sum("h2gate_tunnel_setup_duration_seconds_count", {{"protocol", "h2"}}) == 41);
  CHECK(after.sum("h2gate_time_to_first_byte_seconds_count",
                  {{"protocol", "h2"}, {"kind", "connect"}}) == 41);
  CHECK(after.sum("h2gate_upstream_tls_handshake_duration_seconds_count") == 1);
  CHECK(after.sum("h2gate_upstream_connect_duration_seconds_count") == 1);
  CHECK(after.sum("h2gate_upstream_ping_rtt_seconds_count") >= 1);
  CHECK(after.sum("h2gate_upstream_connection_ping_rtt_seconds") > 0);
  CHECK(after.sum("h2gate_upstream_connection_send_buffer_bytes") > 0);
  CHECK(after.sum("h2gate_upstream_endpoint_up", {{"cluster", "upstream"}}) == 1);
  CHECK(after.sum("h2gate_ready") == 1);
  CHECK(after.sum("h2gate_build_info") == 1);
  CHECK(after.sum("process_resident_memory_bytes") > 1e6);
  CHECK(promtoolProblems(after.text(), env.out) == "");

  // The families served are exactly those the dashboards and alerts are
  // checked against (deploy/prometheus/metric_names.txt), but for those
  // that exist only with a PAC route (the next test).
  CHECK(servedFamilies(after) == listedFamilies(false));
}

TEST_CASE("metrics: a config with a PAC route serves the h2gate_pac_* families listed",
          "[metrics][pac]") {
  TempDir dir("metrics-pac");
  const std::string pac =
      dir.write("p.pac", "function FindProxyForURL(url, host) { return \"DIRECT\"; }\n");
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  o.yaml = PacEnv::yaml(PacEnv::listener("local_proxy", "              file: " + pac + "\n"));
  o.args = {"--log-level", "debug"};
  H2gate gate(std::move(o));
  INFO(gate.process().logTail(30));
  REQUIRE(gate.process().waitForLog("using the PAC file from", kPacLoadTimeout));
  const Scrape s = scrapeMetrics(gate.adminPort());
  INFO(s.text());
  CHECK(s.sum("h2gate_pac_loaded", {{"route", "local_proxy/routes[0]"}}) == 1);
  const std::set<std::string> served = servedFamilies(s);
  const std::set<std::string> pac_only = listedFamilies(true);
  std::set<std::string> served_pac;
  for (const std::string& f : served)
    if (f.starts_with("h2gate_pac_")) served_pac.insert(f);
  CHECK(pac_only.size() >= 7);
  CHECK(served_pac == pac_only);
  // Every family served is listed.
  std::set<std::string> all = listedFamilies(false);
  all.insert(pac_only.begin(), pac_only.end());
  for (const std::string& f : served) {
    INFO(f);
    CHECK(all.count(f) == 1);
  }
}

TEST_CASE("metrics: a real Prometheus scrapes h2gate and rate() gives the transfer rate",
          "[metrics][prometheus]") {
  H2Env env;
  H2gate& gate = env.startGate();
  PrometheusServer prom(gate.adminPort());
  INFO(prom.logTail());
  REQUIRE(prom.waitForTarget(milliseconds(30000)));

  // 64 MiB at 4 MiB/s: ~16 s of steady transfer.
  const TestFile& f = testFile("64m");
  constexpr double kRate = 4 * 1024 * 1024;
  auto dl = startCurl({"-sS", "-x", gate.proxyUrl(), "--cacert", env.ca.caCertPath(),
                       "--limit-rate", "4M", "-o", env.out.file("big"), env.nginx.httpsUrl("/64m")},
                      env.out.path().string(), "big");
  std::this_thread::sleep_for(std::chrono::seconds(8));
  const std::string q =
      "sum(rate(h2gate_relayed_bytes_total{cluster=\"upstream\",direction=\"downstream\"}[4s]))";
  std::optional<double> rate;
  const auto deadline = Clock::now() + std::chrono::seconds(6);
  while (!rate && Clock::now() < deadline) {
    rate = prom.query(q);
    if (!rate) std::this_thread::sleep_for(milliseconds(500));
  }
  INFO(prom.lastError());
  REQUIRE(rate);
  std::cout << "[figures] Prometheus " << q << " = " << *rate << " B/s (curl limit " << kRate
            << ")\n";
  CHECK(*rate > kRate * 0.5);
  CHECK(*rate < kRate * 2);
  const auto tunnels = prom.query("sum(h2gate_requests_active{kind=\"connect\"})");
  REQUIRE(tunnels);
  CHECK(*tunnels == 1);
  CHECK(exitsCleanly(*dl, milliseconds(60000)));
  CHECK(sha256File(env.out.file("big")) == f.sha256);
}

TEST_CASE("admin: /ready follows the upstream proxy going away and coming back",
          "[metrics][admin][upstream]") {
  H2Env env;
  H2gate& gate = env.startGate();
  const uint16_t admin = gate.adminPort();
  AdminReply ready = adminUntil(admin, "/ready", 200);
  CHECK(ready.status == 200);
  CHECK(ready.body == "LIVE\n");

  env.nghttpx.stop();
  ready = adminUntil(admin, "/ready", 503);
  INFO(gate.process().logTail(20));
  CHECK(ready.status == 503);
  // One line that says which cluster and why.
  CHECK(ready.body.find("cluster upstream") != std::string::npos);
  CHECK(ready.body.find(" down") != std::string::npos);
  CHECK(std::count(ready.body.begin(), ready.body.end(), '\n') == 1);
  CHECK(adminGet(admin, "/healthz").status == 200);  // alive: only not ready
  Scrape down = scrapeMetrics(admin);
  CHECK(down.sum("h2gate_ready") == 0);
  CHECK(down.sum("h2gate_upstream_endpoint_up", {{"cluster", "upstream"}}) == 0);
  // connect_failed once the port is closed; tls_failed when the attempt met
  // nghttpx still shutting down.
  CHECK(down.sum("h2gate_upstream_connect_failures_total") >= 1);
  CHECK(gate.process().waitForLog("is down", milliseconds(1000)));

  env.nghttpx.restart();
  ready = adminUntil(admin, "/ready", 200, milliseconds(40000));
  CHECK(ready.status == 200);
  CHECK(gate.process().waitForLog("reachable again", milliseconds(1000)));
  // The connection made in the background carries the next request.
  const TestFile& f = testFile("1m");
  auto r = env.curl({"-o", env.out.file("after"), "-w", "%{http_code}", env.nginx.httpsUrl("/1m")});
  CHECK(r.out == "200");
  CHECK(sha256File(env.out.file("after")) == f.sha256);
  CHECK(scrapeMetrics(admin).sum("h2gate_upstream_endpoint_up") == 1);
}

TEST_CASE("admin: endpoints, redaction, errors by status, and answers under load",
          "[metrics][admin][upstream]") {
  H2Env::Options o;
  o.squid_auth = true;
  o.password = "Adm1n-Dump-Pa55";
  H2Env env(o);
  H2gate& gate =
      env.startGate("https://alice:" + o.password + "@127.0.0.1:" + str(env.nghttpx.port()));
  const uint16_t admin = gate.adminPort();

  SECTION("paths") {
    AdminReply m = adminGet(admin, "/metrics");
    CHECK(m.status == 200);
    CHECK(m.content_type == "text/plain; version=0.0.4; charset=utf-8");
    CHECK(m.body.find("# TYPE h2gate_relayed_bytes_total counter") != std::string::npos);
    CHECK(adminGet(admin, "/stats/prometheus").body.find("h2gate_build_info{version=") !=
          std::string::npos);
    CHECK(adminGet(admin, "/healthz").status == 200);
    CHECK(adminGet(admin, "/nope").status == 404);
    CHECK(adminGet(admin, "/metricsx").status == 404);

    AdminReply c = adminUntil(admin, "/ready", 200);
    c = adminGet(admin, "/clusters");
    CHECK(c.status == 200);
    const std::string ep = "127.0.0.1:" + str(env.nghttpx.port());
    INFO(c.body);
    CHECK(c.body.find("upstream " + ep + " state=up alpn=h2 connections=1 streams=0") !=
          std::string::npos);

    AdminReply d = adminGet(admin, "/config_dump");
    CHECK(d.status == 200);
    INFO(d.body);
    CHECK(d.body.find("clusters:") != std::string::npos);
    CHECK(d.body.find(str(env.nghttpx.port())) != std::string::npos);
    CHECK(d.body.find("alice") != std::string::npos);
    CHECK(d.body.find(o.password) == std::string::npos);
    CHECK(d.body.find("[redacted]") != std::string::npos);
  }
  SECTION("error replies are counted by status") {
    // Nothing listens on this port: the proxy answers 502 (or h2gate does).
    const uint16_t closed = freePort();
    auto r = env.curl(
        {"-o", "/dev/null", "-w", "%{http_code}", "https://127.0.0.1:" + str(closed) + "/"});
    Scrape s = scrapeUntil(admin, [](const Scrape& x) {
      return x.sum("h2gate_requests_active") == 0 && x.sum("h2gate_requests_finished_total") >= 1;
    });
    INFO(s.text());
    CHECK(s.sum("h2gate_requests_finished_total", {{"kind", "connect"}}) == 1);
    CHECK(s.sum("h2gate_requests_finished_total", {{"kind", "connect"}, {"result", "ok"}}) == 0);
    // A request h2gate itself refuses: origin-form is not a proxy request.
    RawConnection raw(gate.port());
    REQUIRE(raw.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    CHECK(raw.readResponse(milliseconds(5000)).status == 400);
    s = scrapeUntil(admin, [](const Scrape& x) {
      return x.sum("h2gate_downstream_errors_total", {{"status", "400"}}) == 1;
    });
    CHECK(s.sum("h2gate_downstream_errors_total", {{"status", "400"}}) == 1);
  }
  SECTION("admin answers while 20 tunnels saturate the data path") {
    const TestFile& f = testFile("64m");
    std::vector<std::string> args{"--parallel", "--parallel-max", "20", "--parallel-immediate",
                                  "--http1.1"};
    for (int i = 0; i < 20; ++i)
      args.insert(args.end(), {"-o", "/dev/null", env.nginx.httpsUrl("/64m?" + str(i))});
    auto load = startCurl(
        [&] {
          std::vector<std::string> all{"-sS", "-x", gate.proxyUrl(), "--cacert",
                                       env.ca.caCertPath()};
          all.insert(all.end(), args.begin(), args.end());
          return all;
        }(),
        env.out.path().string(), "load");
    scrapeUntil(admin, [](const Scrape& s) { return s.sum("h2gate_requests_active") >= 10; });
    double worst = 0;
    int answered = 0;
    for (int i = 0; i < 20 && load->running(); ++i) {
      AdminReply m = adminGet(admin, i % 2 ? "/metrics" : "/ready");
      answered += m.status == 200;
      worst = std::max(worst, m.seconds);
    }
    std::cout << "[figures] admin under load: " << answered << " answers, slowest " << worst
              << " s (file " << f.size << " B x 20)\n";
    CHECK(answered >= 1);
    CHECK(worst < 2.0);
    load->stop();
  }
}
