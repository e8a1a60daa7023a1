// Every shipped example must load without a single problem.
#include <filesystem>
#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>

#include "config/loader.h"
#include "config/node_reader.h"
#include "filters/pac_routing_config.h"
#include "filters/registry.h"
#include "gateway/server/load_config.h"
#include "tests/support/config_util.h"

using namespace h2gate::config;
using h2gate::testing::allProblems;
using h2gate::testing::ScopedEnv;

namespace {
const std::string kExamples = std::string(H2GATE_SOURCE_DIR) + "/config/examples";

// config/examples/`file` loaded as h2gate loads it, and the `pac` block of
// the first route of its first listener's forward_proxy, read as h2gate
// reads it. Fails the test case on any problem.
h2gate::filters::PacRouteConfig firstPacRoute(const std::string& file) {
  const LoadResult r = h2gate::loadConfigFile(kExamples + "/" + file);
  INFO(allProblems(r.problems));
  REQUIRE(r.ok());
  REQUIRE(r.bootstrap.listeners.size() == 1);
  const Listener& l = r.bootstrap.listeners[0];
  for (const FilterConfig& f : l.filters) {
    if (f.name != h2gate::filters::kForwardProxy) continue;
    Diagnostics diag(file);
    NodeReader pac(f.typed_config["routes"][0]["pac"], "routes[0].pac", diag);
    auto route = h2gate::filters::parsePacRoute(
        pac, h2gate::filters::FactoryContext{r.bootstrap, l}, "routes[0]");
    INFO(allProblems(diag.problems()));
    REQUIRE(route);
    return std::move(*route);
  }
  FAIL("no forward_proxy filter in " << file);
  throw std::logic_error("unreachable");
}
}  // namespace

TEST_CASE("every example config loads cleanly", "[config][examples]") {
  // upstream_auth.yaml and wpad_ntlm.yaml document ${PROXY_PASSWORD}; per_app.yaml
  // three more.
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
  CHECK(count >= 9);
}

// The two the README's "Behind a corporate proxy" points to: they load, and
// they do what their comments say.
TEST_CASE("pac_kerberos.yaml: the PAC file's proxies in its domain get Kerberos tokens",
          "[config][examples]") {
  const auto pac = firstPacRoute("pac_kerberos.yaml");
  using Kind = h2gate::pac::PacSourceConfig::Kind;
  CHECK(pac.source.kind == Kind::Url);
  CHECK(pac.source.location == "http://wpad.corp.example.com/proxy.pac");
  CHECK(pac.fallback.kind == h2gate::filters::PacRouteConfig::Fallback::Kind::Direct);
  REQUIRE(pac.proxies.cluster.authentication);
  CHECK(pac.proxies.cluster.authentication->scheme == ProxyAuthentication::Scheme::Negotiate);
  CHECK(pac.proxies.cluster.authentication->spn.empty());
  CHECK(pac.proxies.cluster.authentication->client_keytab.empty());
  CHECK_FALSE(pac.proxies.cluster.credentials);  // the ticket only, no password
  // authenticate_to left out: the PAC URL's domain, as the comment says.
  CHECK_FALSE(pac.proxies.authenticate_to);
  std::string from;
  const auto allowed = h2gate::filters::defaultAuthenticateTo(pac.source, nullptr, &from);
  CHECK(allowed.str() == "[.corp.example.com]");
  CHECK(allowed.allows("proxy.corp.example.com"));
  CHECK_FALSE(allowed.allows("proxy.elsewhere.example"));
}

TEST_CASE("wpad_ntlm.yaml: NTLM with the password from PROXY_PASSWORD to the WPAD file's proxies",
          "[config][examples]") {
  SECTION("PROXY_PASSWORD set") {
    ScopedEnv password("PROXY_PASSWORD", "example-password");
    const auto pac = firstPacRoute("wpad_ntlm.yaml");
    CHECK(pac.source.kind == h2gate::pac::PacSourceConfig::Kind::Wpad);
    REQUIRE(pac.proxies.cluster.authentication);
    CHECK(pac.proxies.cluster.authentication->scheme == ProxyAuthentication::Scheme::Ntlm);
    REQUIRE(pac.proxies.cluster.credentials);
    CHECK(pac.proxies.cluster.credentials->username == "CORP\\alice");
    CHECK(pac.proxies.cluster.credentials->password == "example-password");
    // authenticate_to left out: the domain of the WPAD URL that found the file.
    CHECK_FALSE(pac.proxies.authenticate_to);
    h2gate::pac::PacScript found;
    found.url = "http://wpad.corp.example.com/wpad.dat";
    std::string from;
    const auto allowed = h2gate::filters::defaultAuthenticateTo(pac.source, &found, &from);
    CHECK(allowed.str() == "[.corp.example.com]");
    CHECK_FALSE(allowed.allows("proxy.elsewhere.example"));
  }
  SECTION("PROXY_PASSWORD not set: an error naming it") {
    ScopedEnv password("PROXY_PASSWORD", std::nullopt);
    const LoadResult r = h2gate::loadConfigFile(kExamples + "/wpad_ntlm.yaml");
    REQUIRE(r.problems.size() == 1);
    CHECK(r.problems[0].message == "environment variable PROXY_PASSWORD is not set");
  }
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
