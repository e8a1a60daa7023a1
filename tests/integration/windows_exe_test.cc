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

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/auth_proxy.h"
#include "tests/support/background_downloads.h"
#include "tests/support/h2_env.h"
#include "tests/support/net.h"
#include "tests/support/pac_auth_env.h"
#include "tests/support/scrape.h"
#include "tests/support/upstream_env.h"
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
// (sed -u: unbuffered, so the fixture sees each log line at once). It
// writes the pid of wine's process (the Windows process h2gate.exe: wine's
// loader execs in place) to wine.pid beside itself.
// Before it exits it waits (up to 5 s) for the sed of stderr: that sed is
// a process substitution, which bash does not wait for, and a command that
// failed at once under load used to return before its message was written
// ("exit 1 and not a word" from `service install` and `service uninstall`).
std::string writeWrapper(const TempDir& dir, const std::string& wine, const std::string& exe) {
  const std::string pid_file = (dir.path() / "wine.pid").string();
  const std::string path = dir.write("h2gate-wine.sh", R"(#!/bin/bash
export WINEDEBUG=-all
exec 3>&2
exec 2> >(sed -u 's/\r$//' >&3)
err_sed=$!
{ echo $BASHPID > ")" + pid_file + R"("; exec ")" + wine + R"(" ")" +
                                                           exe +
                                                           R"(" "$@"; } 3>&- | sed -u 's/\r$//'
rc=${PIPESTATUS[0]}
exec 2>&3 3>&-
for _ in $(seq 50); do kill -0 $err_sed 2>/dev/null || break; sleep 0.1; done
exit $rc
)");
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

// h2gate.exe `args` through `wrapper`, `input` on its standard input (a
// file: not a console, so h2gate.exe reads one line without a prompt), its
// logs in `work`; what it said goes to the test's report.
CommandResult exeCommand(const std::string& wrapper, const TempDir& work,
                         const std::vector<std::string>& args, const std::string& input = "") {
  static int runs = 0;
  Process::Options o;
  o.argv = {wrapper};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.log_dir = work.path().string();
  o.name = "run" + std::to_string(++runs);
  o.stdin_file = work.write(o.name + ".stdin", input);
  Process p(o);
  CommandResult r;
  const std::optional<ExitStatus> status = p.wait(milliseconds(60000));
  if (!status) p.stop();
  r.exit_code = status && status->exited ? status->code : -1;
  r.out = p.stdoutText();
  r.err = p.stderrText();
  std::string shown;
  for (const std::string& a : args) shown += " " + a;
  UNSCOPED_INFO("h2gate.exe" << shown << ": exit " << r.exit_code << "\n" << r.out << r.err);
  return r;
}

// n parallel 20 MiB downloads over HTTP/1.1 to the origin (4 MB/s each)
// into out/<prefix>0..n-1, for stopping h2gate.exe mid-transfer; a cold
// wine is slow, so 20 s for h2gate to count them and 120 s to finish.
BackgroundDownloads twentyMiB(const std::string& prefix, int n) {
  BackgroundDownloads d;
  d.count = n;
  d.prefix = prefix;
  d.path = "/20m";
  d.sha256 = sizedTestFile("20m", 20 << 20).sha256;
  d.curl_flags = {"--http1.1"};
  d.open_timeout = milliseconds(20000);
  d.poll = milliseconds(200);
  d.timeout = milliseconds(120000);
  return d;
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
    const auto start = Clock::now();
    auto r = env.curl(args, milliseconds(180000));
    std::cout << "[figures] h2gate.exe under wine: 5 x 20 MiB uploads in " << secondsSince(start)
              << " s\n";
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
  quitDuringDownloads(env, gate, twentyMiB("q", 10), milliseconds(30000));
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

// Ctrl+C: wine turns SIGINT to its process into a CTRL_C_EVENT for the
// console control handlers (as a Ctrl+C in its terminal does); h2gate
// drains like on SIGTERM and exits 0 after the transfers completed.
TEST_CASE("h2gate.exe under wine: Ctrl+C drains and exits 0", "[windows-exe]") {
  std::string exe, wine;
  if (const std::string why = unavailable(exe, wine); !why.empty()) {
    std::cout << "H2GATE-SKIP: " << why << "\n";
    return;
  }
  H2Env env;
  TempDir work("windows-exe-ctrlc");
  const std::string wrapper = writeWrapper(work, wine, exe);
  env.gate = std::make_unique<H2gate>(
      exeOptions(wrapper, {"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--upstream",
                           env.nghttpx.url(), "--cacert", env.ca.caCertPath()}));
  H2gate& gate = *env.gate;
  INFO(gate.process().logTail(30));
  REQUIRE(gate.process().waitForLog(
      "proxy 127\\.0\\.0\\.1:" + str(env.nghttpx.port()) + " negotiated h2", milliseconds(30000)));
  const pid_t wine_pid = std::stoi(readFile((work.path() / "wine.pid").string()));
  REQUIRE(wine_pid > 0);

  const BackgroundDownloads d = twentyMiB("c", 5);
  auto transfers = startDownloads(env, gate.proxyUrl(), gate.adminPort(), d);
  CHECK(scrapeMetrics(gate.adminPort()).sum("h2gate_requests_active") == 5);
  REQUIRE(::kill(wine_pid, SIGINT) == 0);
  CHECK(gate.process().waitForLog("Ctrl\\+C: no longer accepting; draining 5 connection\\(s\\)",
                                  milliseconds(10000)));
  checkDownloads(env, *transfers, d);
  const auto exit = gate.process().wait(milliseconds(30000));
  REQUIRE(exit);
  CHECK(exit->exited);
  CHECK(exit->code == 0);
  CHECK(gate.process().waitForLog("all connections closed; exiting", milliseconds(1000)));
}

namespace {

// `wine PROGRAM ARGS...` (sc.exe, net.exe of wine's prefix), "\r" stripped.
CommandResult wineRun(const std::string& wine, std::vector<std::string> args,
                      milliseconds timeout = milliseconds(60000)) {
  args.insert(args.begin(), wine);
  CommandResult r = runCommand(args, {{"WINEDEBUG", "-all"}}, timeout);
  std::erase(r.out, '\r');
  std::erase(r.err, '\r');
  return r;
}

// `sc query h2gate`'s STATE line's name ("RUNNING", "STOPPED", ...), or ""
// when the service does not exist.
std::string serviceState(const std::string& wine) {
  CommandResult r = wineRun(wine, {"sc", "query", "h2gate"});
  auto m = regexSearch(r.out, "STATE[[:space:]]*:[[:space:]]*[0-9]+[[:space:]]+([A-Z_]+)");
  return m ? (*m)[1] : "";
}

// Runs `f` when the scope ends, however it ends (a failed REQUIRE too).
struct AtExit {
  std::function<void()> f;
  ~AtExit() { f(); }
};

// A wine session of the test's own for a test that registers something in
// the prefix (a service, a Run value): wine's session (wineserver,
// services.exe and the services) ends a few seconds after its last ordinary
// process, taking a running service with it, and the next wine command
// boots the prefix again, starting auto-start services. A persistent
// wineserver (start()) keeps one session for the whole test; it is ended
// when the WineSession goes (-k: this test's prefix only). What the test
// registered is removed before that: an AtExit declared after it.
class WineSession {
 public:
  explicit WineSession(const std::string& wine)
      : server_((std::filesystem::path(wine).parent_path() / "wineserver").string()) {
    REQUIRE(std::filesystem::exists(server_));
    kill();  // a session left by an earlier run
    runCommand({server_, "-w"});
  }
  ~WineSession() { kill(); }
  WineSession(const WineSession&) = delete;
  WineSession& operator=(const WineSession&) = delete;
  bool start() const { return runCommand({server_, "-p"}).exit_code == 0; }
  void kill() const { runCommand({server_, "-k"}); }

 private:
  std::string server_;
};

}  // namespace

// The Windows service under wine's service manager (services.exe, sc.exe):
// install, start, a download through it, stop while transfers run (they
// complete, the service reports STOPPED with exit code 0), the log file,
// uninstall.
TEST_CASE("h2gate.exe as a Windows service under wine's service manager",
          "[windows-exe][windows-service]") {
  std::string exe, wine;
  if (const std::string why = unavailable(exe, wine); !why.empty()) {
    std::cout << "H2GATE-SKIP: " << why << "\n";
    return;
  }
  H2Env env;
  TempDir work("windows-service");
  const std::string wrapper = writeWrapper(work, wine, exe);
  const uint16_t port = freePort();
  const uint16_t admin = freePort();
  // Z: is wine's drive for "/": the service's working directory is
  // C:\windows\system32, so every path it is given is a full Windows path.
  const std::string log_path = work.path().string() + "/service.log";
  const std::string log_arg = "Z:" + log_path;

  WineSession session(wine);
  REQUIRE(session.start());

  // Whatever happens, the service is gone afterwards: an auto-start service
  // left in the prefix would start with every later wine session. When
  // stopping fails, `sc delete` only marks it; the registry key is removed
  // then.
  auto purge = [&] {
    if (serviceState(wine).empty()) return;
    wineRun(wine, {"sc", "stop", "h2gate"});
    for (int i = 0; i < 60 && serviceState(wine) != "STOPPED"; ++i)
      std::this_thread::sleep_for(milliseconds(500));
    wineRun(wine, {"sc", "delete", "h2gate"});
    session.kill();
    if (serviceState(wine).empty()) return;
    wineRun(wine, {"reg", "delete", "HKLM\\System\\CurrentControlSet\\Services\\h2gate", "/f"});
    session.kill();
  };
  const AtExit guard{purge};
  if (!serviceState(wine).empty()) {  // left by a crashed run
    purge();
    REQUIRE(session.start());
  }

  auto install = [&] {
    return runCommand({wrapper, "service", "install", "--listen", "127.0.0.1:" + str(port),
                       "--admin", "127.0.0.1:" + str(admin), "--log-level", "debug", "--upstream",
                       env.nghttpx.url(), "--cacert", env.ca.caCertPath(), "--log-file", log_arg},
                      milliseconds(60000));
  };
  // `service install` and `service uninstall` each get one more try when
  // they fail, with what they said: in full runs under load each failed
  // once (exit code 1; its words were lost to the wrapper's race, fixed
  // since), neither reproduced in loops. A real failure fails twice.
  auto tried = [&](const char* what, const std::function<CommandResult()>& run) {
    CommandResult r = run();
    if (r.exit_code != 0) {
      std::cout << "[warn] h2gate.exe service " << what << " under wine: exit code " << r.exit_code
                << (r.timed_out ? " (timed out)" : "") << ": " << r.out << r.err
                << "; service state '" << serviceState(wine) << "'; trying once more\n";
      r = run();
    }
    return r;
  };
  const CommandResult inst = tried("install", install);
  INFO("install: exit code " << inst.exit_code << (inst.timed_out ? " (timed out)" : "") << ": "
                             << inst.out << inst.err);
  REQUIRE(inst.exit_code == 0);
  CHECK(inst.out.find("installed the service h2gate") != std::string::npos);
  // Installed, not started; its command line has the full paths.
  CHECK(serviceState(wine) == "STOPPED");
  // (wine's sc.exe has no `qc`: the service's registry key instead.)
  CommandResult qc =
      wineRun(wine, {"reg", "query", "HKLM\\System\\CurrentControlSet\\Services\\h2gate"});
  INFO("service key: " << qc.out);
  CHECK(qc.out.find("service run") != std::string::npos);
  std::string win_log = log_arg;  // made absolute: backslashes
  std::replace(win_log.begin(), win_log.end(), '/', '\\');
  CHECK(qc.out.find(win_log) != std::string::npos);
  CHECK(regexSearch(qc.out, "Start[[:space:]]+REG_DWORD[[:space:]]+0x2"));  // SERVICE_AUTO_START
  // A second install is refused with the reason.
  CommandResult again = runCommand({wrapper, "service", "install"}, milliseconds(60000));
  CHECK(again.exit_code == 1);
  CHECK(again.err.find("service uninstall") != std::string::npos);

  CommandResult start = wineRun(wine, {"sc", "start", "h2gate"});
  INFO("sc start: " << start.out << start.err);
  CHECK(start.exit_code == 0);
  const auto deadline = Clock::now() + milliseconds(60000);
  while (Clock::now() < deadline && adminGet(admin, "/ready").status != 200)
    std::this_thread::sleep_for(milliseconds(300));
  INFO("log: " << readFile(log_path));
  REQUIRE(adminGet(admin, "/ready").status == 200);
  CHECK(serviceState(wine) == "RUNNING");

  const std::string proxy = "http://127.0.0.1:" + str(port);
  {
    CommandResult r =
        runCurl({"-sS", "-x", proxy, "--cacert", env.ca.caCertPath(), "-o", env.out.file("one"),
                 "-w", "%{http_code}", env.nginx.httpsUrl("/1m?svc")});
    INFO(r.err);
    CHECK(r.out == "200");
    CHECK(sha256File(env.out.file("one")) == testFile("1m").sha256);
  }

  // The tunnel above ends a moment after curl (half-closed, then silent).
  const auto idle = Clock::now() + milliseconds(10000);
  while (Clock::now() < idle && scrapeMetrics(admin).sum("h2gate_requests_active") != 0)
    std::this_thread::sleep_for(milliseconds(200));

  // sc stop during 5 transfers: they complete, the service stops with 0.
  const BackgroundDownloads d = twentyMiB("s", 5);
  auto transfers = startDownloads(env, proxy, admin, d);
  CHECK(scrapeMetrics(admin).sum("h2gate_requests_active") == 5);
  CommandResult stop = wineRun(wine, {"sc", "stop", "h2gate"});
  INFO("sc stop: " << stop.out << stop.err);
  CHECK(stop.exit_code == 0);
  CHECK(stop.out.find("STOP_PENDING") != std::string::npos);
  checkDownloads(env, *transfers, d);
  const auto stopped = Clock::now() + milliseconds(30000);
  while (Clock::now() < stopped && serviceState(wine) != "STOPPED")
    std::this_thread::sleep_for(milliseconds(300));
  CHECK(serviceState(wine) == "STOPPED");
  CommandResult q = wineRun(wine, {"sc", "query", "h2gate"});
  INFO("sc query: " << q.out);
  CHECK(regexSearch(q.out, "WIN32_EXIT_CODE[[:space:]]*:[[:space:]]*0[^0-9]"));

  std::string log = readFile(log_path);
  std::erase(log, '\r');
  INFO("log: " << log);
  CHECK(log.find("service h2gate: starting") != std::string::npos);
  CHECK(log.find("service h2gate: running") != std::string::npos);
  CHECK(log.find("service h2gate: service stop requested: stop pending") != std::string::npos);
  CHECK(log.find("service stop: no longer accepting; draining 5 connection(s)") !=
        std::string::npos);
  CHECK(log.find("all connections closed; exiting") != std::string::npos);
  CHECK(log.find("service h2gate: stopped, exit code 0") != std::string::npos);

  const CommandResult un = tried("uninstall", [&] {
    return runCommand({wrapper, "service", "uninstall"}, milliseconds(60000));
  });
  INFO("uninstall: exit code " << un.exit_code << (un.timed_out ? " (timed out)" : "") << ": "
                               << un.out << un.err);
  CHECK(un.exit_code == 0);
  CHECK(serviceState(wine) == "");
  // Uninstalling what is not there says so.
  CommandResult un2 = runCommand({wrapper, "service", "uninstall"}, milliseconds(60000));
  CHECK(un2.exit_code == 1);
}

// POST /reload on Windows (no SIGHUP there): the config file's cluster moved
// to a second nghttpx; the next tunnels go there, the process stays; a broken
// file is refused as a whole with file:line:column and the old config goes on.
TEST_CASE("h2gate.exe under wine: POST /reload moves the cluster; a broken file is refused",
          "[windows-exe]") {
  std::string exe, wine;
  if (const std::string why = unavailable(exe, wine); !why.empty()) {
    std::cout << "H2GATE-SKIP: " << why << "\n";
    return;
  }
  H2Env env;
  TempDir work("windows-exe-reload");
  const std::string wrapper = writeWrapper(work, wine, exe);
  Nghttpx second(H2Env::nghttpxOptions(env.options, env.ca, env.squid.httpPort()));
  H2gate::Options o = exeOptions(wrapper, {"--log-level", "debug"});
  o.yaml = upstreamModeYaml(env.nghttpx.port(), env.ca.caCertPath());
  env.gate = std::make_unique<H2gate>(o);
  H2gate& gate = *env.gate;
  INFO(gate.process().logTail(30));
  const TestFile& f = testFile("1m");
  auto fetch = [&](const std::string& name) {
    auto r = env.curl(
        {"-o", env.out.file(name), "-w", "%{http_code}", env.nginx.httpsUrl("/1m?" + name)});
    INFO(r.err);
    CHECK(r.out == "200");
    CHECK(sha256File(env.out.file(name)) == f.sha256);
  };
  // nghttpx logs a tunnel when its stream ends: wait for the lines.
  const milliseconds logged(10000);
  fetch("before");
  CHECK(env.nghttpx.waitForAccessLines(1, "CONNECT", logged).size() == 1);
  CHECK(second.accessLines().empty());

  gate.writeFile("h2gate.yaml", upstreamModeYaml(second.port(), env.ca.caCertPath()));
  AdminReply r = adminRequest("POST", gate.adminPort(), "/reload", {"X-H2gate-Admin: 1"});
  INFO(r.body);
  CHECK(r.status == 200);
  REQUIRE(gate.process().waitForLog("configuration reloaded from .*clusters: 1 changed \\(proxy\\)",
                                    milliseconds(10000)));
  fetch("after");
  CHECK(second.waitForAccessLines(1, "CONNECT", logged).size() == 1);
  CHECK(env.nghttpx.accessLines("CONNECT").size() == 1);

  // A broken file: refused, with where; the running config stays.
  gate.writeFile("h2gate.yaml", "static_resources:\n  clusters: {name: [}\n");
  AdminReply bad = adminRequest("POST", gate.adminPort(), "/reload", {"X-H2gate-Admin: 1"});
  INFO(bad.body);
  CHECK(bad.status == 400);
  CHECK(bad.body.find("h2gate.yaml:2:") != std::string::npos);
  fetch("kept");
  CHECK(second.waitForAccessLines(2, "CONNECT", logged).size() == 2);
  CHECK(second.clients().size() == 1);  // the same connection
  CHECK(env.nghttpx.accessLines("CONNECT").size() == 1);
  CHECK(
      scrapeMetrics(gate.adminPort()).sum("h2gate_config_reloads_total", {{"result", "success"}}) ==
      1);

  AdminReply q = adminRequest("POST", gate.adminPort(), "/quitquitquit", {"X-H2gate-Admin: 1"});
  CHECK(q.status == 200);
  const auto exit = gate.process().wait(milliseconds(30000));
  REQUIRE(exit);
  CHECK(exit->code == 0);
}

// h2gate.exe to squid's https_port, which offers no ALPN: HTTP/1.1 over TLS;
// squid's Basic authentication: without credentials its 407 reaches the
// app, with them (user:pass@ in --upstream) the same requests pass.
TEST_CASE("h2gate.exe under wine: HTTP/1.1 fallback to squid's https_port, a 407 reaching the app",
          "[windows-exe]") {
  std::string exe, wine;
  if (const std::string why = unavailable(exe, wine); !why.empty()) {
    std::cout << "H2GATE-SKIP: " << why << "\n";
    return;
  }
  H1Env env(/*auth=*/true);
  TempDir work("windows-exe-h1");
  const std::string wrapper = writeWrapper(work, wine, exe);
  const TestFile& f = testFile("1m");
  for (const std::string userinfo : {"", "alice:s3cret"}) {
    INFO("userinfo '" << userinfo << "'");
    env.gate = std::make_unique<H2gate>(exeOptions(
        wrapper, {"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-level", "debug",
                  "--upstream", env.proxyUrl(userinfo), "--cacert", env.ca.caCertPath()}));
    H2gate& gate = *env.gate;
    INFO(gate.process().logTail(30));
    REQUIRE(gate.process().waitForLog(
        "proxy 127\\.0\\.0\\.1:" + str(env.squid.httpsPort()) + " negotiated (http/1\\.1|no ALPN)",
        milliseconds(30000)));
    // Absolute-form GET and a CONNECT tunnel.
    auto get =
        env.curl({"-o", env.out.file("h1get"), "-w", "%{http_code}", env.nginx.httpUrl("/1m?h1")});
    auto tunnel = env.curl({"-o", env.out.file("h1connect"), "-w", "%{http_connect} %{http_code}",
                            env.nginx.httpsUrl("/1m?h1")});
    INFO("GET: " << get.out << get.err << "\nCONNECT: " << tunnel.out << tunnel.err);
    if (userinfo.empty()) {
      CHECK(get.out == "407");
      CHECK(tunnel.out == "407 000");
      CHECK(tunnel.exit_code == 56);  // curl: CONNECT refused by the proxy
    } else {
      CHECK(get.out == "200");
      CHECK(sha256File(env.out.file("h1get")) == f.sha256);
      CHECK(tunnel.out == "200 200");
      CHECK(sha256File(env.out.file("h1connect")) == f.sha256);
    }
    CHECK(gate.stderrText().find("negotiated h2") == std::string::npos);
    AdminReply q = adminRequest("POST", gate.adminPort(), "/quitquitquit", {"X-H2gate-Admin: 1"});
    CHECK(q.status == 200);
    const auto exit = gate.process().wait(milliseconds(30000));
    REQUIRE(exit);
    CHECK(exit->code == 0);
    env.gate.reset();
  }
  // squid decided: the CONNECT without credentials denied, the one with them
  // let through.
  const auto connects = env.squid.waitForAccessLines(2, "CONNECT", milliseconds(5000));
  INFO(connects.size() << " CONNECT lines");
  REQUIRE(connects.size() >= 2);
  CHECK(connects.front().find(" 407 ") != std::string::npos);
  CHECK(connects.back().find(" 200 ") != std::string::npos);
}

// A PAC file run by h2gate.exe's own worker processes (h2gate.exe
// --pac-worker, gateway/pac_engine/worker.h): DIRECT answers reach nginx, two
// evaluations stuck in a native function (Array.prototype.indexOf over an
// array-like of length 2^31 - 1, minutes of work) get the fallback at
// their 2 s deadline and their workers are killed and replaced
// (TerminateProcess), and /quitquitquit while two more run ends h2gate.exe
// and its workers.
TEST_CASE("h2gate.exe under wine: a PAC file's native call is stopped in its worker process",
          "[windows-exe]") {
  std::string exe, wine;
  if (const std::string why = unavailable(exe, wine); !why.empty()) {
    std::cout << "H2GATE-SKIP: " << why << "\n";
    return;
  }
  Nginx nginx;
  TempDir work("windows-exe-pac");
  const std::string wrapper = writeWrapper(work, wine, exe);
  const std::string pac =
      work.write("native.pac",
                 "function FindProxyForURL(url, host) {\n"
                 "  if (host.indexOf(\"native\") == 0)\n"
                 "    return String(Array.prototype.indexOf.call({length: 2147483647}, 1));\n"
                 "  return \"DIRECT\";\n"
                 "}\n");
  // The listener's name makes the workers' command lines this test's own.
  const std::string listener = "pac_exe_native";
  H2gate::Options o = exeOptions(wrapper, {"--log-level", "debug"});
  o.yaml =
      "admin:\n"
      "  address:\n"
      "    socket_address: {address: 127.0.0.1, port_value: 0}\n"
      "static_resources:\n"
      "  listeners:\n" +
      listenerYaml(listener,
                   "      - name: h2gate.filters.forward_proxy\n"
                   "        typed_config:\n"
                   "          routes:\n"
                   "          - match: {}\n"
                   "            pac:\n"
                   "              file: " +
                       pac +
                       "\n"
                       "              evaluation: {timeout: 2s}\n"
                       "              fallback: {reject: 503}\n");
  o.listeners = {listener};
  H2gate gate(o);
  INFO(gate.process().logTail(40));
  REQUIRE(gate.process().waitForLog("using the PAC file from", kPacLoadTimeout));
  // h2gate.exe's workers: wine processes of their own (not children of
  // h2gate.exe's Linux process), found by their command line.
  auto workers = [&] {
    std::vector<pid_t> out;
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      const std::string cmd = commandLine(static_cast<pid_t>(std::stol(name)));
      if (cmd.find("--pac-worker " + listener) != std::string::npos)
        out.push_back(static_cast<pid_t>(std::stol(name)));
    }
    return out;
  };
  // Waits up to 10 s for the workers `pids` to be gone; "" then, else each one
  // left with its state from /proc/PID/stat (R running, S sleeping, D in the
  // kernel, T stopped), its CPU seconds and its command line, so that a
  // failure under load says whether wine had not yet ended the process or it
  // went on computing.
  auto leftOver = [&](const std::vector<pid_t>& pids) {
    std::string left;
    for (int i = 0; i < 100; ++i) {
      left.clear();
      for (pid_t p : pids) {
        const std::string cmd = commandLine(p);
        if (cmd.find("--pac-worker") == std::string::npos) continue;
        std::string state = readFile("/proc/" + std::to_string(p) + "/stat");
        const size_t paren = state.rfind(')');
        state = paren != std::string::npos && paren + 2 < state.size() ? state.substr(paren + 2, 1)
                                                                       : "?";
        left += "pid " + std::to_string(p) + " state " + state + ", " +
                std::to_string(treeCpuSeconds(p)) + " CPU s: " + cmd + "\n";
      }
      if (left.empty()) return left;
      std::this_thread::sleep_for(milliseconds(100));
    }
    return left;
  };
  auto direct = [&] {
    const CommandResult r = runCurl({"-sS", "-o", "/dev/null", "-w", "%{http_code}", "-x",
                                     gate.proxyUrl(), nginx.httpUrl("/1k")},
                                    milliseconds(60000));
    INFO(r.err);
    return r.out;
  };
  auto twoNative = [&](const std::string& tag) {
    std::vector<std::unique_ptr<Process>> out;
    for (int i = 0; i < 2; ++i)
      out.push_back(
          startCurl({"-sS", "-o", "/dev/null", "-w", "%{http_code}", "-x", gate.proxyUrl(),
                     "--max-time", "60", "http://native" + std::to_string(i) + ".test/" + tag},
                    work.path().string(), tag + std::to_string(i)));
    return out;
  };

  CHECK(direct() == "200");
  auto requests = twoNative("a");
  std::this_thread::sleep_for(milliseconds(1000));
  const std::vector<pid_t> busy = workers();
  CHECK(busy.size() == 2);
  const auto start = std::chrono::steady_clock::now();
  for (auto& r : requests) {
    const auto st = r->wait(milliseconds(30000));
    REQUIRE(st);
    CHECK(readFile(r->stdoutPath()) == "503");
  }
  CHECK(std::chrono::steady_clock::now() - start < milliseconds(10000));
  CHECK(gate.process().waitForLog("its worker process was killed", milliseconds(10000)));
  CHECK(leftOver(busy) == "");
  CHECK(direct() == "200");  // a new worker, the same file

  auto more = twoNative("b");
  std::this_thread::sleep_for(milliseconds(1000));
  const std::vector<pid_t> busy_again = workers();
  CHECK(busy_again.size() == 2);
  AdminReply q = adminRequest("POST", gate.adminPort(), "/quitquitquit", {"X-H2gate-Admin: 1"});
  CHECK(q.status == 200);
  const auto exit = gate.process().wait(milliseconds(30000));
  REQUIRE(exit);
  CHECK(exit->code == 0);
  CHECK(leftOver(busy_again) == "");
}

TEST_CASE("h2gate.exe under wine: credentials set, show, delete in Credential Manager",
          "[windows-exe][keyring]") {
  std::string exe, wine;
  if (const std::string why = unavailable(exe, wine); !why.empty()) {
    std::cout << "H2GATE-SKIP: " << why << "\n";
    return;
  }
  TempDir work("windows-keyring");
  const std::string wrapper = writeWrapper(work, wine, exe);
  const std::string name = "h2gate-exe-test-" + std::to_string(::getpid());
  auto run = [&](const std::vector<std::string>& args, const std::string& input = "") {
    return exeCommand(wrapper, work, args, input);
  };
  const AtExit cleanup{[&] { run({"credentials", "delete", name}); }};

  CommandResult r = run({"credentials", "set", name, "CORP\\alice"}, "win-pw-5\n");
  CHECK(r.exit_code == 0);
  CHECK(r.out == "stored entry '" + name + "' (user CORP\\alice) in Windows Credential Manager\n");
  r = run({"credentials", "show", name});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "entry '" + name +
                     "' in Windows Credential Manager: user CORP\\alice, a password is stored\n");
  CHECK(r.out.find("win-pw-5") == std::string::npos);
  CHECK(r.err.find("win-pw-5") == std::string::npos);

  // A config that reads it: valid while the entry is there.
  const std::string config = work.write(
      "h2gate.yaml",
      "static_resources:\n"
      "  listeners:\n" +
          listenerYaml("local_proxy",
                       "      - name: h2gate.filters.forward_proxy\n"
                       "        typed_config: {cluster: corp}\n") +
          "  clusters:\n"
          "  - name: corp\n"
          "    load_assignment:\n"
          "      endpoints:\n"
          "      - lb_endpoints:\n"
          "        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 9}}}\n"
          "    proxy_authentication:\n"
          "      scheme: ntlm\n"
          "      credentials: {keyring: " +
          name + "}\n");
  r = run({"--validate", "-c", "Z:" + config});
  CHECK(r.exit_code == 0);

  r = run({"credentials", "delete", name});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "deleted entry '" + name + "' from Windows Credential Manager\n");
  r = run({"credentials", "show", name});
  CHECK(r.exit_code == 1);
  CHECK(r.err == "h2gate: no entry '" + name + "' in Windows Credential Manager\n");
  r = run({"--validate", "-c", "Z:" + config});
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("proxy_authentication.credentials.keyring: no entry '" + name +
                   "' in Windows Credential Manager") != std::string::npos);
}

