#include "filters/match_config.h"

#include <catch2/catch.hpp>

#include "tests/support/config_util.h"

using namespace h2gate;
using namespace h2gate::filters;
using h2gate::match::Destination;
using h2gate::testing::allProblems;

namespace {

// A Match parsed from YAML (errors fail the test).
struct Parsed {
  explicit Parsed(const std::string& yaml) : diag("m.yaml") {
    config::NodeReader r(YAML::Load(yaml), "match", diag);
    auto parsed = parseMatch(r, &ignored);
    INFO(allProblems(diag.problems()));
    REQUIRE(parsed);
    m = std::move(*parsed);
  }
  bool matches(const std::string& host, uint16_t port = 443, bool connect = true) const {
    const Destination d(host, port, connect);
    return m.matches(d);
  }
  config::Diagnostics diag;
  std::vector<std::string> ignored;
  match::Match m;
};

// The problems parseMatch records for `yaml`.
std::string problems(const std::string& yaml) {
  config::Diagnostics diag("m.yaml");
  config::NodeReader r(YAML::Load(yaml), "match", diag);
  std::vector<std::string> ignored;
  CHECK_FALSE(parseMatch(r, &ignored));
  return allProblems(diag.problems());
}

}  // namespace

TEST_CASE("match: ports, port ranges and request kind", "[filters][match_config]") {
  Parsed p("{ports: [443, '8000-8999', 65535]}");
  CHECK(p.matches("x", 443));
  CHECK(p.matches("x", 8000));
  CHECK(p.matches("x", 8999));
  CHECK_FALSE(p.matches("x", 7999));
  CHECK_FALSE(p.matches("x", 9000));
  CHECK(p.matches("x", 65535));
  CHECK_FALSE(p.m.catchAll());

  Parsed connect("{kind: connect}");
  CHECK(connect.matches("x", 443, true));
  CHECK_FALSE(connect.matches("x", 80, false));
  Parsed absolute("{kind: absolute, hosts: [x]}");
  CHECK(absolute.matches("x", 80, false));
  CHECK_FALSE(absolute.matches("x", 443, true));
  CHECK_FALSE(absolute.matches("y", 80, false));

  // Destinations are any-of; then AND with ports and kind.
  Parsed both("{hosts: [a.test], cidrs: [10.0.0.0/8], ports: [443]}");
  CHECK(both.matches("a.test"));
  CHECK(both.matches("10.1.1.1"));
  CHECK_FALSE(both.matches("10.1.1.1", 80));
  CHECK_FALSE(both.matches("b.test"));

  CHECK(Parsed("{}").m.catchAll());
  CHECK(Parsed("{hosts: ['*']}").m.catchAll());
  CHECK(Parsed("{no_proxy: '*'}").m.catchAll());
  CHECK_FALSE(Parsed("{hosts: ['*'], ports: [1]}").m.catchAll());
  // An empty NO_PROXY bypasses nothing: the rule matches nothing.
  Parsed empty("{no_proxy: ''}");
  CHECK_FALSE(empty.m.catchAll());
  CHECK_FALSE(empty.matches("x"));
}

TEST_CASE("match: hosts, suffixes and IDN from the config", "[filters][match_config]") {
  Parsed p(
      "{hosts: [API.example.com, '*.wild.test', 192.0.2.7, 'bücher.example'], "
      "host_suffixes: [.corp.example, internal.test.]}");
  CHECK(p.matches("api.example.com"));
  CHECK(p.matches("x.wild.test"));
  CHECK_FALSE(p.matches("wild.test"));
  CHECK(p.matches("192.0.2.7"));
  CHECK(p.matches("xn--bcher-kva.example"));  // what apps send for bücher.example
  CHECK(p.matches("corp.example"));           // the leading dot changes nothing
  CHECK(p.matches("a.corp.example"));
  CHECK(p.matches("internal.test"));
  CHECK(p.matches("deep.er.internal.test."));
}

