// The PAC file's text. Its behaviour is checked by a real PAC engine
// (pacparser) in tests/integration/routing_test.cc.
#include "filters/served_pac.h"

#include <catch2/catch.hpp>

#include "filter_env.h"
#include "filters/registry.h"
#include "tests/support/config_util.h"

using namespace h2gate;
using namespace h2gate::filters;
using h2gate::testing::allProblems;

namespace {

std::string pacOf(const std::vector<std::pair<const char*, std::string>>& chain,
                  const std::string& proxy = "127.0.0.1:3128") {
  h2gate::testing::FilterEnv env("p.yaml", {"corp"});
  PacBuilder pac;
  for (const auto& [name, yaml] : chain) {
    const FilterPtr f = env.make(name, yaml);
    INFO(allProblems(env.diag.problems()));
    REQUIRE(f);
    f->describePac(pac);
  }
  return pac.build(proxy);
}

bool has(const std::string& text, const std::string& piece) {
  return text.find(piece) != std::string::npos;
}

}  // namespace

TEST_CASE("pac: rules in chain order, DIRECT only for direct routes", "[filters][served_pac]") {
  const std::string pac =
      pacOf({{kAcl, "deny: [{match: {cidrs: [169.254.0.0/16]}}]"},
             {kForwardProxy,
              "routes:\n"
              "- match: {host_suffixes: [internal.test], cidrs: ['fd00::/8']}\n"
              "  direct: true\n"
              "- match: {hosts: ['*.ads.test', exact.test], ports: [443, '8000-8100'], kind: "
              "connect}\n"
              "  reject: 403\n"
              "cluster: corp\n"}});
  INFO(pac);
  CHECK(has(pac, "function FindProxyForURL(url, host) {"));
  CHECK(has(pac, "var PROXY = \"PROXY 127.0.0.1:3128\";"));
  const size_t acl = pac.find("(v4 && isInNet(host, \"169.254.0.0\", \"255.255.0.0\"))");
  const size_t direct = pac.find("dnsDomainIs(host, \".internal.test\")");
  const size_t reject = pac.find("dnsDomainIs(host, \".ads.test\")");
  REQUIRE(acl != std::string::npos);
  REQUIRE(direct != std::string::npos);
  REQUIRE(reject != std::string::npos);
  CHECK(acl < direct);
  CHECK(direct < reject);
  CHECK(has(pac, "host == \"internal.test\""));
  CHECK(has(pac, "h2gateInNet6(v6, [64768, 0, 0, 0, 0, 0, 0, 0], 8)"));
  CHECK(has(pac, "host == \"exact.test\""));
  CHECK(has(pac, "port == 443"));
  CHECK(has(pac, "(port >= 8000 && port <= 8100)"));
  CHECK(has(pac, "!absolute"));
  CHECK(has(pac, "// default route: cluster corp\n  return PROXY;\n}"));
  // The acl's deny goes to h2gate (PROXY), the direct route DIRECT.
  CHECK(pac.find("return PROXY;", acl) < pac.find("return DIRECT;", acl));
}

TEST_CASE("pac: a direct default, DIRECT fallback and the proxy address", "[filters][served_pac]") {
  const std::string direct = pacOf({{kForwardProxy, "{}"}});
  CHECK(has(direct, "// default route: direct\n  return DIRECT;\n}"));
  const std::string fallback = pacOf(
      {{kForwardProxy, "{cluster: corp, pac: {direct_fallback: true, proxy: 'gw.example:8080'}}"}},
      "[::1]:3128");
  CHECK(has(fallback, "var PROXY = \"PROXY gw.example:8080; DIRECT\";"));
  const std::string allow = pacOf({{kAcl, "allow: [{match: {ports: [443]}}]"}});
  CHECK(has(allow, "  if (!(port == 443))\n    return PROXY;\n"));

  CHECK(pacProxyAddress("0.0.0.0", 3128) == "127.0.0.1:3128");
  CHECK(pacProxyAddress("::", 3128) == "[::1]:3128");
  CHECK(pacProxyAddress("::1", 8080) == "[::1]:8080");
  CHECK(pacProxyAddress("192.0.2.1", 3128) == "192.0.2.1:3128");
}
