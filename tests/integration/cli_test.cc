// The h2gate command line as a user meets it: --version, --help, --validate.
#include <catch2/catch.hpp>

#include <sstream>
#include <thread>

#include "tests/support/h2gate.h"
#include "tests/support/net.h"
#include "tests/support/process.h"
#include "tests/support/scrape.h"
#include "tests/support/temp_dir.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

CommandResult runH2gate(std::vector<std::string> args) {
  args.insert(args.begin(), H2gate::binaryPath(H2GATE_BINARY));
  return runCommand(args, milliseconds(10000));
}

struct Problem {
  int line = 0, column = 0;
  std::string path, message;
};

// Lines of the form "file:line:col: path: message" for `file`.
std::vector<Problem> problems(const std::string& output, const std::string& file) {
  std::vector<Problem> out;
  std::istringstream in(output);
  std::string l;
  const std::string re = "^" + regexEscape(file) + ":([0-9]+):([0-9]+): ([^ ]*): (.+)$";
  while (std::getline(in, l)) {
    if (auto m = regexSearch(l, re))
      out.push_back({std::stoi((*m)[1]), std::stoi((*m)[2]), (*m)[3], (*m)[4]});
  }
  return out;
}

}  // namespace

TEST_CASE("--version and --help exit 0", "[cli]") {
  auto v = runH2gate({"--version"});
  CHECK(v.exit_code == 0);
  CHECK(regexSearch(v.out + v.err, "[0-9]+\\.[0-9]+\\.[0-9]+"));
  auto h = runH2gate({"--help"});
  CHECK(h.exit_code == 0);
  CHECK((h.out + h.err).find("--listen") != std::string::npos);
  CHECK((h.out + h.err).find("--validate") != std::string::npos);
}

TEST_CASE("an unknown flag is an error", "[cli]") {
  auto r = runH2gate({"--no-such-flag"});
  CHECK(r.exit_code != 0);
  CHECK(r.exit_code != -1);
  CHECK((r.out + r.err).find("--no-such-flag") != std::string::npos);
}

TEST_CASE("--validate", "[cli]") {
  TempDir dir("validate");
  SECTION("a good config exits 0") {
    std::string good = dir.write("good.yaml", directModeYaml("  drain_timeout: 2s\n"));
    auto r = runH2gate({"--validate", "-c", good});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
  }
  SECTION("a bad config exits 1 and prints every problem as file:line:col: path: message") {
    std::string bad = dir.write("bad.yaml",
                                "admin:\n"      // 1
                                "  address:\n"  // 2
                                "    socket_address: {address: 127.0.0.1, port_value: 99999}\n"
                                "static_resources:\n"      // 4
                                "  listeners:\n"           // 5
                                "  - name: local_proxy\n"  // 6
                                "    address:\n"           // 7
                                "      socket_address: {address: 127.0.0.1, port_value: 3128}\n"
                                "    bogus_field: 1\n"                          // 9
                                "    filter_chains:\n"                          // 10
                                "    - filters:\n"                              // 11
                                "      - name: h2gate.filters.access_log\n"     // 12
                                "      - name: h2gate.filters.forward_proxy\n"  // 13
                                "        typed_config: {cluster: nope}\n"       // 14
                                "h2gate:\n"                                     // 15
                                "  drain_timeout: forever\n");                  // 16
    auto r = runH2gate({"--validate", "-c", bad});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    auto ps = problems(r.out + "\n" + r.err, bad);
    auto has = [&](int line, const std::string& path_part) {
      for (const auto& p : ps)
        if (p.line == line && p.column > 0 && p.path.find(path_part) != std::string::npos &&
            !p.message.empty())
          return true;
      return false;
    };
    CHECK(has(3, "port_value"));
    CHECK(has(9, "bogus_field"));
    CHECK(has(14, "cluster"));
    CHECK(has(16, "drain_timeout"));
    CHECK(ps.size() == 4);
  }
  SECTION("a YAML syntax error is reported with its position") {
    std::string bad = dir.write("syntax.yaml", "admin:\n  address: [unclosed\n");
    auto r = runH2gate({"--validate", "-c", bad});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK(regexSearch(r.out + r.err, regexEscape(bad) + ":[0-9]+:[0-9]+: "));
  }
  SECTION("a missing file exits 1") {
    auto r = runH2gate({"--validate", "-c", dir.file("missing.yaml")});
    CHECK(r.exit_code == 1);
    CHECK((r.out + r.err).find("missing.yaml") != std::string::npos);
  }
}

