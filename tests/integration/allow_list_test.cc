// Sharing h2gate with other network namespaces (what WSL2, containers and VMs
// are to the host): a listener on a veth address with a client allow-list
// (--allow, or source_prefix_ranges in the YAML). A client in the allowed
// range gets its page through h2gate; one in another range is closed at
// accept, counted and logged, and nothing of its request reaches the origin.
//
// Topology, all in namespaces the test makes (the machine's own namespace is
// not touched): the test's thread moves into a fresh namespace H (InNetns),
// which stands for the host: nginx and h2gate run there. Two client
// namespaces, A (10.231.1.0/24) and B (10.231.2.0/24), each have a veth pair
// to H; H holds 10.231.1.1 and 10.231.2.1, and B routes to 10.231.1.0/24 via
// H. h2gate and nginx listen on 10.231.1.1. Needs root and `ip netns`;
// without them the test prints H2GATE-SKIP: and the reason (ctest: skipped).
#include <unistd.h>

#include <catch2/catch.hpp>

#include "tests/support/h2gate.h"
#include "tests/support/netns.h"
#include "tests/support/origin.h"
#include "tests/support/scrape.h"
#include "tests/support/util.h"

using namespace h2gate::test;

namespace {

constexpr const char* kHostA = "10.231.1.1";  // h2gate's and nginx's address
constexpr const char* kClientA = "10.231.1.2";
constexpr const char* kClientB = "10.231.2.2";

// A client namespace with a veth pair to the test's namespace: `ip netns
// add`, one end moved in with `client_cidr`, the other left in the calling
// thread's namespace with `host_cidr`, a default route via `gateway`.
// Deleted (and with it the pair) when the object goes, whatever the test did.
class ClientNetns {
 public:
  ClientNetns(const std::string& tag, const std::string& host_cidr, const std::string& client_cidr,
              const std::string& gateway)
      : name_("h2g-allow" + tag + "-" + std::to_string(::getpid())) {
    runCommand({"ip", "netns", "del", name_});
    const std::string host_if = "al" + tag;
    const std::vector<std::vector<std::string>> steps{
        {"ip", "netns", "add", name_},
        {"ip", "link", "add", host_if, "type", "veth", "peer", "name", "v" + tag},
        {"ip", "link", "set", "v" + tag, "netns", name_},
        {"ip", "addr", "add", host_cidr, "dev", host_if},
        {"ip", "link", "set", host_if, "up"},
        {"ip", "-n", name_, "link", "set", "lo", "up"},
        {"ip", "-n", name_, "addr", "add", client_cidr, "dev", "v" + tag},
        {"ip", "-n", name_, "link", "set", "v" + tag, "up"},
        {"ip", "-n", name_, "route", "add", "default", "via", gateway},
    };
    for (const auto& step : steps) {
      const CommandResult r = runCommand(step);
      if (r.exit_code != 0) {
        error_ = step[0];
        for (size_t i = 1; i < step.size(); ++i) error_ += " " + step[i];
        error_ += ": " + r.err;
        return;
      }
    }
  }
  ~ClientNetns() { runCommand({"ip", "netns", "del", name_}); }
  ClientNetns(const ClientNetns&) = delete;
  ClientNetns& operator=(const ClientNetns&) = delete;

  const std::string& error() const { return error_; }
  // curl (-q, as runCurl) run inside the namespace.
  CommandResult curl(const std::vector<std::string>& args) const {
    std::vector<std::string> argv{"ip", "netns", "exec", name_, curlBinary(), "-q"};
    argv.insert(argv.end(), args.begin(), args.end());
    return runCommand(argv, milliseconds(20000));
  }

 private:
  std::string name_;
  std::string error_;
};

// The chain of direct mode, on kHostA, with `match` as its filter_chain_match.
std::string allowYaml(const std::string& match) {
  return std::string(
             "admin:\n"
             "  address: {socket_address: {address: 127.0.0.1, port_value: 0}}\n"
             "static_resources:\n"
             "  listeners:\n"
             "  - name: shared\n"
             "    address: {socket_address: {address: ") +
         kHostA +
         ", port_value: 0}}\n"
         "    filter_chains:\n"
         "    - filter_chain_match: " +
         match +
         "\n"
         "      filters:\n"
         "      - name: h2gate.filters.access_log\n"
         "      - name: h2gate.filters.forward_proxy\n";
}

}  // namespace

