// The system-wide proxy settings of tests/clients/README.md,
// read from tests/clients/README.md itself so the two cannot drift, applied the way users
// apply them, with real clients through h2gate -> nghttpx (h2) -> squid ->
// nginx (ClientsEnv: the origin is origin.test, a name only squid resolves):
//
//   [systemd]  the ```ini block's [Service] Environment= lines in a unit that
//              `systemd-analyze verify` accepts and a real systemd runs (a
//              private user manager, tests/clients/systemd/run_unit.sh):
//              curl and wget fetch 1 MiB over HTTPS and HTTP through h2gate,
//              and a 127.0.0.1 URL goes direct (the NO_PROXY line).
//   [wininet]  the ```bat block's `reg add` lines (per-user Internet
//              Settings) run by wine's cmd and reg, then a WinINet client
//              (tests/clients/windows/wininet_client.cc, cross-built with
//              mingw-w64) fetches 1 MiB over HTTPS and HTTP through h2gate,
//              and a dotless name goes direct (ProxyOverride <local>).
//
// Each runs as a ctest entry of its own (clients_systemd, clients_wininet),
// which ctest reports as skipped when the test prints "H2GATE-SKIP:" (no
// root for the private manager; no wine or no mingw-w64). The test decides
// that before it checks anything, so a skip never hides a failure.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/support/clients_env.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

// The one fenced block of tests/clients/README.md opened with "```<lang>" that contains
// `needle`, without its fences. FAILs unless there is exactly one.
std::string readmeBlock(const std::string& lang, const std::string& needle) {
  const std::string readme = std::string(H2GATE_SOURCE_DIR) + "/tests/clients/README.md";
  std::istringstream in(readFile(readme));
  std::vector<std::string> found;
  std::string line, block, fence;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!inside && line.rfind("```", 0) == 0) {
      inside = true;
      fence = line.substr(3);
      block.clear();
    } else if (inside && line == "```") {
      inside = false;
      if (fence == lang && block.find(needle) != std::string::npos) found.push_back(block);
    } else if (inside) {
      block += line + "\n";
    }
  }
  INFO("tests/clients/README.md: ```" << lang << " blocks containing '" << needle << "'");
  REQUIRE(found.size() == 1);
  return found.front();
}

// `text` with every 127.0.0.1:3128 (the client matrix's address) replaced by the
// test's h2gate listener; REQUIREs that there was one.
std::string atListener(std::string text, uint16_t port) {
  const std::string from = "127.0.0.1:3128", to = "127.0.0.1:" + str(port);
  size_t n = 0;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
    ++n;
  }
  REQUIRE(n > 0);
  return text;
}

// h2gate's access log entries whose method is `method` and whose target
// contains `needle`.
size_t gateEntries(ClientsEnv& env, const std::string& method, const std::string& needle) {
  size_t n = 0;
  for (const auto& e : env.gate->accessLog())
    if (e.get("method") == method && e.get("target").find(needle) != std::string::npos) ++n;
  return n;
}

// The h2 proxy's access log lines for `method` that contain `needle`.
size_t proxyLines(ClientsEnv& env, const std::string& method, const std::string& needle) {
  size_t n = 0;
  for (const auto& line : env.nghttpx.accessLines(method))
    if (line.find(needle) != std::string::npos) ++n;
  return n;
}

// Everything the clients fetched: `connects` tunnels to the origin's HTTPS
// port, one absolute-form GET per tag in `gets`, each carried by h2gate over
// its h2 connection; the origin served each tag in `direct` once, and
// neither h2gate nor the proxy saw it.
void checkCarried(ClientsEnv& env, size_t connects, const std::vector<std::string>& gets,
                  const std::vector<std::string>& direct) {
  const std::string tunnel = "origin.test:" + str(env.nginx.tlsPort());
  // Tunnels are logged when they end (h2gate's half-close timeout, 1 s).
  env.nghttpx.waitForAccessLines(connects, "CONNECT", milliseconds(5000));
  env.nghttpx.waitForAccessLines(connects + gets.size(), "", milliseconds(5000));
  env.gate->waitForAccessLog(connects + gets.size(), milliseconds(5000));
  INFO("h2gate:\n"
       << env.gate->process().stdoutText() << "\nnghttpx:\n"
       << env.nghttpx.accessLog());
  CHECK(gateEntries(env, "CONNECT", tunnel) == connects);
  CHECK(proxyLines(env, "CONNECT", tunnel) == connects);
  for (const auto& tag : gets) {
    INFO(tag);
    CHECK(gateEntries(env, "GET", "origin.test:" + str(env.nginx.httpPort()) + "/1m?" + tag) == 1);
    CHECK(proxyLines(env, "GET", "/1m?" + tag) == 1);
  }
  for (const auto& e : env.gate->accessLog()) {
    if (e.get("target").find("origin.test") == std::string::npos) continue;
    CHECK(e.get("protocol") == "h2");
    CHECK(e.get("status") == "200");
  }
  for (const auto& tag : direct) {
    INFO(tag);
    CHECK(env.nginx.waitForAccessCount("/1m?" + tag + " ", 1) == 1);
    CHECK(countOccurrences(env.gate->process().stdoutText(), tag) == 0);
    CHECK(countOccurrences(env.nghttpx.accessLog(), tag) == 0);
  }
}

}  // namespace

