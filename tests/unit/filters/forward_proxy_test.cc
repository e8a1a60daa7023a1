#include "filters/forward_proxy.h"

#include <catch2/catch.hpp>

#include "config/loader.h"
#include "filter_env.h"
#include "filters/registry.h"
#include "tests/support/config_util.h"

using namespace h2gate;
using namespace h2gate::filters;
using h2gate::testing::address;
using h2gate::testing::allProblems;
using h2gate::testing::route;

namespace {

struct ForwardProxyEnv : h2gate::testing::FilterEnv {
  ForwardProxyEnv() : FilterEnv("fp.yaml", {"corp", "backup", "third"}) {}
  FilterPtr make(const char* yaml) {
    config::NodeReader r(yaml ? YAML::Load(yaml) : YAML::Node(), "typed_config", diag);
    return create(kForwardProxy, r, FactoryContext{bootstrap, listener});
  }
};

// The routes of the tests at the end (clusters corp, partner, backup).
struct RoutesEnv : h2gate::testing::FilterEnv {
  RoutesEnv() : FilterEnv("r.yaml", {"corp", "partner", "backup"}) {}
};

constexpr const char* kRoutes = R"(
routes:
- match: {host_suffixes: [internal.test], cidrs: [10.0.0.0/8]}
  direct: true
- match: {hosts: ["*.partner.test"], kind: connect}
  cluster: partner
  fallback_clusters: [backup]
  direct_fallback: true
- match: {hosts: [ads.test]}
  reject: 451
  reason: blocked by the ads policy
- match: {ports: ["1-79"]}
  reject: 403
- match: {no_proxy: "localhost,.svc,host:8080", no_proxy_mode: go}
  direct: true
cluster: corp
fallback_clusters: [backup]
)";

}  // namespace