namespace {

// `wine reg query HKCU\...\Run /v h2gate`: the value's data, "" when none.
std::string runValue(const std::string& wine) {
  CommandResult r = wineRun(
      wine,
      {"reg", "query", "HKCU\\Software\\Microsoft\\Windows\\CurrentVersion\\Run", "/v", "h2gate"});
  auto m = regexSearch(r.out, "^[[:space:]]*h2gate[[:space:]]+REG_SZ[[:space:]]+(.*)$");
  return m ? (*m)[1] : "";
}

// A Windows path of the prefix (C:\...) as a Linux path.
std::string prefixPath(const std::string& windows_path) {
  std::string p = windows_path;
  std::replace(p.begin(), p.end(), '\\', '/');
  if (p.size() > 2 && (p[0] == 'C' || p[0] == 'c') && p[1] == ':')
    return envOr("WINEPREFIX", "") + "/drive_c" + p.substr(2);
  return p;
}

void deleteRunValue(const std::string& wine) {
  wineRun(wine, {"reg", "delete", "HKCU\\Software\\Microsoft\\Windows\\CurrentVersion\\Run", "/v",
                 "h2gate", "/f"});
}

// How `autostart install` of h2gate.exe `exe` writes the Run value's start:
// the exe's full Windows path (Z: is wine's "/"), quoted when it has a
// space, then the verb.
std::string runValueStart(const std::string& exe) {
  std::string win_exe = "Z:" + std::filesystem::absolute(exe).string();
  std::replace(win_exe.begin(), win_exe.end(), '/', '\\');
  const bool quoted = win_exe.find(' ') != std::string::npos;
  return (quoted ? "\"" + win_exe + "\"" : win_exe) + " autostart run ";
}

// The logon: what Explorer does with a Run value, the value's command line
// started by cmd. (wine's own logon, wineboot running the Run values, is
// checked by tests/windows/msi_test.sh's per-user step in a fresh prefix; in
// the session tests/windows/run.sh keeps for these tests, wineboot started
// nothing: no h2gate, no log.) Returns once the h2gate it started answers
// /healthz on `admin` (not /ready: a proxy that is not up makes it 503).
std::unique_ptr<Process> logOn(const std::string& wine, const std::string& value,
                               const TempDir& work, uint16_t admin) {
  Process::Options logon;
  logon.argv = {wine, "cmd", "/c", value};
  logon.log_dir = work.path().string();
  logon.name = "logon";
  auto started = std::make_unique<Process>(logon);
  const auto deadline = Clock::now() + milliseconds(60000);
  while (Clock::now() < deadline && adminGet(admin, "/healthz").status != 200)
    std::this_thread::sleep_for(milliseconds(300));
  REQUIRE(adminGet(admin, "/healthz").status == 200);
  return started;
}

}  // namespace

