// forward_proxy routes and the acl filter: decisions and config errors.
#include <catch2/catch.hpp>

#include "../config/test_util.h"
#include "filter_env.h"
#include "filters/acl.h"
#include "filters/forward_proxy.h"
#include "filters/matcher.h"
#include "filters/registry.h"

using namespace h2gate;
using namespace h2gate::filters;
using h2gate::testing::allProblems;

namespace {

struct Env : h2gate::testing::FilterEnv {
  Env() : FilterEnv("r.yaml", {"corp", "partner", "backup"}) {}
};

RequestHead head(const std::string& host, uint16_t port, bool connect) {
  RequestHead h;
  h.method = connect ? "CONNECT" : "GET";
  h.is_connect = connect;
  h.host = host;
  h.port = port;
  h.target = connect ? host + ":" + std::to_string(port) : "http://" + host + "/";
  return h;
}

// Where the filter sends the request: "cluster NAME [fallbacks]", "DIRECT",
// or "reject STATUS: reason".
std::string route(const Filter& f, const std::string& host, uint16_t port = 443,
                  bool connect = true) {
  StreamInfo info;
  const FilterStatus s = f.onRequestHead(head(host, port, connect), info);
  if (info.status != 0) return "reject " + std::to_string(info.status) + ": " + info.reason;
  if (s == FilterStatus::Continue) return "continue";
  std::string out = info.cluster.empty() ? "DIRECT" : "cluster " + info.cluster;
  for (const std::string& f : info.fallbacks) out += " > " + (f.empty() ? "DIRECT" : f);
  return out;
}

// What the filter says about one resolved address of `host` (direct mode):
// "ok" or "STATUS: reason".
std::string address(const Filter& f, const std::string& host, const std::string& ip,
                    uint16_t port = 443, bool connect = true) {
  const std::optional<IpAddress> a = parseIp(ip);
  REQUIRE(a);
  const std::optional<Refusal> r = f.checkAddress(head(host, port, connect), StreamInfo{}, *a);
  return r ? std::to_string(r->status) + ": " + r->reason : "ok";
}

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

TEST_CASE("routes: first match wins, else the default", "[filters][routes]") {
  Env env;
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
  Env env;
  const FilterPtr f =
      env.make(kForwardProxy, "{routes: [{match: {hosts: ['*.corp.test']}, cluster: corp}]}");
  REQUIRE(f);
  CHECK(route(*f, "a.corp.test") == "cluster corp");
  CHECK(route(*f, "example.com") == "DIRECT");
}

TEST_CASE("routes: config errors with line, column and path", "[filters][routes]") {
  auto errors = [](const std::string& yaml) {
    Env env;
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
          "r.yaml:2:3: typed_config.routes[0]: a route needs one of cluster, direct: true or "
          "reject: STATUS\n"
          "r.yaml:3:3: typed_config.routes[1]: a route takes only one of cluster, direct and "
          "reject\n"
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

TEST_CASE("acl: deny first, then the allow list", "[filters][acl]") {
  Env env;
  const FilterPtr f = env.make(kAcl,
                               "deny:\n"
                               "- match: {cidrs: [169.254.0.0/16, 'fe80::/10']}\n"
                               "  reason: link-local (cloud metadata)\n"
                               "- match: {hosts: [evil.test]}\n"
                               "allow:\n"
                               "- match: {ports: [80, 443]}\n"
                               "- match: {host_suffixes: [corp.test]}\n");
  INFO(allProblems(env.diag.problems()));
  REQUIRE(f);
  CHECK_FALSE(f->terminal());
  CHECK(route(*f, "169.254.169.254", 80, false) ==
        "reject 403: destination 169.254.169.254:80 denied by policy: link-local (cloud "
        "metadata)");
  CHECK(route(*f, "fe80::1") ==
        "reject 403: destination [fe80::1]:443 denied by policy: link-local (cloud metadata)");
  CHECK(route(*f, "evil.test") ==
        "reject 403: destination evil.test:443 denied by policy: acl deny[1]");
  CHECK(route(*f, "example.com") == "continue");
  CHECK(route(*f, "example.com", 22) ==
        "reject 403: destination example.com:22 denied by policy: not in the allow list");
  CHECK(route(*f, "db.corp.test", 5432) == "continue");
}

TEST_CASE("acl: config errors", "[filters][acl]") {
  Env env;
  CHECK_FALSE(env.make(kAcl, "{}"));
  CHECK_FALSE(env.make(kAcl, "deny: [{match: {cidrs: [1.2.3.4/40]}, why: x}]"));
  CHECK(allProblems(env.diag.problems()) ==
        "r.yaml:1:1: typed_config: an acl needs deny, allow or both\n"
        "r.yaml:1:39: typed_config.deny[0].why: unknown field (expected one of: match, reason)\n"
        "r.yaml:1:25: typed_config.deny[0].match.cidrs[0]: bad CIDR range: prefix length /40 is "
        "longer than the address (at most /32)\n");
}

TEST_CASE("acl: deny ranges judge the resolved addresses too", "[filters][acl]") {
  Env env;
  const FilterPtr f = env.make(kAcl,
                               "deny:\n"
                               "- match: {cidrs: [127.0.0.0/8, 169.254.169.254, '::1']}\n"
                               "  reason: loopback and metadata\n"
                               "- match: {cidrs: [10.0.0.0/8], ports: [22]}\n"
                               "- match: {hosts: [evil.test]}\n"
                               "allow:\n"
                               "- match: {host_suffixes: [example.com]}\n");
  INFO(allProblems(env.diag.problems()));
  REQUIRE(f);
  // The name passes onRequestHead; its address does not.
  CHECK(route(*f, "rebind.example.com") == "continue");
  CHECK(address(*f, "rebind.example.com", "127.0.0.1") ==
        "403: destination rebind.example.com:443 (127.0.0.1) denied by policy: loopback and "
        "metadata");
  CHECK(address(*f, "rebind.example.com", "::ffff:169.254.169.254", 80, false) ==
        "403: destination rebind.example.com:80 (169.254.169.254) denied by policy: loopback and "
        "metadata");
  CHECK(address(*f, "rebind.example.com", "::1").starts_with("403: "));
  CHECK(address(*f, "www.example.com", "93.184.216.34") == "ok");
  // Ports and kinds still apply; the allow list judges names, not addresses.
  CHECK(address(*f, "db.example.com", "10.1.1.1", 22) ==
        "403: destination db.example.com:22 (10.1.1.1) denied by policy: acl deny[1]");
  CHECK(address(*f, "db.example.com", "10.1.1.1", 443) == "ok");
  CHECK(address(*f, "www.example.com", "192.0.2.1") == "ok");

  // Literals: IPv4 in any notation reaches the filter canonical (the request
  // parser's job); IPv4-mapped IPv6 is matched as IPv4 here as well.
  CHECK(route(*f, "::ffff:127.0.0.1") ==
        "reject 403: destination [::ffff:127.0.0.1]:443 denied by policy: loopback and metadata");

  // Opted out: names are judged as written only.
  const FilterPtr off = env.make(kAcl,
                                 "deny: [{match: {cidrs: [127.0.0.0/8]}}]\n"
                                 "check_resolved_addresses: false\n");
  REQUIRE(off);
  CHECK(address(*off, "rebind.example.com", "127.0.0.1") == "ok");
  CHECK(route(*off, "127.0.0.1").starts_with("reject 403"));
  CHECK_FALSE(env.make(kAcl, "deny: [{match: {}}]\ncheck_resolved_addresses: maybe\n"));
}

TEST_CASE("routes: reject rules judge the resolved addresses, in rule order", "[filters][routes]") {
  Env env;
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
