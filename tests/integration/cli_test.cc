// The h2gate command line as a user meets it: --version, --help, --validate.
#include <catch2/catch.hpp>

#include <sstream>

#include "tests/support/h2gate.h"
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
