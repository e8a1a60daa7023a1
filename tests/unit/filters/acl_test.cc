// The acl filter: its decisions on names and on resolved addresses, and its
// config errors.
#include "filters/acl.h"

#include <catch2/catch.hpp>

#include "filter_env.h"
#include "filters/registry.h"
#include "tests/support/config_util.h"

using namespace h2gate;
using namespace h2gate::filters;
using h2gate::testing::address;
using h2gate::testing::allProblems;
using h2gate::testing::route;

namespace {

struct AclEnv : h2gate::testing::FilterEnv {
  AclEnv() : FilterEnv("r.yaml", {"corp", "partner", "backup"}) {}
};

}  // namespace

TEST_CASE("acl: deny first, then the allow list", "[filters][acl]") {
  AclEnv env;
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
  AclEnv env;
  CHECK_FALSE(env.make(kAcl, "{}"));
  CHECK_FALSE(env.make(kAcl, "deny: [{match: {cidrs: [1.2.3.4/40]}, why: x}]"));
  CHECK(allProblems(env.diag.problems()) ==
        "r.yaml:1:1: typed_config: an acl needs deny, allow or both\n"
        "r.yaml:1:39: typed_config.deny[0].why: unknown field (expected one of: match, reason)\n"
        "r.yaml:1:25: typed_config.deny[0].match.cidrs[0]: bad CIDR range: prefix length /40 is "
        "longer than the address (at most /32)\n");
}

TEST_CASE("acl: deny ranges judge the resolved addresses too", "[filters][acl]") {
  AclEnv env;
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
