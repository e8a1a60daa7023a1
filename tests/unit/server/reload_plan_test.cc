#include "gateway/server/reload_plan.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

using namespace h2gate;
using namespace h2gate::reload;

namespace {

config::SocketAddress addr(const std::string& host, uint16_t port) {
  return config::SocketAddress{host, port};
}

config::Listener listener(const std::string& name, config::SocketAddress a,
                          std::vector<config::SocketAddress> extra = {}) {
  config::Listener l;
  l.name = name;
  l.address = std::move(a);
  l.additional_addresses = std::move(extra);
  return l;
}

config::Cluster cluster(const std::string& name, uint16_t port) {
  config::Cluster c;
  c.name = name;
  c.endpoints.push_back(addr("proxy.example", port));
  return c;
}

std::vector<std::string> names(std::initializer_list<const char*> list) {
  return {list.begin(), list.end()};
}

}  // namespace

TEST_CASE("addressKey normalizes the address and keeps port 0", "[reload]") {
  CHECK(addressKey(addr("127.0.0.1", 3128)) == "127.0.0.1:3128");
  CHECK(addressKey(addr("::1", 3128)) == "[::1]:3128");
  CHECK(addressKey(addr("0:0::1", 3128)) == "[::1]:3128");
  CHECK(addressKey(addr("127.0.0.1", 0)) == "127.0.0.1:0");
}

TEST_CASE("planSockets keeps unchanged addresses, binds new ones, closes the rest", "[reload]") {
  const std::vector<std::string> open{"127.0.0.1:3128", "[::1]:3128", "127.0.0.1:8080"};

  SECTION("same config: every socket kept, nothing bound or closed") {
    const auto plan =
        planSockets(open, {listener("a", addr("127.0.0.1", 3128), {addr("::1", 3128)}),
                           listener("b", addr("127.0.0.1", 8080))});
    REQUIRE(plan.entries.size() == 3);
    CHECK(plan.entries[0].reuse == 0u);
    CHECK(plan.entries[1].reuse == 1u);
    CHECK(plan.entries[1].optional);
    CHECK(plan.entries[2].reuse == 2u);
    CHECK(plan.entries[2].listener == 1);
    CHECK(plan.close.empty());
  }

  SECTION("a listener added, one removed, one moved") {
    const auto plan = planSockets(
        open, {listener("a", addr("127.0.0.1", 3129)), listener("c", addr("127.0.0.1", 9000))});
    REQUIRE(plan.entries.size() == 2);
    CHECK_FALSE(plan.entries[0].reuse);
    CHECK_FALSE(plan.entries[0].optional);
    CHECK(plan.entries[0].address.port_value == 3129);
    CHECK_FALSE(plan.entries[1].reuse);
    CHECK(plan.close == std::vector<size_t>{0, 1, 2});
  }

  SECTION("matched by address, not by name: a renamed listener keeps its socket") {
    const auto plan = planSockets(open, {listener("renamed", addr("127.0.0.1", 8080))});
    REQUIRE(plan.entries.size() == 1);
    CHECK(plan.entries[0].reuse == 2u);
    CHECK(plan.close == std::vector<size_t>{0, 1});
  }

  SECTION("port 0 keeps the socket the OS gave a port") {
    const auto plan =
        planSockets({"127.0.0.1:0", "127.0.0.1:0"},
                    {listener("a", addr("127.0.0.1", 0)), listener("b", addr("127.0.0.1", 0)),
                     listener("c", addr("127.0.0.1", 0))});
    REQUIRE(plan.entries.size() == 3);
    CHECK(plan.entries[0].reuse == 0u);
    CHECK(plan.entries[1].reuse == 1u);
    CHECK_FALSE(plan.entries[2].reuse);  // each socket is kept once
    CHECK(plan.close.empty());
  }

  SECTION("no listeners left") {
    const auto plan = planSockets(open, {});
    CHECK(plan.entries.empty());
    CHECK(plan.close == std::vector<size_t>{0, 1, 2});
  }
}

TEST_CASE("diffClusters tells added, removed, changed and unchanged apart", "[reload]") {
  const std::vector<config::Cluster> before{cluster("a", 1), cluster("b", 2), cluster("c", 3)};
  std::vector<config::Cluster> after{cluster("a", 1), cluster("b", 20), cluster("d", 4)};
  after[0].mark = config::Mark{"other.yaml", 40, 3};  // positions do not count

  const NameDiff d = diffClusters(before, after);
  CHECK(d.unchanged == names({"a"}));
  CHECK(d.changed == names({"b"}));
  CHECK(d.added == names({"d"}));
  CHECK(d.removed == names({"c"}));
}

