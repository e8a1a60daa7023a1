// The environment's proxy variables as system proxy settings
// (gateway/pac_engine/system_proxy_env.cc): what is read from the process's
// own environment, and NO_PROXY's entries as the bypass rules the PAC file
// made from them follows. How those settings answer requests is
// system_proxy_test.cc's.
#include <catch2/catch.hpp>

#include "gateway/pac_engine/system_proxy.h"
#include "tests/support/config_util.h"

using namespace h2gate::pac;
using h2gate::testing::ScopedEnv;
using Kind = BypassRule::Kind;
using Mode = SystemProxySettings::Mode;

TEST_CASE("system proxy env: NO_PROXY entries become bypass rules, curl's way",
          "[pac][system][system_proxy_env]") {
  const SystemProxySettings s =
      settingsFromEnvironment({{"https_proxy", "http://p.corp:3128"},
                               {"no_proxy",
                                "Exact-Host, .Corp.Example,10.0.0.0/8,::1,"
                                "*.wild.example"}});
  REQUIRE(s.mode == Mode::Manual);
  CHECK(s.manual.https == "PROXY p.corp:3128");
  CHECK(s.manual.http.empty());  // no http_proxy, no all_proxy: DIRECT for http://
  // A name covers its subdomains (curl's rule), lower-cased; no wildcards.
  const std::vector<BypassRule> want = {
      {Kind::Suffix, "exact-host"},
      {Kind::Suffix, "corp.example"},
      {Kind::Cidr, "10.0.0.0/8"},
      {Kind::Cidr, "::1/128"},
  };
  CHECK(s.manual.bypass == want);
  REQUIRE(s.notes.size() == 1);
  CHECK_THAT(s.notes[0], Catch::StartsWith("no_proxy: '*.wild.example'"));
}

TEST_CASE("system proxy env: NO_PROXY without a proxy variable changes nothing",
          "[pac][system][system_proxy_env]") {
  const SystemProxySettings s = settingsFromEnvironment({{"no_proxy", "*"}, {"NO_PROXY", "x"}});
  CHECK(s.mode == Mode::Direct);
  CHECK(s.manual.bypass.empty());
  CHECK(s.notes.empty());
}

TEST_CASE("system proxy env: the process's own environment, names in either case",
          "[pac][system][system_proxy_env]") {
  ScopedEnv a("http_proxy", std::nullopt);
  ScopedEnv b("HTTP_PROXY", "http://httpoxy.evil:1");  // a CGI request header: never read
  ScopedEnv c("https_proxy", std::nullopt);
  ScopedEnv d("HTTPS_PROXY", "http://secure.corp:8443");
  ScopedEnv e("all_proxy", std::nullopt);
  ScopedEnv f("ALL_PROXY", std::nullopt);
  ScopedEnv g("no_proxy", "intranet.corp");
#ifndef _WIN32
  // (Windows' variable names are case-insensitive: NO_PROXY is no_proxy.)
  ScopedEnv h("NO_PROXY", std::nullopt);
#endif
  SystemProxySettings s = settingsFromProcessEnvironment();
  REQUIRE(s.mode == Mode::Manual);
  CHECK(s.from == "environment");
  CHECK(s.manual.https == "PROXY secure.corp:8443");
  CHECK(s.manual.http.empty());
  CHECK(s.manual.bypass == std::vector<BypassRule>{{Kind::Suffix, "intranet.corp"}});

  ScopedEnv i("HTTPS_PROXY", std::nullopt);
  s = settingsFromProcessEnvironment();
  CHECK(s.mode == Mode::Direct);  // HTTP_PROXY alone is not a proxy setting
}