// The per-user start at logon (gateway/server/autostart_win.cc) and the
// LocalSystem warning (gateway/server/run_as.h), under wine:
// - `autostart install` writes the HKCU Run value, read back by wine's
//   reg.exe: the exe's full path, `autostart run`, the flags, the default
//   per-user log file; again: unchanged; `status` prints it;
// - wine's logon (wineboot without -i runs the HKCU Run values,
//   programs/wineboot/wineboot.c) starts h2gate from that command line, as a
//   user process: /ready, its log in %LOCALAPPDATA%\h2gate names the user SID
//   and has no LocalSystem warning although its cluster uses negotiate
//   single sign-on;
// - with the service installed (LocalSystem, the same single sign-on
//   flags): `h2gate check` warns that the installed service authenticates
//   as the computer account, `autostart install` warns of the service; the
//   service's own log shows the SID wine gives a service process: wine runs
//   every process, services too, as S-1-5-21-0-0-0-1000, never S-1-5-18, so
//   the warning at the service's start cannot show under wine (asserted
//   either way: present for S-1-5-18, absent otherwise);
// - uninstall removes the value; again: "not installed", 0.
TEST_CASE("h2gate.exe autostart under wine: the Run value, the logon, the LocalSystem warning",
          "[windows-exe][windows-autostart]") {
  std::string exe, wine;
  if (const std::string why = unavailable(exe, wine); !why.empty()) {
    std::cout << "H2GATE-SKIP: " << why << "\n";
    return;
  }
  REQUIRE(!envOr("WINEPREFIX", "").empty());
  TempDir work("windows-autostart");
  const std::string wrapper = writeWrapper(work, wine, exe);
  const uint16_t port = freePort();
  const uint16_t admin = freePort();
  const uint16_t svc_port = freePort();
  const uint16_t svc_admin = freePort();
  // Nothing listens there: the cluster is only configured, never used.
  const std::string proxy = "http://127.0.0.1:" + str(freePort());
  const std::vector<std::string> sso = {"--upstream", proxy,         "--proxy-auth",
                                        "negotiate",  "--log-level", "debug"};

  WineSession session(wine);
  REQUIRE(session.start());
  auto purge = [&] {
    deleteRunValue(wine);
    adminPost(admin, "/quitquitquit", milliseconds(2000));
    if (serviceState(wine).empty()) return;
    wineRun(wine, {"sc", "stop", "h2gate"});
    for (int i = 0; i < 60 && serviceState(wine) == "RUNNING"; ++i)
      std::this_thread::sleep_for(milliseconds(500));
    wineRun(wine, {"sc", "delete", "h2gate"});
    wineRun(wine, {"reg", "delete", "HKLM\\System\\CurrentControlSet\\Services\\h2gate", "/f"});
  };
  const AtExit guard{purge};
  purge();  // left by a crashed run

  auto h2gate = [&](std::vector<std::string> args) {
    args.insert(args.begin(), wrapper);
    return runCommand(args, milliseconds(60000));
  };

  CommandResult st = h2gate({"autostart", "status"});
  CHECK(st.exit_code == 1);
  CHECK(st.out.find("autostart: not installed") != std::string::npos);

  std::vector<std::string> flags = {"autostart", "install",
                                    "--listen",  "127.0.0.1:" + str(port),
                                    "--admin",   "127.0.0.1:" + str(admin)};
  flags.insert(flags.end(), sso.begin(), sso.end());
  CommandResult in = h2gate(flags);
  INFO("install: " << in.out << in.err);
  REQUIRE(in.exit_code == 0);
  CHECK(in.out.find("autostart: installed") != std::string::npos);
  CHECK(in.err.find("service") == std::string::npos);  // none installed: no warning

  // Read back by reg.exe: the exe's full Windows path (Z: is wine's "/"),
  // the flags in order, the default per-user log file added.
  const std::string value = runValue(wine);
  INFO("Run value: " << value);
  const std::string expected_start = runValueStart(exe) + "--listen 127.0.0.1:" + str(port) +
                                     " --admin 127.0.0.1:" + str(admin) + " --upstream " + proxy +
                                     " --proxy-auth negotiate --log-level debug --log-file ";
  REQUIRE(value.rfind(expected_start, 0) == 0);
  const std::string log_win = value.substr(expected_start.size());
  CHECK(regexSearch(log_win,
                    "^C:\\\\users\\\\[^\\\\]+\\\\AppData\\\\Local\\\\h2gate\\\\h2gate\\.log$"));
  const std::string log_path = prefixPath(log_win);
  std::filesystem::remove(log_path);

  CommandResult again = h2gate(flags);
  CHECK(again.exit_code == 0);
  CHECK(again.out.find("already installed, unchanged") != std::string::npos);
  CHECK(runValue(wine) == value);
  st = h2gate({"autostart", "status"});
  CHECK(st.exit_code == 0);
  CHECK(st.out.find(value) != std::string::npos);

  // The logon (the cluster's proxy is never up: /healthz only).
  const std::unique_ptr<Process> started = logOn(wine, value, work, admin);
  {
    std::string log = readFile(log_path);
    std::erase(log, '\r');
    INFO("log of the h2gate the logon started: " << log);
    CHECK(log.find("listening on 127.0.0.1:" + str(port)) != std::string::npos);
    auto sid = regexSearch(log, "running as the user SID (S-1-5-[0-9-]+)");
    REQUIRE(sid);
    CHECK((*sid)[1] != "S-1-5-18");
    CHECK(log.find("as LocalSystem") == std::string::npos);
  }
  CHECK(adminPost(admin, "/quitquitquit").status == 200);

  // The service beside it, with the same single sign-on flags.
  const std::string svc_log = work.path().string() + "/service.log";
  std::vector<std::string> svc_flags = {"service",    "install",
                                        "--listen",   "127.0.0.1:" + str(svc_port),
                                        "--admin",    "127.0.0.1:" + str(svc_admin),
                                        "--log-file", "Z:" + svc_log};
  svc_flags.insert(svc_flags.end(), sso.begin(), sso.end());
  CommandResult si = h2gate(svc_flags);
  INFO("service install: " << si.out << si.err);
  REQUIRE(si.exit_code == 0);

  // h2gate check (as this user, with a config of its own without single
  // sign-on) warns of the installed service.
  CommandResult check =
      h2gate({"check", "http://127.0.0.1:" + str(freePort()) + "/", "--step-timeout", "2s"});
  INFO("check: " << check.out << check.err);
  CHECK(regexSearch(check.out, "WARN +account"));
  CHECK(check.out.find("the installed service h2gate runs as LocalSystem: single sign-on "
                       "(Negotiate, NTLM) to cluster 'upstream' (negotiate) authenticates as "
                       "this computer's account (DOMAIN\\HOST$)") != std::string::npos);
  CHECK(check.out.find("-> for the user's identity run h2gate as that user ('h2gate autostart "
                       "install'") != std::string::npos);

  // autostart install beside the service says so (and installs).
  CommandResult beside = h2gate(flags);
  CHECK(beside.exit_code == 0);
  CHECK(beside.err.find("warning: the service h2gate is installed too (not running, as "
                        "LocalSystem)") != std::string::npos);

  // The service's start: which SID wine gives it, and the warning only for
  // S-1-5-18.
  CommandResult start = wineRun(wine, {"sc", "start", "h2gate"});
  INFO("sc start: " << start.out << start.err);
  const auto svc_deadline = Clock::now() + milliseconds(60000);
  while (Clock::now() < svc_deadline && adminGet(svc_admin, "/healthz").status != 200)
    std::this_thread::sleep_for(milliseconds(300));
  REQUIRE(adminGet(svc_admin, "/healthz").status == 200);
  {
    std::string log = readFile(svc_log);
    std::erase(log, '\r');
    INFO("service log: " << log);
    auto sid = regexSearch(log, "running as the user SID (S-1-5-[0-9-]+)");
    REQUIRE(sid);
    const bool warned = log.find("h2gate runs as LocalSystem") != std::string::npos;
    if ((*sid)[1] == "S-1-5-18") {
      CHECK(warned);
    } else {
      CHECK_FALSE(warned);
      std::cout << "[note] wine runs the service as " << (*sid)[1]
                << ", not LocalSystem (S-1-5-18): its start-up warning cannot show here\n";
    }
  }
  wineRun(wine, {"sc", "stop", "h2gate"});
  for (int i = 0; i < 60 && serviceState(wine) != "STOPPED"; ++i)
    std::this_thread::sleep_for(milliseconds(500));
  CommandResult su = h2gate({"service", "uninstall"});
  CHECK(su.exit_code == 0);

  CommandResult un = h2gate({"autostart", "uninstall"});
  INFO("uninstall: " << un.out << un.err);
  CHECK(un.exit_code == 0);
  CHECK(un.out.find("autostart: removed") != std::string::npos);
  CHECK(runValue(wine).empty());
  CommandResult un2 = h2gate({"autostart", "uninstall"});
  CHECK(un2.exit_code == 0);
  CHECK(un2.out.find("autostart: not installed") != std::string::npos);
  CHECK(h2gate({"autostart", "status"}).exit_code == 1);

  // Without the service, check has nothing to warn of about accounts.
  CommandResult check2 =
      h2gate({"check", "http://127.0.0.1:" + str(freePort()) + "/", "--step-timeout", "2s"});
  CHECK_FALSE(regexSearch(check2.out, "WARN +account"));
}