TEST_CASE("allow-list: a client namespace in the range is served, another is closed at accept",
          "[sources][netns]") {
  std::string why;
  if (!haveNetns(&why)) {
    WARN("H2GATE-SKIP: network namespaces cannot be made here: " << why);
    return;
  }
  InNetns host("allowh");
  if (!host.error().empty()) {
    WARN("H2GATE-SKIP: network namespaces cannot be made here: " << host.error());
    return;
  }
  ClientNetns a("A", std::string(kHostA) + "/24", std::string(kClientA) + "/24", kHostA);
  REQUIRE(a.error() == "");
  ClientNetns b("B", "10.231.2.1/24", std::string(kClientB) + "/24", "10.231.2.1");
  REQUIRE(b.error() == "");

  Nginx::Options no;
  no.http_addresses = {kHostA};
  Nginx nginx(no);
  const TestFile& f = testFile("1m");
  const std::string page =
      "http://" + std::string(kHostA) + ":" + std::to_string(nginx.httpPort()) + "/1m";
  TempDir out("allow-list");

  // The plumbing first, without h2gate: both namespaces reach nginx on the
  // veth address, byte-identical.
  for (const ClientNetns* ns : {&a, &b}) {
    const CommandResult r = ns->curl({"-sS", "-o", out.file("direct"), "-w", "%{http_code}", page});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    REQUIRE(r.out == "200");
    REQUIRE(sha256File(out.file("direct")) == f.sha256);
  }
  REQUIRE(nginx.waitForAccessCount("GET /1m", 2) == 2);

  struct Variant {
    const char* name;
    H2gate::Options options;
  };
  std::vector<Variant> variants;
  {
    Variant flags{"--allow", {}};
    flags.options.args = {"--listen",    std::string(kHostA) + ":0",
                          "--allow",     "10.231.1.0/24",
                          "--admin",     "127.0.0.1:0",
                          "--log-level", "debug"};
    variants.push_back(std::move(flags));
    Variant yaml{"source_prefix_ranges", {}};
    yaml.options.yaml =
        allowYaml("{source_prefix_ranges: [{address_prefix: 10.231.1.0, prefix_len: 24}]}");
    variants.push_back(std::move(yaml));
  }
  size_t origin_requests = 2;
  for (Variant& v : variants) {
    SECTION(v.name) {
      v.options.binary = H2GATE_BINARY;
      H2gate gate(std::move(v.options));
      INFO(gate.process().logTail(30));
      const std::string proxy = "http://" + std::string(kHostA) + ":" + std::to_string(gate.port());
      CHECK(gate.stderrText().find("it accepts clients from 10.231.1.0/24 only") !=
            std::string::npos);

      // A, in the range: the page through h2gate, byte-identical.
      const CommandResult ok =
          a.curl({"-sS", "-x", proxy, "-o", out.file("via-a"), "-w", "%{http_code}", page});
      INFO(ok.err);
      CHECK(ok.exit_code == 0);
      CHECK(ok.out == "200");
      CHECK(sha256File(out.file("via-a")) == f.sha256);
      ++origin_requests;
      CHECK(nginx.waitForAccessCount("GET /1m", origin_requests) == origin_requests);
      const auto served = gate.waitForAccessLog(1);
      REQUIRE(served.size() == 1);
      CHECK(served[0].get("client").rfind(std::string(kClientA) + ":", 0) == 0);

      // B, in another range: closed at accept, no response at all.
      const CommandResult refused =
          b.curl({"-sS", "-x", proxy, "-o", out.file("via-b"), "-w", "%{http_code}", page});
      INFO(refused.err);
      CHECK((refused.exit_code == 52 || refused.exit_code == 56));  // empty reply / reset
      CHECK(refused.out == "000");
      CHECK(gate.process().waitForLog("listener (local_proxy|shared): refused a connection from " +
                                          std::string(kClientB) +
                                          ":[0-9]+: not in its source_prefix_ranges "
                                          "\\(10\\.231\\.1\\.0/24\\)",
                                      milliseconds(5000)));
      const Scrape s(adminGet(gate.adminPort(), "/metrics").body);
      CHECK(s.sum("h2gate_downstream_connections_refused_total",
                  {{"reason", "source_not_allowed"}}) == 1);
      CHECK(s.sum("h2gate_downstream_connections_total") == 1);  // A's only
      // Nothing of B's reached the origin, nor h2gate's access log.
      CHECK(nginx.waitForAccessCount("GET /1m", origin_requests + 1, milliseconds(1000)) ==
            origin_requests);
      CHECK(gate.accessLog().size() == 1);

      // A again: still served (the refusal changed nothing for others).
      const CommandResult again =
          a.curl({"-sS", "-x", proxy, "-o", "/dev/null", "-w", "%{http_code}", page});
      CHECK(again.out == "200");
    }
  }
}