TEST_CASE("hostile config files: size, nesting, control characters", "[cli]") {
  TempDir dir("hostile");
  SECTION("100,000-deep nesting: the depth and where it gave up, at once") {
    const std::string deep = dir.write("deep.yaml", "a: b\nc: " + std::string(100000, '[') + "\n");
    const auto t0 = std::chrono::steady_clock::now();
    auto r = runH2gate({"--validate", "-c", deep});
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.out.find(deep + ":2:68: YAML nested more than 64 levels deep") != std::string::npos);
    CHECK(r.out.find("level 65") != std::string::npos);
    CHECK(r.out.find("bad file") == std::string::npos);
    CHECK(secs < 5);
  }
  SECTION("control characters are shown escaped, on stdout and stderr") {
    const std::string evil =
        dir.write("evil.yaml", directModeYaml() + "    \"x\\e]0;pwned\\a\\e[2J\": 1\n");
    auto v = runH2gate({"--validate", "-c", evil});
    auto s = runH2gate({"-c", evil});
    for (const std::string& out : {v.out, s.err}) {
      INFO(out);
      CHECK(out.find('\x1b') == std::string::npos);
      CHECK(out.find('\x07') == std::string::npos);
      CHECK(out.find("x\\x1b]0;pwned\\x07\\x1b[2J: unknown field") != std::string::npos);
    }
    CHECK(s.exit_code == 1);
  }
  SECTION("above --max-config-size (default 8 MiB): refused before parsing") {
    const std::string big =
        dir.write("big.yaml", directModeYaml() + "# " + std::string(9u << 20, 'x') + "\n");
    auto r = runH2gate({"--validate", "-c", big});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.out.find("more than the 8 MiB a config file may have (h2gate --max-config-size SIZE "
                     "raises the limit)") != std::string::npos);
    auto ok = runH2gate({"--validate", "--max-config-size", "16M", "-c", big});
    INFO(ok.out << ok.err);
    CHECK(ok.exit_code == 0);
  }
}

TEST_CASE("--log-file: the log lines go to the file, appended; nothing on stderr", "[cli]") {
  TempDir dir("cli-log-file");
  const std::string log = dir.write("h2gate.log", "an earlier line\n");
  const uint16_t admin = freePort();
  Process p(
      std::vector<std::string>{H2gate::binaryPath(H2GATE_BINARY), "--listen", "127.0.0.1:0",
                               "--admin", "127.0.0.1:" + std::to_string(admin), "--log-file", log},
      dir.path().string());
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(10000);
  while (std::chrono::steady_clock::now() < deadline &&
         readFile(log).find("admin listening on") == std::string::npos)
    std::this_thread::sleep_for(milliseconds(50));
  AdminReply q = adminRequest("POST", admin, "/quitquitquit", {"X-H2gate-Admin: 1"});
  CHECK(q.status == 200);
  const auto st = p.wait(milliseconds(10000));
  REQUIRE(st);
  CHECK(st->code == 0);
  const std::string text = readFile(log);
  INFO(text);
  CHECK(text.starts_with("an earlier line\n"));
  CHECK(text.find("admin listening on 127.0.0.1:" + std::to_string(admin)) != std::string::npos);
  CHECK(text.find("all connections closed; exiting") != std::string::npos);
  CHECK(p.stderrText() == "");

  // A file that cannot be opened: said on stderr, exit 1.
  CommandResult bad = runH2gate({"--log-file", dir.path().string() + "/no/such/dir/x.log"});
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("--log-file") != std::string::npos);
  CHECK(bad.err.find("cannot open for appending") != std::string::npos);
}

TEST_CASE("service: Windows only, said on other platforms", "[cli]") {
  CommandResult r = runH2gate({"service", "install"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("service: Windows only") != std::string::npos);
  CHECK(runH2gate({"service", "uninstall"}).exit_code == 2);
  CHECK(runH2gate({"service", "run"}).exit_code == 2);
}
