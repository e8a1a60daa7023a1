// The filter table (filters/registry.h): every filter of filters/README.md is
// found by its name, and a misspelt name is an error that lists the names a
// user could have meant.
#include "filters/registry.h"

#include <catch2/catch.hpp>

#include "filter_env.h"
#include "tests/support/config_util.h"

using namespace h2gate;
using namespace h2gate::filters;
using h2gate::testing::allProblems;

TEST_CASE("filter registry: every filter by its name, alphabetically", "[filters][registry]") {
  CHECK(names() ==
        std::vector<std::string>{kAccessLog, kAcl, kForwardProxy, kProxyAuth, kUpstreamHeaders});
  for (const std::string& n : names()) CHECK(known(n));
  CHECK_FALSE(known("h2gate.filters.acls"));
  CHECK_FALSE(known("envoy.filters.http.router"));
  CHECK_FALSE(known(""));
}

TEST_CASE("filter registry: a known name builds its filter", "[filters][registry]") {
  h2gate::testing::FilterEnv env("r.yaml", {"corp"});
  const FilterPtr acl = env.make(kAcl, "allow:\n- match: {ports: [443]}\n");
  INFO(allProblems(env.diag.problems()));
  REQUIRE(acl);
  CHECK(env.diag.ok());
  // ...and the filter's own config errors come from that filter.
  const FilterPtr bad = env.make(kAcl, "allow: 3\n");
  CHECK_FALSE(bad);
  CHECK_FALSE(env.diag.ok());
}

TEST_CASE("filter registry: an unknown name names the known ones", "[filters][registry]") {
  h2gate::testing::FilterEnv env("r.yaml", {});
  CHECK_FALSE(env.make("h2gate.filters.acls", "{}"));
  REQUIRE(env.diag.problems().size() == 1);
  const std::string problem = env.diag.problems()[0].str();
  CHECK(problem.find("unknown filter 'h2gate.filters.acls' (known: h2gate.filters.access_log, "
                     "h2gate.filters.acl, h2gate.filters.forward_proxy, "
                     "h2gate.filters.proxy_auth, h2gate.filters.upstream_headers)") !=
        std::string::npos);
  CHECK(problem.find("typed_config") != std::string::npos);  // where in the file
}
