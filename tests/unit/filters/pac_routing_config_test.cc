// The proposed `pac` block of a forward_proxy route: what it reads and the
// errors it gives, with file, line, column and field.
#include "filters/pac_routing_config.h"

#include <catch2/catch.hpp>

#include "filter_env.h"
#include "tests/support/config_util.h"

using namespace h2gate;
using namespace h2gate::filters;
using h2gate::testing::allProblems;
using namespace std::chrono_literals;

namespace {

struct Env : h2gate::testing::FilterEnv {
  Env() : FilterEnv("p.yaml", {"corp"}) {}
  std::optional<PacRouteConfig> parse(const std::string& yaml) {
    config::NodeReader r(YAML::Load(yaml), "routes[0].pac", diag);
    return parsePacRoute(r, FactoryContext{bootstrap, listener}, "routes[0]");
  }
  std::string problems() const { return allProblems(diag.problems()); }
};

}  // namespace

TEST_CASE("pac route config: sources and defaults", "[filters][pac_routing_config]") {
  Env e;
  auto c = e.parse("url: http://wpad.corp.example/proxy.pac");
  REQUIRE(c);
  CHECK(c->source.kind == pac::PacSourceConfig::Kind::Url);
  CHECK(c->source.location == "http://wpad.corp.example/proxy.pac");
  CHECK(c->source.name == "routes[0]");
  CHECK(c->source.refresh_interval == 600s);
  CHECK(c->source.retry_interval == 30s);
  CHECK(c->source.fetch.timeout == 10s);
  CHECK(c->evaluation.timeout == 2s);
  CHECK(c->dns_timeout == 1s);
  CHECK(c->memory_limit == 32u << 20);
  CHECK(c->fallback.kind == PacRouteConfig::Fallback::Kind::Direct);
  CHECK(c->on_loop == PacRouteConfig::OnLoop::Direct);

  c = e.parse("file: /etc/h2gate/proxy.pac\nrefresh_interval: 0s");
  REQUIRE(c);
  CHECK(c->source.kind == pac::PacSourceConfig::Kind::File);
  CHECK(c->source.refresh_interval == 0s);
  c = e.parse("wpad: true");
  REQUIRE(c);
  CHECK(c->source.kind == pac::PacSourceConfig::Kind::Wpad);
  c = e.parse("system: true");
  REQUIRE(c);
  CHECK(c->source.kind == pac::PacSourceConfig::Kind::System);
  CHECK(e.problems().empty());
}

TEST_CASE("pac route config: every setting", "[filters][pac_routing_config]") {
  Env e;
  auto c = e.parse(R"(url: https://pac.corp.example/p.pac
refresh_interval: 5m
retry_interval: 10s
fetch_timeout: 3s
max_size: 65536
trusted_ca: /etc/ssl/corp.pem
evaluation:
  timeout: 500ms
  dns_timeout: 200ms
  memory_limit: 16777216
  threads: 4
  cache_entries: 0
  cache_bytes: 1048576
  cache_ttl: 5s
fallback: {cluster: corp}
on_loop: reject
)");
  INFO(e.problems());
  REQUIRE(c);
  CHECK(c->source.refresh_interval == 300s);
  CHECK(c->source.retry_interval == 10s);
  CHECK(c->source.fetch.timeout == 3s);
  CHECK(c->source.fetch.max_bytes == 65536);
  CHECK(c->source.fetch.trusted_ca == "/etc/ssl/corp.pem");
  CHECK(c->evaluation.timeout == 500ms);
  CHECK(c->dns_timeout == 200ms);
  CHECK(c->memory_limit == 16u << 20);
  CHECK(c->evaluation.threads == 4);
  CHECK(c->evaluation.cache_entries == 0);
  CHECK(c->evaluation.cache_bytes == 1048576);
  CHECK(c->evaluation.cache_ttl == 5s);
  CHECK(c->fallback.kind == PacRouteConfig::Fallback::Kind::Cluster);
  CHECK(c->fallback.cluster == "corp");
  CHECK(c->on_loop == PacRouteConfig::OnLoop::Reject);
  c = e.parse("wpad: true\nfallback: {reject: 503}");
  REQUIRE(c);
  CHECK(c->fallback.kind == PacRouteConfig::Fallback::Kind::Reject);
  CHECK(c->fallback.status == 503);
}

TEST_CASE("pac route config: errors name file, line, column and field",
          "[filters][pac_routing_config]") {
  Env e;
  CHECK_FALSE(e.parse("refresh_interval: 5m"));
  CHECK(e.problems() ==
        "p.yaml:1:1: routes[0].pac: needs where the PAC file comes from: one of url, file, "
        "wpad: true or system: true\n");

  Env e2;
  CHECK_FALSE(e2.parse(R"(url: ftp://x/p.pac
file: /x
)"));
  CHECK(e2.problems() ==
        "p.yaml:1:1: routes[0].pac: takes only one of url, file, wpad and system\n");

  Env e3;
  CHECK_FALSE(e3.parse(R"(url: ftp://x/p.pac
refresh_interval: 500ms
fetch_timeout: 1h
max_size: 10
trusted_ca: /ca.pem
evaluation:
  timeout: 1s
  dns_timeout: 5s
  threads: 0
  colour: blue
fallback: {cluster: nope, direct: true}
on_loop: maybe
)"));
  CHECK(e3.problems() ==
        "p.yaml:1:6: routes[0].pac.url: 'ftp://x/p.pac' is not an http:// or https:// URL\n"
        "p.yaml:2:19: routes[0].pac.refresh_interval: must be 0s (never) or at least 1s\n"
        "p.yaml:3:16: routes[0].pac.fetch_timeout: must be between 100 ms and 300 s\n"
        "p.yaml:4:11: routes[0].pac.max_size: must be in 1024..268435456, got 10\n"
        "p.yaml:5:13: routes[0].pac.trusted_ca: applies only to an https:// url\n"
        "p.yaml:10:3: routes[0].pac.evaluation.colour: unknown field (expected one of: timeout, "
        "dns_timeout, memory_limit, threads, cache_entries, cache_bytes, cache_ttl)\n"
        "p.yaml:9:12: routes[0].pac.evaluation.threads: must be in 1..64, got 0\n"
        "p.yaml:8:16: routes[0].pac.evaluation.dns_timeout: is longer than timeout (1000 ms), "
        "which bounds every evaluation with its DNS calls\n"
        "p.yaml:11:11: routes[0].pac.fallback: takes only one of direct, cluster and reject\n"
        "p.yaml:12:10: routes[0].pac.on_loop: expected one of direct, reject, got 'maybe'\n");

  Env e4;
  CHECK_FALSE(e4.parse("wpad: false\nfallback: {cluster: nope}\n"));
  CHECK(e4.problems() ==
        "p.yaml:1:7: routes[0].pac.wpad: takes only true (leave it out, or choose url or file)\n"
        "p.yaml:2:21: routes[0].pac.fallback.cluster: unknown cluster 'nope' (known: corp)\n");
}