TEST_CASE("sameCluster sees settings the dump redacts or omits", "[reload]") {
  config::Cluster a = cluster("a", 1);
  config::Cluster b = a;
  CHECK(sameCluster(a, b));

  b.connect_timeout = std::chrono::seconds(1);
  CHECK_FALSE(sameCluster(a, b));

  b = a;
  a.credentials = config::ProxyCredentials{"alice", "one"};
  b.credentials = config::ProxyCredentials{"alice", "two"};
  CHECK_FALSE(sameCluster(a, b));  // the dump shows both as [redacted]
  b.credentials->password = "one";
  CHECK(sameCluster(a, b));

  b.tls = config::TlsContext{};
  CHECK_FALSE(sameCluster(a, b));
  a.tls = config::TlsContext{};
  CHECK(sameCluster(a, b));
  b.tls->trusted_ca = "/etc/other-ca.pem";
  CHECK_FALSE(sameCluster(a, b));
}

TEST_CASE("diffListeners compares every setting", "[reload]") {
  const std::vector<config::Listener> before{listener("a", addr("127.0.0.1", 1)),
                                             listener("b", addr("127.0.0.1", 2))};
  std::vector<config::Listener> after = before;
  after[1].max_request_headers_kb = 8;
  const NameDiff d = diffListeners(before, after);
  CHECK(d.unchanged == names({"a"}));
  CHECK(d.changed == names({"b"}));
  CHECK(d.added.empty());
  CHECK(d.removed.empty());
}

TEST_CASE("tlsFilesFingerprint follows the files' contents", "[reload]") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("h2gate-reload-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string ca = (dir / "ca.pem").string();
  auto write = [&](const std::string& text) { std::ofstream(ca, std::ios::trunc) << text; };

  config::Cluster c = cluster("a", 1);
  CHECK(tlsFilesFingerprint(c).empty());  // no TLS
  c.tls = config::TlsContext{};
  c.tls->trusted_ca = ca;
  write("first");
  const std::string first = tlsFilesFingerprint(c);
  CHECK(tlsFilesFingerprint(c) == first);
  write("second");  // rotated in place, same name
  const std::string second = tlsFilesFingerprint(c);
  CHECK(second != first);
  std::filesystem::remove(ca);
  CHECK(tlsFilesFingerprint(c) != second);
  std::filesystem::remove_all(dir);
}

TEST_CASE("keepRestartOnly keeps concurrency and admin and says so", "[reload]") {
  config::Bootstrap running;
  running.concurrency = 2;
  running.admin.address = addr("127.0.0.1", 9901);

  config::Bootstrap next = running;
  next.drain_timeout = std::chrono::seconds(5);  // may change
  CHECK(keepRestartOnly(running, next).empty());

  next.concurrency = 4;
  next.admin.address = addr("127.0.0.1", 9902);
  const auto warnings = keepRestartOnly(running, next);
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0] == "concurrency 2 -> 4 needs a restart; keeping 2 worker(s)");
  CHECK(warnings[1] ==
        "admin address 127.0.0.1:9901 -> 127.0.0.1:9902 needs a restart; keeping "
        "127.0.0.1:9901");
  CHECK(next.concurrency == 2);
  CHECK(next.admin.address.port_value == 9901);
  CHECK(next.drain_timeout == std::chrono::seconds(5));
}

TEST_CASE("summary names what changed", "[reload]") {
  NameDiff listeners;
  listeners.added = {"extra"};
  listeners.unchanged = {"local_proxy"};
  NameDiff clusters;
  clusters.changed = {"proxy"};
  CHECK(summary(listeners, clusters) ==
        "listeners: 1 added (extra), 1 unchanged; clusters: 1 changed (proxy)");
  CHECK(summary(NameDiff{}, NameDiff{}) == "listeners: none; clusters: none");
  NameDiff removed;
  removed.removed = {"a", "b"};
  CHECK(summary(removed, NameDiff{}) == "listeners: 2 removed (a, b); clusters: none");
}

TEST_CASE("keepRestartOnly takes the new admin.allowed_hosts", "[reload]") {
  config::Bootstrap running, next;
  running.admin.allowed_hosts = {"a.example"};
  next.admin.allowed_hosts = {"b.example"};
  CHECK(keepRestartOnly(running, next).empty());
  CHECK(next.admin.allowed_hosts == std::vector<std::string>{"b.example"});
}

TEST_CASE("sameListener compares filters by their redacted text", "[reload]") {
  config::Listener a = listener("l", addr("127.0.0.1", 3128));
  a.filters.push_back({"h2gate.filters.acl", YAML::Load("{deny: [{match: {hosts: [x]}}]}"), {}});
  config::Listener b = a;
  b.filters[0].typed_config.reset(YAML::Load("{deny: [{match: {hosts: [x]}}]}"));
  CHECK(sameListener(a, b));
  b.filters[0].typed_config.reset(YAML::Load("{deny: [{match: {hosts: [y]}}]}"));
  CHECK_FALSE(sameListener(a, b));
  // The running form: text only (config::dropFilterYaml).
  config::Listener c = a;
  c.filters[0].redacted_yaml = "deny:\n  - match: {hosts: [x]}";
  c.filters[0].typed_config.reset();
  config::Listener d = c;
  CHECK(sameListener(c, d));
  d.filters[0].redacted_yaml = "deny:\n  - match: {hosts: [y]}";
  CHECK_FALSE(sameListener(c, d));
  d = c;
  d.deny_own_addresses = false;
  CHECK_FALSE(sameListener(c, d));
}
