// gateway/server/run_as.h: which proxies authenticate by single sign-on
// (and so, under LocalSystem, as the computer's account), the warning that
// says so, and the account of this process. The configurations are built
// from flags and YAML as h2gate builds them (cli::buildBootstrap).
#include "gateway/server/run_as.h"

#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "gateway/server/cli.h"
#include "tests/support/config_util.h"
#include "tests/support/temp_dir.h"

using namespace h2gate;
using h2gate::test::TempDir;
using h2gate::testing::allProblems;

namespace {

// The single sign-on proxies of the configuration these flags give.
std::vector<std::string> ssoOf(std::vector<const char*> args) {
  args.insert(args.begin(), "h2gate");
  const cli::ParseResult p = cli::parse(static_cast<int>(args.size()), args.data());
  INFO("flags: " << p.errors.size() << " error(s)");
  REQUIRE(p.ok());
  const config::LoadResult r = cli::buildBootstrap(p.options, std::nullopt);
  INFO(allProblems(r.problems));
  REQUIRE(r.ok());
  return run_as::singleSignOnProxies(r.bootstrap);
}

using List = std::vector<std::string>;

}  // namespace

TEST_CASE("run_as: single sign-on is Negotiate, NTLM or auto without credentials",
          "[server][run_as]") {
  CHECK(ssoOf({}) == List{});
  CHECK(ssoOf({"--upstream", "http://proxy.corp.example:8080"}) == List{});
  CHECK(ssoOf({"--upstream", "http://proxy.corp.example:8080", "--proxy-auth", "negotiate"}) ==
        List{"cluster 'upstream' (negotiate)"});
  CHECK(ssoOf({"--upstream", "http://proxy.corp.example:8080", "--proxy-auth", "ntlm"}) ==
        List{"cluster 'upstream' (ntlm)"});
  CHECK(ssoOf({"--upstream", "http://proxy.corp.example:8080", "--proxy-auth", "auto"}) ==
        List{"cluster 'upstream' (auto)"});
  // Explicit credentials: that account, whoever runs h2gate.
  CHECK(ssoOf({"--upstream", "http://CORP%5Calice:pw@proxy.corp.example:8080", "--proxy-auth",
               "ntlm"}) == List{});
  CHECK(ssoOf({"--upstream", "http://alice:pw@proxy.corp.example:8080", "--proxy-auth", "basic"}) ==
        List{});
  // The proxies a PAC file names.
  CHECK(ssoOf({"--pac", "http://wpad.corp.example/wpad.dat", "--proxy-auth", "negotiate"}) ==
        List{"the proxies the PAC file of listener 'local_proxy' names (negotiate)"});
  CHECK(ssoOf({"--pac", "http://wpad.corp.example/wpad.dat"}) == List{});
}

TEST_CASE("run_as: clusters and PAC routes of a config file", "[server][run_as]") {
  TempDir dir("run_as");
  const std::string path = dir.write("h2gate.yaml", R"(static_resources:
  listeners:
  - name: main
    address: {socket_address: {address: 127.0.0.1, port_value: 3128}}
    filter_chains:
    - filters:
      - name: h2gate.filters.forward_proxy
        typed_config:
          routes:
          - match: {hosts: [a.example]}
            cluster: sso
          - match: {hosts: [b.example]}
            cluster: named
          - match: {}
            pac:
              url: http://wpad.corp.example/wpad.dat
              proxies:
                proxy_authentication:
                  scheme: ntlm
                  credentials: {username: 'CORP\alice', password: secret}
  clusters:
  - name: sso
    proxy_authentication: {scheme: negotiate}
    load_assignment:
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: proxy.corp.example, port_value: 8080}}}
  - name: named
    proxy_authentication:
      scheme: auto
      credentials: {username: 'CORP\alice', password: secret}
    load_assignment:
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: proxy.corp.example, port_value: 8080}}}
)");
  CHECK(ssoOf({"-c", path.c_str()}) == List{"cluster 'sso' (negotiate)"});
}

TEST_CASE("run_as: the warning names the proxies, the computer account and the way out",
          "[server][run_as]") {
  CHECK(run_as::localSystemWarning({}, "h2gate runs").empty());
  const run_as::Warning w = run_as::localSystemWarning(
      {"cluster 'a' (negotiate)", "cluster 'b' (ntlm)"}, "the installed service h2gate runs");
  CHECK(w.detail ==
        "the installed service h2gate runs as LocalSystem: single sign-on (Negotiate, NTLM) to "
        "cluster 'a' (negotiate), cluster 'b' (ntlm) authenticates as this computer's account "
        "(DOMAIN\\HOST$), not as the user logged on");
  CHECK(w.advice.find("'h2gate autostart install'") != std::string::npos);
  CHECK(w.advice.find("proxy_authentication.credentials") != std::string::npos);
  CHECK(w.line() == w.detail + "; " + w.advice);
}

TEST_CASE("run_as: LocalSystem is S-1-5-18; this test does not run as it", "[server][run_as]") {
#if defined(_WIN32)
  CHECK(run_as::isLocalSystem("S-1-5-18"));
  CHECK(run_as::isLocalSystem(run_as::kLocalSystemSid));
  CHECK_FALSE(run_as::isLocalSystem("S-1-5-19"));  // LocalService
  CHECK_FALSE(run_as::isLocalSystem("S-1-5-20"));  // NetworkService
  CHECK_FALSE(run_as::isLocalSystem("S-1-5-21-0-0-0-1000"));
  CHECK_FALSE(run_as::isLocalSystem("not a SID"));
  CHECK_FALSE(run_as::isLocalSystem(""));
  // This process's own token: a user's SID (under wine S-1-5-21-0-0-0-1000,
  // which wine gives every process, services too).
  const std::string sid = run_as::processUserSid();
  INFO("process user SID: " << sid);
  CHECK(sid.rfind("S-1-5-", 0) == 0);
  CHECK_FALSE(run_as::isLocalSystem(sid));
#else
  CHECK(run_as::processUserSid().empty());
  CHECK_FALSE(run_as::isLocalSystem("S-1-5-18"));
#endif
}
