#include "filters/chain.h"

#include <catch2/catch.hpp>

#include "config/loader.h"
#include "filters/registry.h"
#include "tests/support/config_util.h"

using h2gate::config::Bootstrap;
using h2gate::config::LoadResult;
using h2gate::filters::buildChains;
using h2gate::testing::allProblems;

namespace {

const char* const kMinimal = h2gate::testing::kMinimalConfig;

// What config alone reads (its own checks run too), for buildChains to build.
LoadResult parse(const std::string& yaml) {
  return h2gate::config::loadString(yaml, "cfg.yaml");
}

}  // namespace

TEST_CASE("config leaves the chain's content to the filters", "[filters][chain]") {
  // config parses names and typed_config and checks only that there is a chain.
  LoadResult r = parse(std::string(kMinimal) +
                       "      - name: h2gate.filters.nope\n"
                       "        typed_config: {anything: 1}\n");
  INFO(allProblems(r.problems));
  CHECK(r.ok());
  CHECK_FALSE(r.bootstrap.listeners[0].filters[0].filter);
  CHECK(allProblems(buildChains(r.bootstrap)) ==
        "cfg.yaml:7:15: static_resources.listeners[0].filter_chains[0].filters[0].name: "
        "'h2gate.filters.forward_proxy' is terminal and must be the last filter of the chain\n"
        "cfg.yaml:8:15: static_resources.listeners[0].filter_chains[0].filters[1].name: unknown "
        "filter 'h2gate.filters.nope' (known: h2gate.filters.access_log, h2gate.filters.acl, "
        "h2gate.filters.forward_proxy, h2gate.filters.proxy_auth, "
        "h2gate.filters.upstream_headers)\n");
}

TEST_CASE("filter chain shape is checked", "[filters][chain][errors]") {
  SECTION("the last filter must be forward_proxy") {
    LoadResult r = parse(R"(static_resources:
  listeners:
  - name: l
    address: {socket_address: {address: 127.0.0.1, port_value: 3128}}
    filter_chains: [{filters: [{name: h2gate.filters.access_log}]}]
)");
    REQUIRE(r.ok());
    CHECK(allProblems(buildChains(r.bootstrap)) ==
          "cfg.yaml:5:39: static_resources.listeners[0].filter_chains[0].filters[0].name: the "
          "last filter must be h2gate.filters.forward_proxy (it routes the request), got "
          "'h2gate.filters.access_log'\n");
  }
  SECTION("forward_proxy must be last") {
    LoadResult r = parse(std::string(kMinimal) + "      - name: h2gate.filters.forward_proxy\n");
    REQUIRE(r.ok());
    CHECK(allProblems(buildChains(r.bootstrap)) ==
          "cfg.yaml:7:15: static_resources.listeners[0].filter_chains[0].filters[0].name: "
          "'h2gate.filters.forward_proxy' is terminal and must be the last filter of the chain\n");
  }
  SECTION("filters' typed_config is checked, in file order") {
    LoadResult r =
        parse(std::string(kMinimal) + "        typed_config: {\"@type\": x.y, route: all}\n");
    REQUIRE(r.ok());
    CHECK(allProblems(buildChains(r.bootstrap)) ==
          "cfg.yaml:8:33: static_resources.listeners[0].filter_chains[0].filters[0].typed_config."
          "@type: expected type.googleapis.com/h2gate.filters.forward_proxy.v1.Config, got 'x.y'\n"
          "cfg.yaml:8:38: static_resources.listeners[0].filter_chains[0].filters[0].typed_config."
          "route: unknown field (expected one of: @type, routes, cluster, fallback_clusters, "
          "direct_fallback, pac)\n");
    CHECK_FALSE(r.bootstrap.listeners[0].filters[0].filter);
  }
  SECTION("a listener without filters is config's problem, not reported twice") {
    LoadResult r = parse(R"(static_resources:
  listeners:
  - name: l
    address: {socket_address: {address: 127.0.0.1, port_value: 3128}}
)");
    CHECK(r.problems.size() == 1);
    CHECK(buildChains(r.bootstrap).empty());
  }
}

TEST_CASE("buildChains keeps the filters it builds and reuses them", "[filters][chain]") {
  LoadResult r = parse(kMinimal);
  REQUIRE(r.ok());
  CHECK_FALSE(r.bootstrap.listeners[0].filters[0].filter);  // config builds nothing
  REQUIRE(buildChains(r.bootstrap).empty());
  const auto built = r.bootstrap.listeners[0].filters[0].filter;
  REQUIRE(built);
  CHECK(built->terminal());
  CHECK(buildChains(r.bootstrap).empty());
  CHECK(r.bootstrap.listeners[0].filters[0].filter == built);  // reused, not built again

  // The built-in default chain (its names are config's: config/loader.h).
  Bootstrap b = h2gate::config::defaultBootstrap();
  CHECK(buildChains(b).empty());
  CHECK(b.listeners[0].filters[0].filter);
  CHECK_FALSE(b.listeners[0].filters[0].filter->terminal());
  CHECK(b.listeners[0].filters[1].filter);
  CHECK(b.listeners[0].filters[1].filter->terminal());
}

TEST_CASE("a filter's check sees the whole Bootstrap", "[filters][chain][errors]") {
  // forward_proxy's cluster must exist: made in code, as the flags make it.
  Bootstrap b = h2gate::config::defaultBootstrap();
  b.source = "<flags>";
  YAML::Node typed;
  typed["cluster"] = "upstream";
  b.listeners[0].filters[1].typed_config = typed;
  CHECK(allProblems(buildChains(b)) ==
        "<flags>: static_resources.listeners[0].filter_chains[0].filters[1].typed_config.cluster: "
        "unknown cluster 'upstream' (no clusters are defined)\n");
  CHECK_FALSE(b.listeners[0].filters[1].filter);
  h2gate::config::Cluster c;
  c.name = "upstream";
  b.clusters.push_back(c);
  CHECK(buildChains(b).empty());
  CHECK(b.listeners[0].filters[1].filter);
}
