// PAC files found by discovery driving routing end to end (the sources
// alone are tested in pac_sources_test.cc and system_proxy_test.cc): WPAD by
// DNS in a network namespace where nginx answers on port 80 for
// wpad.corp.example.test, and `system` from the environment (http_proxy,
// https_proxy, no_proxy). In both, a request through h2gate lands on the
// squid the discovered settings name, and the excluded names go DIRECT.
// Fixture: tests/support/pac_env.h. [pac_routing]
#include <catch2/catch.hpp>

#include <string>

#include "tests/support/netns.h"
#include "tests/support/pac_env.h"
#include "tests/support/scrape.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

TEST_CASE("pac wpad routing: the PAC file WPAD finds decides where requests go",
          "[pac_routing][pac_wpad]") {
  std::string why;
  if (!haveNetns(&why)) FAIL(why);
  // Port 80 is free in a namespace of our own.
  InNetns ns("pacwpad");
  REQUIRE(ns.error() == "");
  PacEnv env([](Nginx::Options& n) { n.http_port = 80; });
  Squid squid(PacEnv::squidOptions());
  const std::string pac =
      "function FindProxyForURL(url, host) {\n"
      "  if (dnsDomainIs(host, \".internal.test\")) return \"DIRECT\";\n"
      "  return \"PROXY 127.0.0.1:" +
      str(squid.httpPort()) +
      "\";\n"
      "}\n";
  env.writePac("wpad.dat", pac);
  // The fixture first: curl gets the file by the WPAD name on port 80.
  const CommandResult proof =
      runCurl({"-sS", "--resolve", "wpad.corp.example.test:80:127.0.0.1", "-w", "\n%{http_code}",
               "http://wpad.corp.example.test/wpad.dat"});
  REQUIRE(proof.out == pac + "\n200");

  // h2gate's resolver searches corp.example.test; its /etc/hosts knows the
  // WPAD name (and web.internal.test), nothing else.
  H2gate& gate = env.start(
      PacEnv::listener("local_proxy",
                       "              wpad: true\n"
                       "              fallback: {reject: 503}\n"),
      {"local_proxy"},
      [](H2gate::Options& o) {
        o.resolv_conf =
            "nameserver 127.0.0.1\noptions timeout:1 attempts:1\nsearch corp.example.test\n";
      },
      "127.0.0.1 web.internal.test\n127.0.0.1 wpad.corp.example.test\n");
  INFO(gate.process().logTail(40));
  REQUIRE(gate.process().waitForLog(
      "using the PAC file from http://wpad\\.corp\\.example\\.test/wpad\\.dat", kPacLoadTimeout));

  CHECK(env.fetch("", env.url("origin.test", true, "/1m?w1"), "w1"));
  CHECK(env.fetch("", env.url("origin.test", false, "/1m?w2"), "w2"));
  CHECK(env.fetch("", env.url("web.internal.test", true, "/1m?w3"), "w3"));
  squid.waitForAccessLines(2, "", milliseconds(5000));
  INFO("squid: " << squid.accessLog());
  CHECK(countOccurrences(squid.accessLog(), "origin.test") == 2);
  CHECK(squid.accessLog().find("internal.test") == std::string::npos);
  const auto log = gate.waitForAccessLog(3, milliseconds(5000));
  REQUIRE(log.size() == 3);
  CHECK(log[0].get("cluster") == "PROXY 127.0.0.1:" + str(squid.httpPort()));
  CHECK(log[1].get("cluster") == "PROXY 127.0.0.1:" + str(squid.httpPort()));
  CHECK(log[2].get("protocol") == "direct");
  CHECK(env.nginx.waitForAccessCount("GET /wpad.dat", 2) == 2);  // curl's and h2gate's
  const AdminReply status = adminGet(gate.adminPort(), "/pac");
  INFO(status.body);
  CHECK(status.body.find("in use: http://wpad.corp.example.test/wpad.dat") != std::string::npos);
}

TEST_CASE("pac system routing: http_proxy/https_proxy/no_proxy from the environment",
          "[pac_routing][pac_system]") {
  if (!haveMountNamespaces()) FAIL("needs root for a private /etc/hosts (unshare -m)");
  PacEnv env;
  Squid plain(PacEnv::squidOptions());   // http_proxy
  Squid secure(PacEnv::squidOptions());  // https_proxy
  H2gate& gate = env.start(PacEnv::listener("local_proxy",
                                            "              system: true\n"
                                            "              fallback: {reject: 503}\n"),
                           {"local_proxy"}, [&](H2gate::Options& o) {
                             // GNOME's settings, if gsettings is installed, say nothing (mode
                             // none).
                             o.env["GSETTINGS_BACKEND"] = "memory";
                             o.env["http_proxy"] = "http://127.0.0.1:" + str(plain.httpPort());
                             o.env["https_proxy"] = "http://127.0.0.1:" + str(secure.httpPort());
                             o.env["no_proxy"] = "localhost,.internal.test";
                           });
  INFO(gate.process().logTail(40));
  REQUIRE(gate.process().waitForLog("using the PAC file from", kPacLoadTimeout));

  CHECK(env.fetch("", env.url("origin.test", false, "/1m?s1"), "s1"));
  CHECK(env.fetch("", env.url("origin.test", true, "/1m?s2"), "s2"));
  CHECK(env.fetch("", env.url("web.internal.test", true, "/1m?s3"), "s3"));
  CHECK(env.fetch("", env.url("web.internal.test", false, "/1m?s4"), "s4"));
  plain.waitForAccessLines(1, "", milliseconds(5000));
  secure.waitForAccessLines(1, "", milliseconds(5000));
  INFO("http_proxy squid: " << plain.accessLog());
  INFO("https_proxy squid: " << secure.accessLog());
  CHECK(countOccurrences(plain.accessLog(), "origin.test") == 1);
  CHECK(countOccurrences(plain.accessLog(), "GET http://origin.test") == 1);
  CHECK(countOccurrences(secure.accessLog(), "origin.test") == 1);
  CHECK(countOccurrences(secure.accessLog(), "CONNECT origin.test") == 1);
  CHECK(plain.accessLog().find("internal.test") == std::string::npos);
  CHECK(secure.accessLog().find("internal.test") == std::string::npos);
  const auto log = gate.waitForAccessLog(4, milliseconds(5000));
  REQUIRE(log.size() == 4);
  CHECK(log[2].get("protocol") == "direct");
  CHECK(log[3].get("protocol") == "direct");
}
