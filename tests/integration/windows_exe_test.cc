// h2gate.exe (the mingw-w64 cross build, build-windows/h2gate.exe) under
// wine, with real Linux peers doing the rest: curl → h2gate.exe → nghttpx
// (TLS, h2) → squid → nginx. ctest windows_exe (label windows), which
// tests/windows/run.sh runs after the cross build; $H2GATE_WINDOWS_EXE names
// the .exe, $H2GATE_WINE the wine loader, $WINEPREFIX the prefix. Without an
// .exe or wine the test prints H2GATE-SKIP: and the reason.
//
// h2gate.exe is started through a small shell wrapper: wine's C runtime
// writes "\r\n" line ends (text mode), which the wrapper strips so the
// fixture reads the same log lines as from the Linux binary.
#include <catch2/catch.hpp>

#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/h2_env.h"
#include "tests/support/net.h"
#include "tests/support/scrape.h"
#include "tests/support/upstream_proxies.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// "" when h2gate.exe can run here, else why not.
std::string unavailable(std::string& exe, std::string& wine) {
  exe = envOr("H2GATE_WINDOWS_EXE", "");
  wine = envOr("H2GATE_WINE", "/usr/lib/wine/wine64");
  if (exe.empty()) return "H2GATE_WINDOWS_EXE is not set (tests/windows/run.sh sets it)";
  if (!std::filesystem::exists(exe))
    return exe + " does not exist: build it with tests/windows/run.sh";
  if (!std::filesystem::exists(wine)) return "no wine loader at " + wine + " (Debian: wine64)";
  return "";
}

// The wrapper: wine's exit status, output without "\r", line by line
// (sed -u: unbuffered, so the fixture sees each log line at once).
std::string writeWrapper(const TempDir& dir, const std::string& wine, const std::string& exe) {
  const std::string path =
      dir.write("h2gate-wine.sh",
                "#!/bin/bash\n"
                "export WINEDEBUG=-all\n"
                "\"" +
                    wine + "\" \"" + exe +
                    "\" \"$@\" 2> >(sed -u 's/\\r$//' >&2) | sed -u 's/\\r$//'\n"
                    "exit ${PIPESTATUS[0]}\n");
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

H2gate::Options exeOptions(const std::string& wrapper, std::vector<std::string> args) {
  H2gate::Options o;
  o.binary = wrapper;
  o.args = std::move(args);
  o.start_timeout = milliseconds(60000);  // a cold wine prefix takes seconds
  o.check_clean_exit = false;             // SIGTERM is no console event: stopped by /quitquitquit
  return o;
}

}  // namespace

