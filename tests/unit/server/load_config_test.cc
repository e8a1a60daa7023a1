#include "gateway/server/load_config.h"

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "filters/filter.h"
#include "tests/support/config_util.h"
#include "tests/support/temp_dir.h"

using namespace h2gate::config;
using h2gate::checkConfig;
using h2gate::loadConfigFile;
using h2gate::loadConfigString;
using h2gate::testing::allProblems;

TEST_CASE("config's problems and the filters' come together, in file order",
          "[config][load_config][errors]") {
  const std::string yaml = R"(static_resources:
  listeners:
  - name: l
    address: {socket_address: {address: 127.0.0.1, port_value: 3128}}
    filter_chains:
    - filters:
      - name: h2gate.filters.nope
      - name: h2gate.filters.forward_proxy
        typed_config: {cluster: missing}
  - name: l
    address: {socket_address: {address: 127.0.0.1, port_value: 3129}}
    filter_chains: [{filters: [{name: h2gate.filters.forward_proxy}]}]
  clusters:
  - name: c
    connect_timeout: soon
)";
  const std::string expected =
      "cfg.yaml:7:15: static_resources.listeners[0].filter_chains[0].filters[0].name: unknown "
      "filter 'h2gate.filters.nope' (known: h2gate.filters.access_log, h2gate.filters.acl, "
      "h2gate.filters.forward_proxy, h2gate.filters.proxy_auth, h2gate.filters.upstream_headers)\n"
      "cfg.yaml:9:33: static_resources.listeners[0].filter_chains[0].filters[1].typed_config."
      "cluster: unknown cluster 'missing' (known: c)\n"
      "cfg.yaml:10:5: static_resources.listeners[1].name: duplicate listener name 'l' (also "
      "static_resources.listeners[0])\n"
      "cfg.yaml:14:5: static_resources.clusters[0].load_assignment: a cluster needs at least one "
      "endpoint\n"
      "cfg.yaml:15:22: static_resources.clusters[0].connect_timeout: expected a duration like "
      "5s\n";
  const LoadResult r = loadConfigString(yaml, "cfg.yaml");
  CHECK(allProblems(r.problems) == expected);

  // The same from a file, named in every problem.
  h2gate::test::TempDir dir{"load-config"};
  const std::string path = dir.file("cfg.yaml");
  std::ofstream(path) << yaml;
  std::string from_file = allProblems(loadConfigFile(path).problems);
  std::string with_path = expected;
  for (std::size_t at = 0; (at = with_path.find("cfg.yaml:", at)) != std::string::npos;
       at += path.size())
    with_path.replace(at, 8, path);
  CHECK(from_file == with_path);
}

TEST_CASE("a config that loads has its filters built", "[config][load_config]") {
  const LoadResult r = loadConfigString(h2gate::testing::kMinimalConfig, "cfg.yaml");
  REQUIRE(r.ok());
  REQUIRE(r.bootstrap.listeners[0].filters[0].filter);
  CHECK(r.bootstrap.listeners[0].filters[0].filter->terminal());

  // Unparseable: only the syntax error, nothing built.
  const LoadResult bad = loadConfigString("static_resources: [\n", "cfg.yaml");
  REQUIRE(bad.problems.size() == 1);
  CHECK(bad.problems[0].message.rfind("YAML syntax error", 0) == 0);
  CHECK(bad.bootstrap.listeners.empty());
}

TEST_CASE("checkConfig checks flag-made configs too", "[config][load_config]") {
  Bootstrap b = defaultBootstrap();
  b.source = "<flags>";
  YAML::Node typed;
  typed["cluster"] = "upstream";
  b.listeners[0].filters[1].typed_config = typed;
  CHECK(allProblems(checkConfig(b)) ==
        "<flags>: static_resources.listeners[0].filter_chains[0].filters[1].typed_config.cluster: "
        "unknown cluster 'upstream' (no clusters are defined)\n");
  Cluster c;
  c.name = "upstream";
  b.clusters.push_back(c);
  CHECK(allProblems(checkConfig(b)) ==
        "<flags>: static_resources.clusters[0].load_assignment: a cluster needs at least one "
        "endpoint\n");
  b.clusters[0].endpoints.push_back(SocketAddress{"proxy.example", 443});
  CHECK(checkConfig(b).empty());
  CHECK(b.listeners[0].filters[0].filter);
  CHECK(b.listeners[0].filters[1].filter);
  b.listeners.clear();
  CHECK(allProblems(checkConfig(b)) ==
        "<flags>: static_resources.listeners: at least one listener is required\n");
}

namespace {

std::string listenerOn(const std::string& address, const std::string& match = "") {
  return "static_resources:\n"
         "  listeners:\n"
         "  - name: lan\n"
         "    address: {socket_address: {address: \"" +
         address +
         "\", port_value: 3130}}\n"
         "    filter_chains:\n"
         "    - " +
         (match.empty() ? "" : "filter_chain_match: " + match + "\n      ") +
         "filters: [{name: h2gate.filters.forward_proxy}]\n";
}

}  // namespace

