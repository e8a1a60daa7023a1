// A PAC route over its life, through real proxies (tests/support/pac_env.h):
// /pac/eval refuses a client that is not on loopback; a network change
// empties the per-host answer cache, so a PAC file whose answer depends on
// the network (myIpAddress) is asked again; a reload to another PAC file
// moves new requests while a transfer under way finishes where it was.
// [pac_routing]
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "tests/support/netns.h"
#include "tests/support/pac_env.h"
#include "tests/support/scrape.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

std::string fileSource(const std::string& path, const std::string& more = "") {
  return "              file: " + path + "\n" + more;
}

}  // namespace

TEST_CASE("pac admin: /pac/eval answers loopback clients only", "[pac_routing][pac_admin]") {
  std::string why;
  if (!haveNetns(&why)) FAIL(why);
  // A namespace whose lo also has 10.203.0.1: a client connecting to that
  // address comes from it, which is not a loopback address.
  InNetns ns("paceval");
  REQUIRE(ns.error() == "");
  REQUIRE(ns.ip({"addr", "add", "10.203.0.1/24", "dev", "lo"}));
  PacEnv env;
  const std::string pac = env.writePac(
      "p.pac", "function FindProxyForURL(url, host) { return \"PROXY 127.0.0.1:9\"; }\n");
  const std::string listeners = PacEnv::listener("local_proxy", fileSource(pac));
  H2gate& gate = env.start(
      listeners, {"local_proxy"},
      [&](H2gate::Options& o) { o.yaml = PacEnv::yaml(listeners, "0.0.0.0"); }, "");
  INFO(gate.process().logTail(40));
  REQUIRE(gate.process().waitForLog("using the PAC file from", kPacLoadTimeout));
  const std::string query = "/pac/eval?url=http%3A%2F%2Fx.test%2F";

  // From loopback: the answer.
  const AdminReply local = adminGet(gate.adminPort(), query);
  INFO(local.body);
  CHECK(local.status == 200);
  CHECK(local.body.find("answer: PROXY 127.0.0.1:9") != std::string::npos);
  const double evaluations =
      scrapeMetrics(gate.adminPort()).sum("h2gate_pac_evaluations_total", {});

  // From 10.203.0.1 to the same listener: /pac answers, /pac/eval does not
  // run the file.
  auto from = [&](const std::string& path) {
    return runCurl({"-sS", "--interface", "10.203.0.1", "-w", "\n%{http_code}",
                    "http://10.203.0.1:" + str(gate.adminPort()) + path},
                   milliseconds(15000));
  };
  const CommandResult status = from("/pac");
  INFO(status.err);
  CHECK(status.out.ends_with("\n200"));
  CHECK(status.out.find("in use: " + pac) != std::string::npos);
  const CommandResult refused = from(query);
  INFO(refused.out << refused.err);
  CHECK(refused.out == "/pac/eval answers loopback clients only (it runs the PAC file)\n\n403");
  CHECK(scrapeMetrics(gate.adminPort()).sum("h2gate_pac_evaluations_total", {}) == evaluations);
}

TEST_CASE("pac network change: the answer cache is emptied and the file asked again",
          "[pac_routing][pac_netchange]") {
  std::string why;
  if (!haveNetns(&why)) FAIL(why);
  InNetns ns("pacnet");
  REQUIRE(ns.error() == "");
  // An interface without an address yet (up before h2gate starts, so its
  // link messages are not the change the test waits for).
  REQUIRE(ns.ip({"link", "add", "v0", "type", "veth", "peer", "name", "v1"}));
  REQUIRE(ns.ip({"link", "set", "v0", "up"}));
  REQUIRE(ns.ip({"link", "set", "v1", "up"}));
  PacEnv env;
  Squid::Options so = PacEnv::squidOptions();
  so.hosts.push_back("web.internal.test");
  Squid squid(so);
  // In the office (an address in 10.77/16) through squid, elsewhere DIRECT:
  // the answer changes with the network, not with the host.
  const std::string pac =
      env.writePac("office.pac",
                   "function FindProxyForURL(url, host) {\n"
                   "  if (isInNet(myIpAddress(), \"10.77.0.0\", \"255.255.0.0\"))\n"
                   "    return \"PROXY 127.0.0.1:" +
                       str(squid.httpPort()) +
                       "\";\n"
                       "  return \"DIRECT\";\n"
                       "}\n");
  // A cache lifetime far longer than the test: only the change can empty it.
  H2gate& gate =
      env.start(PacEnv::listener("local_proxy", fileSource(pac,
                                                           "              evaluation: {cache_ttl: "
                                                           "1h}\n")),
                {"local_proxy"});
  INFO(gate.process().logTail(40));
  REQUIRE(gate.process().waitForLog("using the PAC file from", kPacLoadTimeout));

  // Loopback only: myIpAddress() is 127.0.0.1, DIRECT; the second request
  // is answered from the cache.
  CHECK(env.fetch("", env.url("web.internal.test", true, "/1m?before1"), "b1"));
  CHECK(env.fetch("", env.url("web.internal.test", true, "/1m?before2"), "b2"));
  CHECK(scrapeMetrics(gate.adminPort()).sum("h2gate_pac_cache_hits_total", {}) >= 1);

  // Arriving in the office: 10.77.0.5 on the interface.
  REQUIRE(ns.ip({"addr", "add", "10.77.0.5/24", "dev", "v0"}));
  REQUIRE(gate.process().waitForLog("network change: .*10\\.77\\.0\\.5/24", milliseconds(5000)));
  CHECK(env.fetch("", env.url("web.internal.test", true, "/1m?after"), "a1"));

  squid.waitForAccessLines(1, "", milliseconds(5000));
  INFO("squid: " << squid.accessLog());
  CHECK(countOccurrences(squid.accessLog(), "web.internal.test") == 1);
  const auto log = gate.waitForAccessLog(3, milliseconds(5000));
  REQUIRE(log.size() == 3);
  CHECK(log[0].get("protocol") == "direct");
  CHECK(log[1].get("protocol") == "direct");
  CHECK(log[2].get("cluster") == "PROXY 127.0.0.1:" + str(squid.httpPort()));
  const AdminReply eval =
      adminGet(gate.adminPort(), "/pac/eval?url=https%3A%2F%2Fweb.internal.test%2F");
  INFO(eval.body);
  CHECK(eval.body.find("answer: PROXY 127.0.0.1:" + str(squid.httpPort())) != std::string::npos);
}

