// h2gate's SSPI backend (gateway/upstream/auth/sspi_win.cc) under wine,
// against real servers: tests/clients/windows/sspi_client.exe (mingw-w64)
// authenticates an HTTP request to squid's negotiate_kerberos_auth with a
// ticket from a throwaway MIT realm, to the test proxy's MIT acceptor
// (whose mutual-authentication answer SSPI then checks), and with NTLMv2 to
// the test proxy's pyspnego acceptor. Wine's Kerberos package is MIT
// Kerberos underneath (it reads KRB5CCNAME and KRB5_CONFIG); its NTLM is
// Samba's ntlm_auth (Debian winbind). ctest reports the test as skipped
// ("H2GATE-SKIP:") without wine or mingw-w64.
#include <catch2/catch.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/auth_proxy.h"
#include "tests/support/kerberos_proxy.h"
#include "tests/support/origin.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_ca.h"
#include "tests/support/upstream_proxies.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

std::string wineBinary() {
  for (const char* name : {"wine64", "wine"})
    if (std::string p = findProgram(name); !p.empty()) return p;
  return std::filesystem::exists("/usr/lib/wine/wine64") ? "/usr/lib/wine/wine64" : "";
}

// Runs sspi_client.exe under wine with `env` (Kerberos) on top.
struct SspiClient {
  std::string wine = wineBinary();
  std::string prefix = H2GATE_WINEPREFIX;

  CommandResult run(const std::vector<std::string>& args,
                    const std::map<std::string, std::optional<std::string>>& env = {}) const {
    std::vector<std::string> argv{"env", "WINEPREFIX=" + prefix, "WINEDEBUG=-all"};
    for (const auto& [k, v] : env)
      if (v) argv.push_back(k + "=" + *v);
    argv.push_back(wine);
    argv.push_back(H2GATE_SSPI_CLIENT);
    argv.insert(argv.end(), args.begin(), args.end());
    CommandResult r = runCommand(argv, milliseconds(120000));
    std::erase(r.out, '\r');  // a Windows program's text-mode stdout
    UNSCOPED_INFO("sspi_client " << args[0] << ": exit " << r.exit_code << "\nstdout: " << r.out
                                 << "\nstderr: " << r.err);
    return r;
  }
  ~SspiClient() {
    const std::string server = std::filesystem::path(wine).parent_path() / "wineserver";
    runCommand({"env", "WINEPREFIX=" + prefix,
                std::filesystem::exists(server) ? server : std::string("wineserver"), "-k"},
               milliseconds(10000));
  }
};

bool canRun() {
  if (wineBinary().empty()) {
    WARN("H2GATE-SKIP: wine not installed (Debian: wine64; deploy/install-deps.sh --test)");
    return false;
  }
  if (std::string(H2GATE_SSPI_CLIENT).empty()) {
    WARN("H2GATE-SKIP: sspi_client.exe was not built: mingw-w64 (Debian: g++-mingw-w64-x86-64)");
    return false;
  }
  return true;
}

}  // namespace

TEST_CASE("SSPI under wine: Negotiate to squid with a Kerberos ticket; mutual authentication",
          "[sspi][auth]") {
  if (!canRun()) return;
  REQUIRE(kerberosToolsMissing().empty());
  REQUIRE(authProxyMissing().empty());
  KerberosOriginEnv env("sspi");
  const KerberosRealm& realm = env.realm;
  SspiClient client;
  const std::string url = env.nginx.httpUrl("/1k");

  SECTION("squid's negotiate_kerberos_auth accepts the ticket") {
    Squid squid(negotiateSquidOptions(realm));
    const CommandResult r = client.run({"negotiate", std::to_string(squid.httpPort()), url},
                                       realm.kdc.env(realm.alice));
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("step1 continue") != std::string::npos);
    CHECK(r.out.find("status 200") != std::string::npos);
    const auto lines = squid.waitForAccessLines(1, "GET", milliseconds(5000));
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].ends_with(" alice@H2GATE.TEST"));
    // No ticket: SSPI says so, nothing is sent.
    const CommandResult none = client.run({"negotiate", std::to_string(squid.httpPort()), url},
                                          realm.kdc.env("FILE:" + env.work.file("none")));
    CHECK(none.exit_code == 1);
    CHECK(none.out.find("SEC_E_NO_CREDENTIALS") != std::string::npos);
  }
  SECTION("the proxy's mutual-authentication answer is checked by SSPI") {
    const std::string mutual = GENERATE("ok", "forged");
    AuthProxy::Options o;
    o.schemes = "negotiate";
    o.mutual = mutual;
    AuthProxy proxy(realm.negotiateProxyOptions(o));
    const CommandResult r =
        client.run({"negotiate", std::to_string(proxy.port()), url}, realm.kdc.env(realm.alice));
    INFO(proxy.logText());
    CHECK(r.out.find("status 200") != std::string::npos);
    CHECK(r.out.find(mutual == "ok" ? "mutual complete" : "mutual failed") != std::string::npos);
  }
}

// Wine's NTLM is Samba's ntlm_auth, whose NTLMv2 answers pyspnego 0.12
// rejects ("Invalid NTLM response from initiator") while gss-ntlmssp
// accepts them (checked by hand with ntlm_auth alone, no wine): the test
// proxy verifies with gss-ntlmssp here.
TEST_CASE("SSPI under wine: NTLMv2 with an explicit identity, verified by gss-ntlmssp",
          "[sspi][auth]") {
  if (!canRun()) return;
  REQUIRE(authProxyMissing().empty());
  Nginx nginx;
  AuthProxy::Options o;
  o.schemes = "ntlm";
  o.ntlm_users = {"CORP:alice:ntlm-pw"};
  o.ntlm_acceptor = "gss-ntlmssp";
  AuthProxy proxy(o);
  SspiClient client;
  const std::string port = std::to_string(proxy.port());
  CommandResult r = client.run({"ntlm", port, nginx.httpUrl("/1k"), "CORP\\alice", "ntlm-pw"});
  INFO(proxy.logText());
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("status 407\nstep2 complete") != std::string::npos);
  CHECK(r.out.find("status 200") != std::string::npos);
  r = client.run({"ntlm", port, nginx.httpUrl("/1k"), "CORP\\alice", "wrong"});
  CHECK(r.exit_code == 1);
  const auto log = proxy.requests();
  size_t accepted = 0, rejected = 0;
  for (const auto& e : log) {
    if (e.count("nt_len")) CHECK(std::stoi(e.at("nt_len")) > 24);  // NTLMv2
    accepted += e.at("scheme") == "ntlm";
    rejected += e.at("scheme") == "ntlm-rejected";
  }
  CHECK(accepted == 1);
  CHECK(rejected == 1);
}