TEST_CASE("forward_proxy routes to its cluster", "[filters][forward_proxy]") {
  ForwardProxyEnv env;
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
    ForwardProxyEnv env;
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
  ForwardProxyEnv env;
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
  ForwardProxyEnv env;
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

TEST_CASE("routes: first match wins, else the default", "[filters][routes]") {
  RoutesEnv env;
  const FilterPtr f = env.make(kForwardProxy, kRoutes);
  INFO(allProblems(env.diag.problems()));
  REQUIRE(f);
  CHECK(route(*f, "internal.test") == "DIRECT");
  CHECK(route(*f, "git.internal.test") == "DIRECT");
  CHECK(route(*f, "10.1.2.3", 22) == "DIRECT");  // before the ports rule
  CHECK(route(*f, "api.partner.test") == "cluster partner > backup > DIRECT");
  CHECK(route(*f, "api.partner.test", 80, false) == "cluster corp > backup");  // not CONNECT
  CHECK(route(*f, "ads.test") == "reject 451: blocked by the ads policy");
  CHECK(route(*f, "example.com", 25) == "reject 403: refused by h2gate route rule routes[3]");
  CHECK(route(*f, "x.default.svc") == "DIRECT");
  CHECK(route(*f, "localhost", 5000) == "DIRECT");
  CHECK(route(*f, "127.0.0.1", 5000) == "DIRECT");  // go mode: loopback always
  CHECK(route(*f, "host", 8080) == "DIRECT");
  CHECK(route(*f, "host", 8081) == "cluster corp > backup");
  CHECK(route(*f, "example.com") == "cluster corp > backup");
}

TEST_CASE("routes: without a default cluster the rest goes DIRECT", "[filters][routes]") {
  RoutesEnv env;
  const FilterPtr f =
      env.make(kForwardProxy, "{routes: [{match: {hosts: ['*.corp.test']}, cluster: corp}]}");
  REQUIRE(f);
  CHECK(route(*f, "a.corp.test") == "cluster corp");
  CHECK(route(*f, "example.com") == "DIRECT");
}

TEST_CASE("routes: config errors with line, column and path", "[filters][routes]") {
  auto errors = [](const std::string& yaml) {
    RoutesEnv env;
    CHECK_FALSE(env.make(kForwardProxy, yaml));
    return allProblems(env.diag.problems());
  };
  SECTION("a rule after a catch-all, and a default nobody reaches") {
    CHECK(errors("routes:\n"
                 "- match: {hosts: [a.test]}\n"
                 "  direct: true\n"
                 "- match: {}\n"
                 "  cluster: corp\n"
                 "- match: {hosts: [b.test]}\n"
                 "  direct: true\n"
                 "cluster: partner\n") ==
          "r.yaml:6:3: typed_config.routes[2]: unreachable: routes[1] before it matches every "
          "request (a catch-all must be the last rule)\n"
          "r.yaml:8:10: typed_config.cluster: never used: routes[1] matches every request, so no "
          "request reaches the default route\n");
  }
  SECTION("unknown matcher, bad CIDR, unknown cluster, bad status") {
    CHECK(errors("routes:\n"
                 "- match: {host_regex: 'a.*'}\n"
                 "  direct: true\n"
                 "- match: {cidrs: [10.0.0.0/33]}\n"
                 "  cluster: nope\n"
                 "- match: {hosts: [x]}\n"
                 "  reject: 302\n") ==
          "r.yaml:2:11: typed_config.routes[0].match.host_regex: unknown field (expected one of: "
          "hosts, host_suffixes, cidrs, ports, kind, no_proxy, no_proxy_mode)\n"
          "r.yaml:4:19: typed_config.routes[1].match.cidrs[0]: bad CIDR range: prefix length /33 "
          "is longer than the address (at most /32)\n"
          "r.yaml:5:12: typed_config.routes[1].cluster: unknown cluster 'nope' (known: corp, "
          "partner, backup)\n"
          "r.yaml:7:11: typed_config.routes[2].reject: must be in 400..599, got 302\n");
  }
  SECTION("actions: none, several, direct: false, stray fields") {
    CHECK(errors("routes:\n"
                 "- match: {hosts: [a]}\n"
                 "- match: {hosts: [b]}\n"
                 "  direct: true\n"
                 "  reject: 403\n"
                 "- match: {hosts: [c]}\n"
                 "  direct: false\n"
                 "  reason: why\n"
                 "  fallback_clusters: [corp]\n"
                 "- direct: true\n"
                 "- match: {hosts: [d]}\n"
                 "  cluster: ''\n") ==
          "r.yaml:2:3: typed_config.routes[0]: a route needs one of cluster, direct: true, "
          "reject: STATUS or pac\n"
          "r.yaml:3:3: typed_config.routes[1]: a route takes only one of cluster, direct, "
          "reject and pac\n"
          "r.yaml:9:22: typed_config.routes[2].fallback_clusters: applies only to a route with a "
          "cluster\n"
          "r.yaml:7:11: typed_config.routes[2].direct: takes only true (route elsewhere with "
          "cluster or reject)\n"
          "r.yaml:8:11: typed_config.routes[2].reason: applies only to a reject route\n"
          "r.yaml:10:3: typed_config.routes[3].match: missing required field\n"
          "r.yaml:12:12: typed_config.routes[4].cluster: must name a cluster (use direct: true "
          "for DIRECT)\n");
  }
  SECTION("pac settings") {
    CHECK(errors("pac: {serve_on_listener: yes, proxy: 'nope', extra: 1}\n") ==
          "r.yaml:1:46: typed_config.pac.extra: unknown field (expected one of: "
          "serve_on_listener, proxy, direct_fallback)\n"
          "r.yaml:1:26: typed_config.pac.serve_on_listener: expected true or false\n"
          "r.yaml:1:38: typed_config.pac.proxy: expected host:port (e.g. 127.0.0.1:3128), got "
          "'nope'\n");
  }
}

TEST_CASE("routes: reject rules judge the resolved addresses, in rule order", "[filters][routes]") {
  RoutesEnv env;
  const FilterPtr f = env.make(kForwardProxy,
                               "routes:\n"
                               "- match: {hosts: [metadata.internal.test]}\n"
                               "  direct: true\n"  // named before the range: the exception
                               "- match: {cidrs: [169.254.0.0/16]}\n"
                               "  reject: 451\n"
                               "  reason: link-local\n"
                               "- match: {cidrs: [10.0.0.0/8]}\n"
                               "  cluster: corp\n"
                               "- match: {cidrs: [10.0.0.0/8, 192.168.0.0/16]}\n"
                               "  reject: 403\n"
                               "- match: {host_suffixes: [internal.test]}\n"
                               "  direct: true\n");
  INFO(allProblems(env.diag.problems()));
  REQUIRE(f);
  // The default route (DIRECT): every rule is tried against the address.
  CHECK(address(*f, "a.example", "169.254.169.254") ==
        "451: link-local (a.example resolves to 169.254.169.254)");
  CHECK(address(*f, "a.example", "192.168.1.1") ==
        "403: refused by h2gate route rule routes[3] (a.example resolves to 192.168.1.1)");
  CHECK(address(*f, "a.example", "10.1.1.1") == "ok");  // first match: the cluster rule
  CHECK(address(*f, "a.example", "8.8.8.8") == "ok");
  // A name chosen by rule 4: rules 0..3 are tried against its address.
  CHECK(address(*f, "db.internal.test", "192.168.1.1").starts_with("403: "));
  CHECK(address(*f, "db.internal.test", "::ffff:169.254.1.1").starts_with("451: "));
  // A name chosen by rule 0: nothing before it.
  CHECK(address(*f, "metadata.internal.test", "169.254.169.254") == "ok");
}