TEST_CASE("h2gate.exe under wine: downloads, uploads, metrics, admin, quitquitquit",
          "[windows-exe]") {
  std::string exe, wine;
  if (const std::string why = unavailable(exe, wine); !why.empty()) {
    std::cout << "H2GATE-SKIP: " << why << "\n";
    return;
  }
  H2Env::Options eo;
  eo.window_size = 16 << 20;
  eo.connection_window_size = 64 << 20;
  H2Env env(eo);
  TempDir work("windows-exe");
  const std::string wrapper = writeWrapper(work, wine, exe);

  // --validate: a config error with file:line:column, from the .exe.
  {
    const std::string bad = work.write("bad.yaml", "static_resources:\n  listeners: 5\n");
    CommandResult r = runCommand({wrapper, "--validate", "-c", bad}, milliseconds(60000));
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.out.find("bad.yaml:2:") != std::string::npos);
  }

  // Upstream: nghttpx over TLS verified against the test CA, h2.
  env.gate = std::make_unique<H2gate>(exeOptions(
      wrapper, {"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-level", "debug",
                "--upstream", env.nghttpx.url(), "--cacert", env.ca.caCertPath()}));
  H2gate& gate = *env.gate;
  INFO(gate.process().logTail(30));
  REQUIRE(gate.process().waitForLog(
      "proxy 127\\.0\\.0\\.1:" + str(env.nghttpx.port()) + " negotiated h2", milliseconds(30000)));
  CHECK(adminGet(gate.adminPort(), "/ready").status == 200);

  // 20 × 20 MiB CONNECT downloads, byte-identical; /metrics mid-transfer.
  const SizedFile& f = sizedTestFile("20m", 20 << 20);
  {
    std::vector<std::string> args{"-sS",
                                  "-x",
                                  gate.proxyUrl(),
                                  "--cacert",
                                  env.ca.caCertPath(),
                                  "--parallel",
                                  "--parallel-max",
                                  "20",
                                  "--parallel-immediate",
                                  "--http1.1",
                                  "--limit-rate",
                                  "8M",
                                  "-w",
                                  "%{http_code} %{size_download}\\n"};
    for (int i = 0; i < 20; ++i)
      args.insert(args.end(),
                  {"-o", env.out.file("d" + str(i)), env.nginx.httpsUrl("/20m?d" + str(i))});
    const auto start = Clock::now();
    auto downloads = startCurl(args, env.out.path().string(), "down20");
    const auto deadline = Clock::now() + milliseconds(20000);
    Scrape during = scrapeMetrics(gate.adminPort());
    while (Clock::now() < deadline && during.sum("h2gate_requests_active") < 20) {
      std::this_thread::sleep_for(milliseconds(200));
      during = scrapeMetrics(gate.adminPort());
    }
    INFO(during.text());
    CHECK(during.sum("h2gate_requests_active") == 20);
    const std::string path = work.write("scrape.prom", during.text());
    CommandResult pt = runCommand({"sh", "-c", "promtool check metrics < '" + path + "' 2>&1"});
    CHECK(pt.exit_code == 0);
    CHECK(pt.out == "");
    // The tuner's value on the upstream socket: wine answers the ideal
    // send backlog query with a fixed 65536.
    CHECK(during.text().find("h2gate_upstream_connection_send_buffer_bytes") != std::string::npos);
    CHECK(during.sum("h2gate_upstream_connection_send_buffer_bytes") == 65536);
    const auto st = downloads->wait(milliseconds(240000));
    REQUIRE(st);
    CHECK(st->exited);
    CHECK(st->code == 0);
    std::cout << "[figures] h2gate.exe under wine: 20 x 20 MiB downloads in " << secondsSince(start)
              << " s (curl --limit-rate 8M each)\n";
    for (int i = 0; i < 20; ++i) {
      INFO("download " << i);
      CHECK(sha256File(env.out.file("d" + str(i))) == f.sha256);
    }
  }

  // 5 × 20 MiB uploads (nginx's /upload answers "<sha256> <size>").
  {
    const std::string want = f.sha256 + " " + str(f.size) + "\n";
    std::vector<std::string> args{"--parallel", "--parallel-max", "5", "--parallel-immediate",
                                  "--http1.1"};
    for (int i = 0; i < 5; ++i)
      args.insert(args.end(), {"-T", f.path, "-X", "POST", "-o", env.out.file("u" + str(i)),
                               env.nginx.httpsUrl("/upload/" + str(i))});
    auto r = env.curl(args, milliseconds(180000));
    INFO("curl stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    for (int i = 0; i < 5; ++i) CHECK(readFile(env.out.file("u" + str(i))) == want);
  }
  // Absolute-form GET and POST through the same h2 connection.
  {
    auto r =
        env.curl({"-o", env.out.file("abs"), "-w", "%{http_code}", env.nginx.httpUrl("/1m?abs")});
    CHECK(r.out == "200");
    CHECK(sha256File(env.out.file("abs")) == testFile("1m").sha256);
    r = env.curl({"-X", "POST", "-T", testFile("1m").path, env.nginx.httpUrl("/upload/abs")});
    CHECK(r.out == testFile("1m").sha256 + " " + str(1 << 20) + "\n");
  }
  // Everything over exactly one TLS connection to nghttpx.
  CHECK(env.nghttpx.clients().size() == 1);

  // POST /quitquitquit during 10 transfers: all complete, exit code 0.
  {
    std::vector<std::string> args{"-sS",
                                  "-x",
                                  gate.proxyUrl(),
                                  "--cacert",
                                  env.ca.caCertPath(),
                                  "--parallel",
                                  "--parallel-max",
                                  "10",
                                  "--parallel-immediate",
                                  "--http1.1",
                                  "--limit-rate",
                                  "4M"};
    for (int i = 0; i < 10; ++i)
      args.insert(args.end(),
                  {"-o", env.out.file("q" + str(i)), env.nginx.httpsUrl("/20m?q" + str(i))});
    auto transfers = startCurl(args, env.out.path().string(), "quit10");
    const auto deadline = Clock::now() + milliseconds(20000);
    while (Clock::now() < deadline &&
           scrapeMetrics(gate.adminPort()).sum("h2gate_requests_active") < 10)
      std::this_thread::sleep_for(milliseconds(200));
    AdminReply r = adminRequest("POST", gate.adminPort(), "/quitquitquit", {"X-H2gate-Admin: 1"});
    CHECK(r.status == 200);
    CHECK(r.body == "draining 10 connection(s)\n");
    const auto st = transfers->wait(milliseconds(120000));
    REQUIRE(st);
    CHECK(st->exited);
    CHECK(st->code == 0);
    for (int i = 0; i < 10; ++i) CHECK(sha256File(env.out.file("q" + str(i))) == f.sha256);
    const auto exit = gate.process().wait(milliseconds(30000));
    REQUIRE(exit);
    CHECK(exit->exited);
    CHECK(exit->code == 0);
  }
}

TEST_CASE("h2gate.exe under wine: a wrong CA gives 502 with the reason", "[windows-exe]") {
  std::string exe, wine;
  if (const std::string why = unavailable(exe, wine); !why.empty()) {
    std::cout << "H2GATE-SKIP: " << why << "\n";
    return;
  }
  H2Env env;
  TempDir work("windows-exe-ca");
  TestCA other{work.path().string()};
  const std::string wrapper = writeWrapper(work, wine, exe);
  env.gate = std::make_unique<H2gate>(exeOptions(
      wrapper, {"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-level", "debug",
                "--upstream", env.nghttpx.url(), "--cacert", other.caCertPath()}));
  H2gate& gate = *env.gate;
  INFO(gate.process().logTail(30));
  // 502 when the request waited on the failed handshake, 503 when the
  // start-up connection had already failed (the proxy known down); the
  // reason reaches the app either way (as on Linux, upstream_h2_test.cc).
  auto r = env.curl({"-w", "\n%{http_code}", env.nginx.httpUrl("/1k")});
  INFO(r.out);
  CHECK((r.out.ends_with("\n502") || r.out.ends_with("\n503")));
  CHECK(r.out.find("certificate verify failed") != std::string::npos);
  CHECK(gate.process().waitForLog("certificate verify failed", milliseconds(10000)));
  AdminReply q = adminRequest("POST", gate.adminPort(), "/quitquitquit", {"X-H2gate-Admin: 1"});
  CHECK(q.status == 200);
  const auto exit = gate.process().wait(milliseconds(30000));
  REQUIRE(exit);
  CHECK(exit->code == 0);
}
