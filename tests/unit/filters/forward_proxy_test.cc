#include "filters/forward_proxy.h"

#include <catch2/catch.hpp>

#include "../config/test_util.h"
#include "config/loader.h"
#include "filter_env.h"
#include "filters/registry.h"

using namespace h2gate;
using namespace h2gate::filters;
using h2gate::testing::allProblems;

namespace {

struct Env : h2gate::testing::FilterEnv {
  Env() : FilterEnv("fp.yaml", {"corp", "backup", "third"}) {}
  FilterPtr make(const char* yaml) {
    config::NodeReader r(yaml ? YAML::Load(yaml) : YAML::Node(), "typed_config", diag);
    return create(kForwardProxy, r, FactoryContext{bootstrap, listener});
  }
};

}  // namespace

TEST_CASE("forward_proxy routes to its cluster", "[filters][forward_proxy]") {
  Env env;
  const FilterPtr f = env.make("{cluster: corp}");
  REQUIRE(f);
  CHECK(f->terminal());
  RequestHead head;
  head.method = "CONNECT";
  StreamInfo info;
  CHECK(f->onRequestHead(head, info) == FilterStatus::Stop);
  CHECK(info.cluster == "corp");
  CHECK(info.route_set);
  CHECK(info.status == 0);  // a route, not a rejection
}

TEST_CASE("forward_proxy without a cluster goes direct", "[filters][forward_proxy]") {
  for (const char* yaml :
       {static_cast<const char*>(nullptr), "{}", "{cluster: ~}", "{cluster: ''}",
        "{\"@type\": type.googleapis.com/h2gate.filters.forward_proxy.v1.Config}"}) {
    INFO((yaml ? yaml : "<absent>"));
    Env env;
    const FilterPtr f = env.make(yaml);
    INFO(allProblems(env.diag.problems()));
    REQUIRE(f);
    StreamInfo info;
    info.cluster = "stale";
    CHECK(f->onRequestHead(RequestHead{}, info) == FilterStatus::Stop);
    CHECK(info.cluster.empty());
    CHECK(info.route_set);
  }
}

TEST_CASE("forward_proxy config errors", "[filters][forward_proxy]") {
  Env env;
  CHECK_FALSE(env.make("{cluster: other}"));
  CHECK_FALSE(env.make("{cluster: corp, rules: []}"));
  CHECK_FALSE(env.make("[corp]"));
  CHECK(allProblems(env.diag.problems()) ==
        "fp.yaml:1:11: typed_config.cluster: unknown cluster 'other' (known: corp, backup, "
        "third)\n"
        "fp.yaml:1:17: typed_config.rules: unknown field (expected one of: @type, routes, "
        "cluster, fallback_clusters, direct_fallback, pac)\n"
        "fp.yaml:1:1: typed_config: expected a mapping\n");
}

TEST_CASE("forward_proxy fallback: clusters in order, then DIRECT when allowed",
          "[filters][forward_proxy]") {
  Env env;
  SECTION("a list and direct_fallback") {
    const FilterPtr f =
        env.make("{cluster: corp, fallback_clusters: [backup, third], direct_fallback: true}");
    INFO(allProblems(env.diag.problems()));
    REQUIRE(f);
    StreamInfo info;
    CHECK(f->onRequestHead(RequestHead{}, info) == FilterStatus::Stop);
    CHECK(info.cluster == "corp");
    CHECK(info.fallbacks == std::vector<std::string>{"backup", "third", ""});
  }
  SECTION("no fallback by default: the route is the cluster alone") {
    const FilterPtr f = env.make("{cluster: corp}");
    REQUIRE(f);
    StreamInfo info;
    info.fallbacks = {"stale"};
    f->onRequestHead(RequestHead{}, info);
    CHECK(info.fallbacks.empty());
  }
  SECTION("direct_fallback alone") {
    const FilterPtr f = env.make("{cluster: corp, direct_fallback: true}");
    REQUIRE(f);
    StreamInfo info;
    f->onRequestHead(RequestHead{}, info);
    CHECK(info.fallbacks == std::vector<std::string>{""});
  }
  SECTION("errors, each at its place") {
    CHECK_FALSE(env.make("{cluster: corp, fallback_clusters: [backup, nope, corp, backup, ~]}"));
    CHECK_FALSE(env.make("{fallback_clusters: [backup]}"));
    CHECK_FALSE(env.make("{direct_fallback: true}"));
    CHECK_FALSE(env.make("{cluster: corp, fallback_clusters: backup}"));
    CHECK_FALSE(env.make("{cluster: corp, direct_fallback: maybe}"));
    CHECK(allProblems(env.diag.problems()) ==
          "fp.yaml:1:45: typed_config.fallback_clusters[1]: unknown cluster 'nope' (known: corp, "
          "backup, third)\n"
          "fp.yaml:1:51: typed_config.fallback_clusters[2]: cluster 'corp' is already in the "
          "route\n"
          "fp.yaml:1:57: typed_config.fallback_clusters[3]: cluster 'backup' is already in the "
          "route\n"
          "fp.yaml:1:17: typed_config.fallback_clusters[4]: expected a cluster name\n"
          "fp.yaml:1:21: typed_config.fallback_clusters: needs a cluster to fall back from "
          "(without `cluster` requests go DIRECT)\n"
          "fp.yaml:1:19: typed_config.direct_fallback: needs a cluster to fall back from "
          "(without `cluster` requests go DIRECT)\n"
          "fp.yaml:1:36: typed_config.fallback_clusters: expected a list\n"
          "fp.yaml:1:34: typed_config.direct_fallback: expected true or false\n");
  }
}

TEST_CASE("the registry knows the five filters and nothing else", "[filters][registry]") {
  CHECK(names() ==
        std::vector<std::string>{kAccessLog, kAcl, kForwardProxy, kProxyAuth, kUpstreamHeaders});
  CHECK(known(kAccessLog));
  CHECK(known(kForwardProxy));
  CHECK_FALSE(known("envoy.filters.network.http_connection_manager"));
  config::Diagnostics diag("r.yaml");
  config::Bootstrap b;
  config::Listener l;
  config::NodeReader r(YAML::Node(), "x.typed_config", diag, config::Mark{"r.yaml", 4, 15});
  CHECK_FALSE(create("h2gate.filters.nope", r, FactoryContext{b, l}));
  CHECK(allProblems(diag.problems()) ==
        "r.yaml:4:15: x.typed_config: unknown filter 'h2gate.filters.nope' (known: "
        "h2gate.filters.access_log, h2gate.filters.acl, h2gate.filters.forward_proxy, "
        "h2gate.filters.proxy_auth, h2gate.filters.upstream_headers)\n");
  config::NodeReader ok(YAML::Node(), "y", diag);
  const FilterPtr log = create(kAccessLog, ok, FactoryContext{b, l});
  REQUIRE(log);
  CHECK_FALSE(log->terminal());
}
