#include "filters/forward_proxy.h"

#include <catch2/catch.hpp>

#include "../config/test_util.h"
#include "config/loader.h"
#include "filters/registry.h"

using namespace h2gate;
using namespace h2gate::filters;
using h2gate::testing::allProblems;

namespace {

struct Env {
  Env() : diag("fp.yaml") {
    config::Cluster c;
    c.name = "corp";
    c.endpoints.push_back(config::SocketAddress{"proxy.example", 443});
    bootstrap.clusters.push_back(c);
    listener.name = "l";
  }
  FilterPtr make(const char* yaml) {
    config::NodeReader r(yaml ? YAML::Load(yaml) : YAML::Node(), "typed_config", diag);
    return create(kForwardProxy, r, FactoryContext{bootstrap, listener});
  }
  config::Diagnostics diag;
  config::Bootstrap bootstrap;
  config::Listener listener;
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
        "fp.yaml:1:11: typed_config.cluster: unknown cluster 'other' (known: corp)\n"
        "fp.yaml:1:17: typed_config.rules: unknown field (expected one of: @type, cluster)\n"
        "fp.yaml:1:1: typed_config: expected a mapping\n");
}

TEST_CASE("the registry knows both filters and nothing else", "[filters][registry]") {
  CHECK(names() == std::vector<std::string>{kAccessLog, kForwardProxy});
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
        "h2gate.filters.access_log, h2gate.filters.forward_proxy)\n");
  config::NodeReader ok(YAML::Node(), "y", diag);
  const FilterPtr log = create(kAccessLog, ok, FactoryContext{b, l});
  REQUIRE(log);
  CHECK_FALSE(log->terminal());
}