TEST_CASE("clients: a systemd service with the client matrix's Environment= lines", "[systemd]") {
  const std::string runner = kClientsDir + "/systemd/run_unit.sh";
  {
    auto can = runCommand({"bash", runner, "--can-run"});
    if (can.exit_code == 77) {
      WARN("H2GATE-SKIP: no private systemd manager can run here: " << can.err);
      return;
    }
    INFO(can.err);
    REQUIRE(can.exit_code == 0);
  }
  if (!haveProgram("systemd-analyze"))
    FAIL("systemd not installed: run deploy/install-deps.sh --test");
  if (!haveProgram("wget")) FAIL("wget not installed: run deploy/install-deps.sh --test");
  ClientsEnv env;
  const std::string curl = findProgram("curl"), wget = findProgram("wget");

  // The service runs as nobody: its files live in a directory run_unit.sh
  // hands over to it.
  TempDir svc{"systemd-unit"};
  const std::string w = svc.path().string();
  std::filesystem::copy_file(env.ca.caCertPath(), w + "/ca.pem");

  // tests/clients/README.md's [Service] block, then what the test adds: a oneshot whose
  // ExecStart= lines are the clients. Nothing else sets a proxy: the manager
  // starts with an empty environment.
  const std::string readme = atListener(readmeBlock("ini", "[Service]"), env.gate->port());
  REQUIRE(readme.rfind("[Service]\n", 0) == 0);
  const std::string http = "http://origin.test:" + str(env.nginx.httpPort());
  const std::string https = "https://origin.test:" + str(env.nginx.tlsPort());
  const std::string loopback = "http://127.0.0.1:" + str(env.nginx.httpPort());
  std::string unit =
      "[Unit]\nDescription=h2gate README: proxy variables for a service\n"
      "DefaultDependencies=no\n\n" +
      readme + "Type=oneshot\n" + "StandardOutput=append:" + w +
      "/stdout\nStandardError=append:" + w + "/stderr\n";
  for (const auto& [get, tag, url] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {curl + " -q -sS -f --cacert " + w + "/ca.pem -o", "curl-https", https},
           {curl + " -q -sS -f -o", "curl-http", http},
           {curl + " -q -sS -f -o", "curl-loopback", loopback},
           {wget + " -q --ca-certificate=" + w + "/ca.pem -O", "wget-https", https},
           {wget + " -q -O", "wget-http", http},
           {wget + " -q -O", "wget-loopback", loopback}})
    unit += "ExecStart=" + get + " " + w + "/" + tag + " " + url + "/1m?systemd-" + tag + "\n";
  const std::string unit_file = env.work.path().string() + "/h2gate-readme-proxy.service";
  writeFile(unit_file, unit);
  INFO("unit:\n" << unit);

  // systemd's own check of the unit: unknown keys and bad syntax are
  // warnings on stderr (exit 0), so stderr must stay empty.
  auto verify = env.run({}, {"systemd-analyze", "verify", "--man=no", unit_file});
  CHECK(verify.exit_code == 0);
  CHECK(verify.err.empty());

  auto ran = env.run({}, {"bash", runner, unit_file, w}, milliseconds(120000));
  INFO("service stderr:\n" << readFile(w + "/stderr"));
  REQUIRE(ran.exit_code == 0);
  CHECK(ran.out.find("Result=success") != std::string::npos);
  for (const std::string tag :
       {"curl-https", "curl-http", "curl-loopback", "wget-https", "wget-http", "wget-loopback"}) {
    INFO(tag);
    CHECK(env.same(w + "/" + tag));
  }
  // curl's and wget's HTTPS tunnels and plain GETs went through h2gate and
  // the h2 proxy; the loopback URLs (NO_PROXY / no_proxy) went direct.
  checkCarried(env, 2, {"systemd-curl-http", "systemd-wget-http"},
               {"systemd-curl-loopback", "systemd-wget-loopback"});
}

namespace {

// wine with a prefix of its own (H2GATE_WINEPREFIX, in the build tree),
// WINEDEBUG=-all. Its wineserver is stopped when this goes out of scope, so
// it holds no pipe or file of the test open.
struct Wine {
  std::string wine, prefix;

  static std::string find() {
    for (const char* name : {"wine64", "wine"})
      if (std::string p = findProgram(name); !p.empty()) return p;
    return std::filesystem::exists("/usr/lib/wine/wine64") ? "/usr/lib/wine/wine64" : "";
  }

