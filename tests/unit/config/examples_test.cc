// Every shipped example must load without a single problem.
#include <filesystem>

#include <catch2/catch.hpp>

#include "config/loader.h"
#include "filters/registry.h"
#include "gateway/server/load_config.h"
#include "tests/support/config_util.h"

using namespace h2gate::config;
using h2gate::testing::allProblems;
using h2gate::testing::ScopedEnv;

namespace {
const std::string kExamples = std::string(H2GATE_SOURCE_DIR) + "/config/examples";
}

TEST_CASE("every example config loads cleanly", "[config][examples]") {
  // upstream_auth.yaml documents ${PROXY_PASSWORD}; per_app.yaml three more.
  ScopedEnv password("PROXY_PASSWORD", "example-password");
  ScopedEnv ci("CI_PROXY_PASSWORD", "example-ci-password");
  ScopedEnv browser("BROWSER_TOKEN", "example-token");
  ScopedEnv lan("LAN_USER_PASSWORD", "example-lan-password");
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kExamples)) {
    if (entry.path().extension() != ".yaml") continue;
    ++count;
    const LoadResult r = h2gate::loadConfigFile(entry.path().string());
    INFO(entry.path().string() << "\n" << allProblems(r.problems));
    CHECK(r.ok());
  }
  CHECK(count >= 6);
}

TEST_CASE("upstream_auth.yaml needs PROXY_PASSWORD", "[config][examples]") {
  ScopedEnv password("PROXY_PASSWORD", std::nullopt);
  const LoadResult r = h2gate::loadConfigFile(kExamples + "/upstream_auth.yaml");
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].message == "environment variable PROXY_PASSWORD is not set");
}

TEST_CASE("default.yaml is the built-in default", "[config][examples]") {
  const LoadResult r = h2gate::loadConfigFile(kExamples + "/default.yaml");
  REQUIRE(r.ok());
  const Bootstrap& a = r.bootstrap;
  const Bootstrap b = defaultBootstrap();
  CHECK(a.admin.address.address == b.admin.address.address);
  CHECK(a.admin.address.port_value == b.admin.address.port_value);
  CHECK(a.concurrency == b.concurrency);
  CHECK(a.drain_timeout == b.drain_timeout);
  CHECK(a.network_change_timeout == b.network_change_timeout);
  CHECK(a.clusters.size() == b.clusters.size());
  REQUIRE(a.listeners.size() == b.listeners.size());
  for (std::size_t i = 0; i < a.listeners.size(); ++i) {
    const Listener& x = a.listeners[i];
    const Listener& y = b.listeners[i];
    CHECK(x.name == y.name);
    CHECK(x.address.address == y.address.address);
    CHECK(x.address.port_value == y.address.port_value);
    REQUIRE(x.additional_addresses.size() == y.additional_addresses.size());
    for (std::size_t k = 0; k < x.additional_addresses.size(); ++k) {
      CHECK(x.additional_addresses[k].address == y.additional_addresses[k].address);
      CHECK(x.additional_addresses[k].port_value == y.additional_addresses[k].port_value);
    }
    CHECK(x.max_request_headers_kb == y.max_request_headers_kb);
    CHECK(x.max_request_headers_count == y.max_request_headers_count);
    REQUIRE(x.filters.size() == y.filters.size());
    for (std::size_t k = 0; k < x.filters.size(); ++k) {
      CHECK(x.filters[k].name == y.filters[k].name);
      CHECK(x.filters[k].typed_config.IsNull() == y.filters[k].typed_config.IsNull());
    }
  }
}