// A Windows user's day under wine (issue 28's Windows end-to-end test):
//  1. `h2gate credentials set` stores the user's NTLM identity (CORP\alice
//     and the password, typed once) in Credential Manager;
//  2. `h2gate autostart install --pac URL --proxy-auth ntlm
//     --proxy-credentials keyring:NAME` registers the per-user start at
//     logon: the Run value names the entry, never the password;
//  3. the logon starts it; the company's PAC file (served by nginx) sends
//     localhost to the NTLM proxy (the test proxy, its NTLMv2 verified by
//     gss-ntlmssp: tests/support/auth_proxy.h) and the rest DIRECT;
//  4. the apps' transfers (curl, CONNECT and absolute-form) arrive byte for
//     byte; each proxied one is in the proxy's log as CORP\alice, a name only
//     the Credential Manager entry holds (SSPI's NTLM package with that
//     explicit identity: gateway/upstream/auth/sspi_win.cc, from
//     proxy_authentication.credentials: gateway/upstream/auth/proxy_auth.cc);
//     the DIRECT ones reached no proxy;
//  5. `autostart uninstall`: the Run value is gone.
// What wine cannot show: Credential Manager is wine's (the entry lives in the
// prefix's registry, HKCU\Software\Wine\Credential Manager, its password
// obscured with a key stored beside it, not in a vault protected by the
// user's logon); SSPI's NTLM is wine's, which has Samba's ntlm_auth compute
// the NTLMv2 answer, not Windows' own package; no domain controller checks
// it (the proxy's gss-ntlmssp does, from a password file); the logon is the
// Run value's command line started by cmd, not Explorer at an interactive
// logon; and there is no domain logon at all, so the single sign-on without
// stored credentials (the logged-on user's own identity) cannot be shown
// here.
TEST_CASE("h2gate.exe under wine, a user's day: Credential Manager, autostart, NTLM by PAC file",
          "[windows-exe][windows-day]") {
  using namespace h2gate::test::pacauth;
  std::string exe, wine;
  if (const std::string why = unavailable(exe, wine); !why.empty()) {
    std::cout << "H2GATE-SKIP: " << why << "\n";
    return;
  }
  REQUIRE(!envOr("WINEPREFIX", "").empty());
  if (const std::string missing = authProxyMissing(); !missing.empty())
    FAIL("not installed: " << missing);
  const auto t0 = Clock::now();
  PacEnv env;  // nginx: the PAC file and the origin's files, and the test CA
  AuthProxy::Options po;
  po.schemes = "ntlm";
  po.ntlm_users = {"CORP:alice:alice-ntlm-pw"};
  po.ntlm_acceptor = "gss-ntlmssp";
  AuthProxy proxy(po);
  TempDir work("windows-day");
  const std::string wrapper = writeWrapper(work, wine, exe);
  const std::string entry = "h2gate-day-" + std::to_string(::getpid());
  const uint16_t port = freePort();
  const uint16_t admin = freePort();

  WineSession session(wine);
  REQUIRE(session.start());
  const AtExit cleanup{[&] {
    adminPost(admin, "/quitquitquit", milliseconds(2000));
    deleteRunValue(wine);
    exeCommand(wrapper, work, {"credentials", "delete", entry});
  }};
  deleteRunValue(wine);  // left by a crashed run

  // 1. The identity into Credential Manager.
  CommandResult r =
      exeCommand(wrapper, work, {"credentials", "set", entry, "CORP\\alice"}, "alice-ntlm-pw\n");
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "stored entry '" + entry + "' (user CORP\\alice) in Windows Credential Manager\n");

  // 2. The PAC file and the start at logon.
  const std::string route = "PROXY 127.0.0.1:" + str(proxy.port());
  env.writePac("corp.pac", pacFor(route, "localhost"));
  const std::string pac_url = env.pacUrl("corp.pac");
  r = exeCommand(wrapper, work,
                 {"autostart", "install", "--listen", "127.0.0.1:" + str(port), "--admin",
                  "127.0.0.1:" + str(admin), "--pac", pac_url, "--proxy-auth", "ntlm",
                  "--proxy-credentials", "keyring:" + entry});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("autostart: installed") != std::string::npos);
  const std::string value = runValue(wine);
  INFO("Run value: " << value);
  const std::string expected_start = runValueStart(exe) + "--listen 127.0.0.1:" + str(port) +
                                     " --admin 127.0.0.1:" + str(admin) + " --pac " + pac_url +
                                     " --proxy-auth ntlm --proxy-credentials keyring:" + entry +
                                     " --log-file ";
  REQUIRE(value.rfind(expected_start, 0) == 0);
  CHECK(value.find("alice") == std::string::npos);
  const std::string log_path = prefixPath(value.substr(expected_start.size()));
  std::filesystem::remove(log_path);

  // 3. The logon; h2gate has the PAC file.
  const std::unique_ptr<Process> started = logOn(wine, value, work, admin);
  auto log_text = [&] {
    std::string text = readFile(log_path);
    std::erase(text, '\r');
    return text;
  };
  const auto loaded = Clock::now() + kPacLoadTimeout;
  while (Clock::now() < loaded && log_text().find("using the PAC file from") == std::string::npos)
    std::this_thread::sleep_for(milliseconds(300));
  INFO("log of the h2gate the logon started:\n" << log_text());
  REQUIRE(log_text().find("using the PAC file from " + pac_url) != std::string::npos);
  CHECK(has(pacEval(admin, env.url("localhost", true, "/")),
            "credentials for " + route + ": ntlm\n"));

  // 4. The apps' transfers: through the NTLM proxy (two tunnels, one
  // absolute-form GET), and DIRECT (one of each).
  auto fetch = [&](const std::string& url, const std::string& name) {
    const CommandResult c =
        runCurl({"-sS", "-x", "http://127.0.0.1:" + str(port), "--cacert", env.ca.caCertPath(),
                 "--max-time", "60", "-o", env.out.file(name), "-w", "%{http_code}", url},
                milliseconds(70000));
    INFO("curl " << url << ": exit " << c.exit_code << " " << c.out << " " << c.err);
    CHECK(c.out == "200");
    CHECK(sha256File(env.out.file(name)) == testFile("1m").sha256);
  };
  fetch(env.url("localhost", true, "/1m?c1"), "c1");
  fetch(env.url("localhost", true, "/1m?c2"), "c2");
  fetch(env.url("localhost", false, "/1m?g1"), "g1");
  fetch(env.url("127.0.0.1", true, "/1m?d1"), "d1");
  fetch(env.url("127.0.0.1", false, "/1m?d2"), "d2");

  // The proxy's log: each proxied transfer as CORP\alice, an NTLMv2
  // handshake per connection, never a request without credentials; the
  // DIRECT ones are not there.
  INFO("the NTLM proxy's log:\n" << proxy.logText());
  INFO("h2gate's log after the transfers:\n" << log_text());
  const std::string tunnel = "localhost:" + str(env.nginx.tlsPort());
  const std::string get = env.url("localhost", false, "/1m?g1");
  size_t tunnels = 0, gets = 0, handshakes = 0;
  for (const auto& e : proxy.requests()) {
    CHECK(e.at("scheme") != "none");
    CHECK(e.at("target").find("127.0.0.1") == std::string::npos);
    if (e.at("scheme") == "ntlm") {
      ++handshakes;
      CHECK(std::stoi(e.at("nt_len")) > 24);
    }
    if (e.count("status") == 0 || e.at("status") != "200") continue;
    CHECK(e.count("user") == 1);
    if (e.count("user")) CHECK(e.at("user") == "CORP\\alice");
    tunnels += e.at("method") == "CONNECT" && e.at("target") == tunnel;
    gets += e.at("method") == "GET" && e.at("target") == get;
  }
  CHECK(tunnels == 2);
  CHECK(gets == 1);
  CHECK(handshakes == 3);  // the tunnels' connections are theirs: the GET's is new
  CHECK(has(clustersLine(admin, route), " auth=ntlm "));
  CHECK_FALSE(has(log_text(), "alice-ntlm-pw"));
  CHECK_FALSE(has(log_text(), "TlRMTVNTUA"));

  // The evening: h2gate ends with the session; the start at logon removed.
  CHECK(adminPost(admin, "/quitquitquit").status == 200);
  r = exeCommand(wrapper, work, {"autostart", "uninstall"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("autostart: removed") != std::string::npos);
  CHECK(runValue(wine).empty());
  std::cout << "[figures] a user's day under wine: " << secondsSince(t0) << " s\n";
}