TEST_CASE("match: errors name the path and position", "[filters][match_config]") {
  CHECK(problems("{host: x}") ==
        "m.yaml:1:2: match.host: unknown field (expected one of: hosts, host_suffixes, cidrs, "
        "ports, kind, no_proxy, no_proxy_mode)\n");
  CHECK(problems("{cidrs: [10.0.0.0/8, 10.0.0.1/8, 'fd00::/200', nope]}") ==
        "m.yaml:1:22: match.cidrs[1]: bad CIDR range: '10.0.0.1/8' has host bits set (did you "
        "mean 10.0.0.0/8?)\n"
        "m.yaml:1:34: match.cidrs[2]: bad CIDR range: prefix length /200 is longer than the "
        "address (at most /128)\n"
        "m.yaml:1:48: match.cidrs[3]: bad CIDR range: 'nope' is not an IPv4 or IPv6 address\n");
  CHECK(problems("{ports: [0, '90-80', 70000, x, '1-']}") ==
        "m.yaml:1:10: match.ports[0]: bad port '0': ports are 1..65535\n"
        "m.yaml:1:13: match.ports[1]: bad port range '90-80': the first port is above the last\n"
        "m.yaml:1:22: match.ports[2]: bad port '70000': ports are 1..65535\n"
        "m.yaml:1:29: match.ports[3]: bad port 'x': expected a port (443) or a range "
        "(8000-8999)\n"
        "m.yaml:1:32: match.ports[4]: bad port '1-': expected a port (443) or a range "
        "(8000-8999)\n");
  CHECK(problems("{hosts: ['a.*.b', .corp.example, 'a..b']}") ==
        "m.yaml:1:10: match.hosts[0]: 'a.*.b': the only wildcards are a leading '*.' and '*' "
        "alone\n"
        "m.yaml:1:19: match.hosts[1]: '.corp.example': a leading dot is a domain suffix; put it "
        "under host_suffixes (it matches corp.example and its subdomains) or write "
        "'*.corp.example' (subdomains only)\n"
        "m.yaml:1:34: match.hosts[2]: 'a..b' has an empty label\n");
  CHECK(problems("{host_suffixes: ['*.x', 10.0.0.0/8]}") ==
        "m.yaml:1:18: match.host_suffixes[0]: '*.x' is not a domain (host_suffixes takes names "
        "such as corp.example; addresses and ranges go under cidrs, wildcards under hosts)\n"
        "m.yaml:1:25: match.host_suffixes[1]: '10.0.0.0/8' is not a domain (host_suffixes takes "
        "names such as corp.example; addresses and ranges go under cidrs, wildcards under "
        "hosts)\n");
  CHECK(problems("{hosts: ['127.1', '0x7f000001', '1.2.3.256', '0']}") ==
        "m.yaml:1:10: match.hosts[0]: '127.1' is the IPv4 address 127.0.0.1 in a non-standard "
        "notation; write 127.0.0.1 (requests are compared in that form)\n"
        "m.yaml:1:19: match.hosts[1]: '0x7f000001' is the IPv4 address 127.0.0.1 in a "
        "non-standard notation; write 127.0.0.1 (requests are compared in that form)\n"
        "m.yaml:1:33: match.hosts[2]: '1.2.3.256' ends in a number, so it must be an IPv4 "
        "address (as in a browser), and it is not one\n"
        "m.yaml:1:46: match.hosts[3]: '0' is the unspecified address (0.0.0.0/8, ::), which "
        "means this host and is not a destination\n");
  CHECK(problems("{host_suffixes: ['0.1']}").find("'0.1' is not a domain") != std::string::npos);
  CHECK(problems("{kind: post}") ==
        "m.yaml:1:8: match.kind: expected one of connect, absolute, got 'post'\n");
  CHECK(problems("{no_proxy_mode: rust}") ==
        "m.yaml:1:17: match.no_proxy_mode: expected one of curl, go, python, got 'rust'\n");
  CHECK(problems("{no_proxy_mode: go}") ==
        "m.yaml:1:17: match.no_proxy_mode: applies only with no_proxy\n");
  CHECK(problems("[a]") == "m.yaml:1:1: match: expected a mapping\n");
}