TEST_CASE("source_prefix_ranges: loaded, and bad entries name file, line, column and field",
          "[config][load_config][sources]") {
  const LoadResult ok = loadConfigString(
      listenerOn("0.0.0.0",
                 "{source_prefix_ranges: [{address_prefix: 172.16.0.0, prefix_len: 12}, "
                 "{address_prefix: \"fd00::\", prefix_len: 8}]}"),
      "cfg.yaml");
  INFO(allProblems(ok.problems));
  REQUIRE(ok.ok());
  const std::vector<SourcePrefixRange>& r = ok.bootstrap.listeners.at(0).source_prefix_ranges;
  REQUIRE(r.size() == 2);
  CHECK(r[0].address_prefix == "172.16.0.0");
  CHECK(r[0].prefix_len == 12);
  CHECK(r[1].address_prefix == "fd00::");
  CHECK(r[1].prefix_len == 8);
  CHECK(r[1].mark.line == 6);

  const std::string yaml = R"(static_resources:
  listeners:
  - name: lan
    address: {socket_address: {address: 0.0.0.0, port_value: 3130}}
    filter_chains:
    - filter_chain_match:
        source_prefix_ranges:
        - {address_prefix: 192.168.1.5, prefix_len: 24}
        - {address_prefix: 10.0.0.0, prefix_len: 33}
        - {address_prefix: wsl.internal, prefix_len: 20}
        - {address_prefix: 10.0.0.0}
        - {address_prefix: 10.0.0.0, prefix_len: 8, mask: 255.0.0.0}
      filters: [{name: h2gate.filters.forward_proxy}]
)";
  const std::string p = "static_resources.listeners[0].filter_chains[0].filter_chain_match.";
  CHECK(allProblems(loadConfigString(yaml, "cfg.yaml").problems) ==
        "cfg.yaml:8:11: " + p +
            "source_prefix_ranges[0]: '192.168.1.5/24' has host bits set (did you mean "
            "192.168.1.0/24?)\n"
            "cfg.yaml:9:11: " +
            p +
            "source_prefix_ranges[1]: prefix length /33 is longer than the address (at most "
            "/32)\n"
            "cfg.yaml:10:11: " +
            p + "source_prefix_ranges[2]: 'wsl.internal' is not an IPv4 or IPv6 address\n" +
            "cfg.yaml:11:11: " + p +
            "source_prefix_ranges[3].prefix_len: missing required field\n" +
            "cfg.yaml:12:53: " + p +
            "source_prefix_ranges[4].mask: unknown field (expected one of: address_prefix, "
            "prefix_len)\n");

  // An empty list would let everyone in: said, not taken as "no list".
  CHECK(
      allProblems(loadConfigString(listenerOn("0.0.0.0", "{source_prefix_ranges: []}"), "cfg.yaml")
                      .problems) ==
      "cfg.yaml:6:50: " + p +
          "source_prefix_ranges: an empty list would let every client in; list the clients' "
          "ranges, or 0.0.0.0/0 and ::/0 to allow everyone on purpose\n");
  CHECK(
      allProblems(
          loadConfigString(listenerOn("0.0.0.0", "{destination_port: 3130}"), "cfg.yaml").problems)
          .find("filter_chain_match.destination_port: unknown field") != std::string::npos);
}

TEST_CASE("a listener others can reach needs source_prefix_ranges",
          "[config][load_config][sources]") {
  const auto problems = [](const std::string& yaml) {
    LoadResult r = loadConfigString(yaml, "cfg.yaml");
    std::string out = allProblems(r.problems);
    if (r.ok()) out += allProblems(checkConfig(r.bootstrap));
    return out;
  };
  const std::string why =
      " without source_prefix_ranges (--allow): anyone who can reach it could use the proxy; "
      "list the clients' ranges, or 0.0.0.0/0 (and ::/0) to allow everyone on purpose\n";
  const std::string path =
      "cfg.yaml:3:5: static_resources.listeners[0].filter_chains[0].filter_chain_match."
      "source_prefix_ranges: listener 'lan' listens on ";
  CHECK(problems(listenerOn("0.0.0.0")) == path + "0.0.0.0:3130" + why);
  CHECK(problems(listenerOn("::")) == path + "[::]:3130" + why);
  CHECK(problems(listenerOn("192.168.56.1")) == path + "192.168.56.1:3130" + why);
  // Loopback needs no list; a list makes any address fine.
  CHECK(problems(listenerOn("127.0.0.1")) == "");
  CHECK(problems(listenerOn("::1")) == "");
  CHECK(problems(listenerOn("127.0.0.2")) == "");
  CHECK(problems(listenerOn(
            "0.0.0.0", "{source_prefix_ranges: [{address_prefix: 0.0.0.0, prefix_len: 0}]}")) ==
        "");
  CHECK(problems(listenerOn("192.168.56.1",
                            "{source_prefix_ranges: [{address_prefix: 192.168.56.0, "
                            "prefix_len: 24}]}")) == "");
  // A loopback listener with a non-loopback extra address is reachable too.
  CHECK(problems(R"(static_resources:
  listeners:
  - name: lan
    address: {socket_address: {address: 127.0.0.1, port_value: 3130}}
    additional_addresses: [{address: {socket_address: {address: 10.1.2.3, port_value: 3130}}}]
    filter_chains: [{filters: [{name: h2gate.filters.forward_proxy}]}]
)") == path + "10.1.2.3:3130" + why);
}
