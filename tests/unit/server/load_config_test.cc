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
