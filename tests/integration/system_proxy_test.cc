// The system-wide proxy settings of the README ("Pointing apps at h2gate"),
// read from README.md itself so the two cannot drift, applied the way users
// apply them, with real clients through h2gate -> nghttpx (h2) -> squid ->
// nginx (ClientsEnv: the origin is origin.test, a name only squid resolves):
//
//   [systemd]  the ```ini block's [Service] Environment= lines in a unit that
//              `systemd-analyze verify` accepts and a real systemd runs (a
//              private user manager, tests/clients/systemd/run_unit.sh):
//              curl and wget fetch 1 MiB over HTTPS and HTTP through h2gate,
//              and a 127.0.0.1 URL goes direct (the NO_PROXY line).
//
// Each runs as a ctest entry of its own (clients_systemd), which ctest
// reports as skipped when the test prints "H2GATE-SKIP:" (no root for the
// private manager). The test decides that before it checks anything, so a
// skip never hides a failure.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "tests/support/clients_env.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

// The one fenced block of README.md opened with "```<lang>" that contains
// `needle`, without its fences. FAILs unless there is exactly one.
std::string readmeBlock(const std::string& lang, const std::string& needle) {
  const std::string readme = std::string(H2GATE_SOURCE_DIR) + "/README.md";
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
  INFO("README.md: ```" << lang << " blocks containing '" << needle << "'");
  REQUIRE(found.size() == 1);
  return found.front();
}

// `text` with every 127.0.0.1:3128 (the README's address) replaced by the
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
    CHECK(countOccurrences(env.nginx.accessLog(), "/1m?" + tag + " ") == 1);
    CHECK(countOccurrences(env.gate->process().stdoutText(), tag) == 0);
    CHECK(countOccurrences(env.nghttpx.accessLog(), tag) == 0);
  }
}

}  // namespace

TEST_CASE("clients: a systemd service with the README's Environment= lines", "[systemd]") {
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

  // The README's [Service] block, then what the test adds: a oneshot whose
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