TEST_CASE("pac reload: a new PAC source takes new requests; a transfer under way finishes",
          "[pac_routing][pac_reload]") {
  if (!haveMountNamespaces()) FAIL("needs root for a private /etc/hosts (unshare -m)");
  PacEnv env;
  Squid squid1(PacEnv::squidOptions());
  Squid squid2(PacEnv::squidOptions());
  auto pacTo = [](const Squid& s) {
    return "function FindProxyForURL(url, host) { return \"PROXY 127.0.0.1:" + str(s.httpPort()) +
           "\"; }\n";
  };
  const std::string first = env.writePac("first.pac", pacTo(squid1));
  env.writePac("second.pac", pacTo(squid2));
  H2gate& gate = env.start(PacEnv::listener("local_proxy", fileSource(first)), {"local_proxy"});
  INFO(gate.process().logTail(40));
  REQUIRE(
      gate.process().waitForLog("using the PAC file from " + regexEscape(first), kPacLoadTimeout));

  // 10 MiB at 2 MiB/s through squid1: about 5 s.
  const std::string long_out = env.out.file("long");
  auto slow =
      startCurl({"-sS", "-x", gate.proxyUrl(), "--cacert", env.ca.caCertPath(), "--limit-rate",
                 "2M", "-o", long_out, env.url("origin.test", true, "/10m")},
                env.out.path().string(), "long");
  REQUIRE(waitForFileSize(long_out, 512 * 1024, milliseconds(10000)));

  // The file source becomes a URL to another file, by POST /reload.
  gate.writeFile("h2gate.yaml",
                 PacEnv::yaml(PacEnv::listener(
                     "local_proxy", "              url: " + env.pacUrl("second.pac") + "\n")));
  const AdminReply reload = adminPost(gate.adminPort(), "/reload");
  INFO(reload.body);
  CHECK(reload.status == 200);
  REQUIRE(gate.process().waitForLog("configuration reloaded from", milliseconds(5000)));
  REQUIRE(gate.process().waitForLog(
      "using the PAC file from " + regexEscape(env.pacUrl("second.pac")), kPacLoadTimeout));
  CHECK(slow->running());  // the reload did not cut it

  CHECK(env.fetch("", env.url("origin.test", true, "/1m?new1"), "n1"));
  CHECK(env.fetch("", env.url("origin.test", false, "/1m?new2"), "n2"));
  squid2.waitForAccessLines(2, "", milliseconds(5000));
  INFO("squid2: " << squid2.accessLog());
  CHECK(countOccurrences(squid2.accessLog(), "origin.test") == 2);

  // The transfer under way finishes, byte-identical, through squid1.
  const auto st = slow->wait(milliseconds(60000));
  REQUIRE(st);
  CHECK(st->exited);
  CHECK(st->code == 0);
  CHECK(sha256File(long_out) == testFile("10m").sha256);
  squid1.waitForAccessLines(1, "", milliseconds(5000));
  INFO("squid1: " << squid1.accessLog());
  CHECK(countOccurrences(squid1.accessLog(), "origin.test") == 1);
  CHECK(squid1.accessLog().find("/1m?new") == std::string::npos);

  const AdminReply status = adminGet(gate.adminPort(), "/pac");
  INFO(status.body);
  CHECK(status.body.find("in use: " + env.pacUrl("second.pac")) != std::string::npos);
}