  // Runs a Windows program (or wine's cmd, reg) with `args`. runCommand
  // clears http_proxy & co.: wine's WinINet takes http_proxy from the
  // environment when ProxyEnable is 0, so only the registry may speak here.
  CommandResult run(const std::vector<std::string>& args,
                    milliseconds timeout = milliseconds(120000)) const {
    std::vector<std::string> argv{"env", "WINEPREFIX=" + prefix, "WINEDEBUG=-all", wine};
    argv.insert(argv.end(), args.begin(), args.end());
    CommandResult r = runCommand(argv, timeout);
    UNSCOPED_INFO("wine " << ClientsEnv::join(args) << "\nexit " << r.exit_code
                          << "\nstdout: " << r.out << "\nstderr: " << r.err);
    return r;
  }

  ~Wine() {
    const std::string server = std::filesystem::path(wine).parent_path() / "wineserver";
    runCommand({"env", "WINEPREFIX=" + prefix,
                std::filesystem::exists(server) ? server : std::string("wineserver"), "-k"},
               milliseconds(10000));
  }
};

// A Unix path as a Windows program under wine sees it (drive Z: is /).
std::string winPath(std::string path) {
  for (char& c : path)
    if (c == '/') c = '\\';
  return "Z:" + path;
}

const std::string kInternetSettings =
    "HKCU\\Software\\Microsoft\\Windows\\CurrentVersion\\Internet Settings";

}  // namespace

TEST_CASE("clients: WinINet under wine with the client matrix's per-user proxy (reg add)",
          "[wininet]") {
  const std::string client = H2GATE_WININET_CLIENT;
  const std::string wine = Wine::find();
  if (wine.empty()) {
    WARN("H2GATE-SKIP: wine not installed (Debian: wine64; deploy/install-deps.sh --test)");
    return;
  }
  if (client.empty() || !std::filesystem::exists(client)) {
    WARN(
        "H2GATE-SKIP: the WinINet client was not built: mingw-w64 (Debian: "
        "g++-mingw-w64-x86-64) was missing when cmake ran; deploy/install-deps.sh --test, "
        "then cmake again");
    return;
  }
  ClientsEnv env;
  Wine w{wine, H2GATE_WINEPREFIX};

  // A clean slate: a setting left in the prefix by an earlier run must not
  // stand in for one the README lost, and the CAs of earlier runs (same
  // name, other keys) must not be picked for this run's chain. (The first
  // wine start makes the prefix.)
  for (const char* value : {"ProxyEnable", "ProxyServer", "ProxyOverride"})
    w.run({"reg", "delete", kInternetSettings, "/v", value, "/f"});
  w.run({"reg", "delete", "HKCU\\Software\\Microsoft\\SystemCertificates\\Root", "/f"});
  CHECK(w.run({"reg", "query", kInternetSettings, "/v", "ProxyServer"}).exit_code != 0);

  // The README's lines (ProxyServer, ProxyOverride, ProxyEnable), as a batch
  // file run by cmd (so its quoting is cmd's), each followed by a check of
  // its exit status.
  std::istringstream readme(
      atListener(readmeBlock("bat", "reg add \"" + kInternetSettings + "\""), env.gate->port()));
  std::string script = "@echo off\r\n", line;
  int commands = 0;
  while (std::getline(readme, line)) {
    if (line.empty() || line.rfind("::", 0) == 0) continue;
    script += line + "\r\nif errorlevel 1 exit /b 1\r\n";
    ++commands;
  }
  CHECK(commands == 3);
  const std::string bat = env.work.path().string() + "/set-proxy.cmd";
  writeFile(bat, script);
  REQUIRE(w.run({"cmd", "/c", winPath(bat)}).exit_code == 0);

  const std::string proxy_line =
      "proxy: PROXY 127.0.0.1:" + str(env.gate->port()) + " bypass <local>";
  const std::string https = "https://origin.test:" + str(env.nginx.tlsPort()) + "/1m?wininet-https";
  const std::string http = "http://origin.test:" + str(env.nginx.httpPort()) + "/1m?wininet-http";
  const std::string local = "http://localhost:" + str(env.nginx.httpPort()) + "/1m?wininet-local";
  for (const auto& [url, file] : std::vector<std::pair<std::string, std::string>>{
           {https, "wininet-https"}, {http, "wininet-http"}, {local, "wininet-local"}}) {
    INFO(url);
    const std::string out = env.out.file(file);
    // The https fetch first puts the origin's CA in the user's Root store
    // (certutil's job on Windows).
    std::vector<std::string> args{client, "get", url, winPath(out)};
    if (url == https) args.push_back(winPath(env.ca.caCertPath()));
    auto r = w.run(args);
    CHECK(r.exit_code == 0);
    // What WinINet read from the settings: the README's proxy and bypass list.
    CHECK(r.out.substr(0, r.out.find_first_of("\r\n")) == proxy_line);
    CHECK(env.same(out));
  }
  checkCarried(env, 1, {"wininet-http"}, {"wininet-local"});
}
