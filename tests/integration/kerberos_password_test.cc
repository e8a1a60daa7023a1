// Kerberos without kinit (gateway/upstream/auth/gssapi_posix.cc,
// PasswordTgt): a cluster's credentials give h2gate the password, h2gate gets
// the ticket itself, keeps it in memory and renews it before it ends. Real
// peers: an MIT KDC in a throwaway realm (tests/support/kerberos.h) and
// squid with negotiate_kerberos_auth (tests/support/kerberos_proxy.h);
// h2gate runs with KRB5CCNAME naming a cache that does not exist, so no
// ticket can come from anywhere but the password. Each principal is first
// proven with kinit and curl's own GSSAPI client through the same squid.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/auth_proxy.h"
#include "tests/support/h2gate.h"
#include "tests/support/kerberos_proxy.h"
#include "tests/support/listeners_env.h"
#include "tests/support/scrape.h"
#include "tests/support/temp_dir.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

#define REQUIRE_AUTH_TOOLS()                                                 \
  do {                                                                       \
    const std::string missing = kerberosToolsMissing() + authProxyMissing(); \
    if (!missing.empty()) FAIL("not installed:" << missing);                 \
  } while (0)

// Lines of `text` that contain `needle`, at log level `level` (" warn ").
size_t linesWith(const std::string& text, const std::string& level, const std::string& needle) {
  size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (has(line, level) && has(line, needle)) ++n;
  return n;
}

// squid asking for Negotiate in front of nginx, the realm; h2gate with a
// password and no credential cache at all.
struct PasswordEnv : KerberosSquidEnv {
  PasswordEnv() : KerberosSquidEnv("krb-password") {}

  // A principal with `password`, proven through squid by kinit and curl.
  void addUser(const std::string& name, const std::string& password) {
    realm.kdc.addPrincipal(name, password);
  }
  // curl --proxy-negotiate through squid's http_port with `ccache`; the
  // status (of the CONNECT for an https URL).
  std::string curlDirect(const std::string& ccache, const std::string& url) {
    const CommandResult r = realm.curl(ccache, {"-o", "/dev/null", "-w", "%{http_code}", "--proxy",
                                                "http://localhost:" + str(squid->httpPort()),
                                                "--proxy-negotiate", "-U", ":", url});
    return r.out;
  }

  // h2gate to squid's https_port as "localhost", with `auth` under
  // proxy_authentication, KRB5CCNAME naming a cache that does not exist.
  H2gate& startGate(const std::string& auth,
                    std::map<std::string, std::optional<std::string>> env = {}) {
    H2gate::Options o;
    o.binary = H2GATE_BINARY;
    o.yaml = authConfigYaml("localhost", squid->httpsPort(), ca.caCertPath(), auth);
    o.args = {"--log-level", "debug"};
    o.env = realm.kdc.env(noCache());
    for (auto& [k, v] : env) o.env[k] = v;
    gate = std::make_unique<H2gate>(std::move(o));
    return *gate;
  }
  std::string noCache() const { return "FILE:" + work.file("no-such-cache"); }

  // One CONNECT and one absolute-form GET through h2gate: their statuses.
  std::string twoRequests(const std::string& tag) {
    auto r = curlThrough(
        *gate, "", ca,
        {"-o", "/dev/null", "-w", "%{http_code}%{http_connect}", nginx.httpsUrl("/1k?" + tag)});
    std::string out = r.out;
    r = curlThrough(*gate, "", ca,
                    {"-o", "/dev/null", "-w", "%{http_code}", nginx.httpUrl("/1k?" + tag)});
    return out + " " + r.out;
  }

  // squid's access lines that end with `user`.
  size_t squidLinesOf(const std::string& user) {
    const auto lines = squid->accessLines();
    return static_cast<size_t>(std::count_if(
        lines.begin(), lines.end(), [&](const std::string& l) { return l.ends_with(" " + user); }));
  }

  std::unique_ptr<H2gate> gate;
};

}  // namespace

TEST_CASE("Kerberos with a password, no kinit: h2gate gets the ticket itself",
          "[auth][kerberos][password]") {
  REQUIRE_AUTH_TOOLS();
  PasswordEnv env;
  env.addUser("bob", "Bob-pw-7Qx");
  // The fixture: bob's own ticket gets through squid; without one, 407.
  CHECK(env.curlDirect(env.realm.kdc.kinit("bob", "Bob-pw-7Qx"), env.nginx.httpUrl("/1k")) ==
        "200");
  CHECK(env.curlDirect(env.noCache(), env.nginx.httpUrl("/1k")) == "407");
  const size_t proven = env.squidLinesOf("bob@H2GATE.TEST");
  CHECK(proven == 1);

  const std::string scheme = GENERATE("negotiate", "auto");
  INFO("scheme " << scheme);
  // The password from a file; the user name without a realm (the default one).
  const std::string pw_file = env.work.write("bob.pw", "Bob-pw-7Qx\n");
  H2gate& gate = env.startGate("      scheme: " + scheme +
                               "\n"
                               "      credentials: {username: bob, password_file: {filename: " +
                               pw_file + "}}\n");
  for (int i = 0; i < 3; ++i) {
    const std::string got = env.twoRequests(str(i));
    INFO(gate.process().logTail(30));
    CHECK(got == "200200 200");
  }
  // squid saw bob on all six (auto: after one 407 that taught it the scheme).
  // (kinit's proof, the 407 without a ticket, h2gate's six and auto's first 407.)
  env.squid->waitForAccessLines(2 + 6 + (scheme == "auto" ? 1 : 0), "", milliseconds(10000));
  INFO(env.squid->accessLog());
  CHECK(env.squidLinesOf("bob@H2GATE.TEST") == proven + 6);
  // One AS exchange for all of them (and for kinit's proof before).
  CHECK(env.realm.kdc.asRequests("bob", "ISSUE") == 2);
  const std::string log = gate.stderrText();
  INFO(log);
  CHECK(linesWith(log, " info ",
                  "Kerberos: got a ticket for bob@H2GATE.TEST with the configured password (no "
                  "kinit; kept in memory), valid until ") == 1);
  CHECK(has(log, "(Kerberos tickets got with the password of 'bob', no kinit)"));
  // Nothing was written where the user's cache would be.
  CHECK_FALSE(std::filesystem::exists(env.work.file("no-such-cache")));
  const Scrape m = scrapeMetrics(gate.adminPort());
  CHECK(m.sum("h2gate_upstream_auth_total", {{"scheme", "negotiate"}, {"result", "success"}}) == 6);
  checkNotLogged(gate, {"Bob-pw-7Qx", "Negotiate Y"});
}

TEST_CASE("Kerberos with a password: the ticket is renewed before it ends, no request fails",
          "[auth][kerberos][password][renewal]") {
  REQUIRE_AUTH_TOOLS();
  PasswordEnv env;
  // rita's tickets last 60 s (the principal's maxlife): renewed after 48 s.
  env.addUser("rita", "Rita-pw-3Kd");
  env.realm.kdc.modifyPrincipal("rita", "-maxlife \"60 seconds\"");
  const std::string rita_cache = env.realm.kdc.kinit("rita", "Rita-pw-3Kd");
  const auto kinit_at = std::chrono::steady_clock::now();
  CHECK(env.curlDirect(rita_cache, env.nginx.httpUrl("/1k")) == "200");

  H2gate& gate = env.startGate(
      "      scheme: negotiate\n"
      "      credentials: {username: rita@H2GATE.TEST, password: '${H2GATE_TEST_RITA_PW}'}\n",
      {{"H2GATE_TEST_RITA_PW", "Rita-pw-3Kd"}});
  // Requests every 2 s for 150 s: two and a half lifetimes.
  const auto start = std::chrono::steady_clock::now();
  size_t requests = 0;
  std::vector<std::string> failed;
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(150)) {
    const std::string got = env.twoRequests(str(requests));
    requests += 2;
    if (got != "200200 200") failed.push_back(got);
    std::this_thread::sleep_for(milliseconds(2000));
  }
  const std::string log = gate.stderrText();
  INFO(log);
  INFO(env.squid->accessLog());
  CHECK(failed.empty());
  CHECK(requests >= 60);
  // One ticket at the start, then at least two renewals (after ~48 s and
  // ~96 s), each an AS exchange at the KDC and an info line with its end.
  const size_t renewals = linesWith(log, " info ",
                                    "Kerberos: renewed the ticket for rita@H2GATE.TEST with the "
                                    "configured password (no kinit; kept in memory), valid until ");
  CHECK(renewals >= 2);
  CHECK(renewals <= 3);
  CHECK(linesWith(log, " info ", "Kerberos: got a ticket for rita@H2GATE.TEST") == 1);
  CHECK(env.realm.kdc.asRequests("rita", "ISSUE") ==
        1 + 1 + renewals);  // kinit, h2gate's first, renewals
  // The fixture's tickets do end: kinit's, older than a minute now, no
  // longer gets curl through.
  REQUIRE(std::chrono::steady_clock::now() - kinit_at > std::chrono::seconds(61));
  CHECK(env.curlDirect(rita_cache, env.nginx.httpUrl("/1k")) == "407");
  // squid answered every request of h2gate's with rita's ticket: no 407.
  env.squid->waitForAccessLines(requests + 2, "", milliseconds(10000));
  CHECK(env.squidLinesOf("rita@H2GATE.TEST") == requests + 1);
  const Scrape m = scrapeMetrics(gate.adminPort());
  CHECK(m.sum("h2gate_upstream_auth_total", {{"result", "failed"}}) == 0);
  CHECK(m.sum("h2gate_upstream_auth_total", {{"result", "rejected"}}) == 0);
  checkNotLogged(gate, {"Rita-pw-3Kd"});
}

TEST_CASE("Kerberos with a wrong password: 407, one clear line, one try, a reload recovers",
          "[auth][kerberos][password]") {
  REQUIRE_AUTH_TOOLS();
  PasswordEnv env;
  // With preauthentication required (Active Directory's way) the KDC says
  // "Preauthentication failed"; without, the client cannot read its answer.
  const bool preauth = GENERATE(true, false);
  INFO("requires_preauth " << preauth);
  env.addUser("dave", "Dave-pw-9Zt");
  if (preauth) env.realm.kdc.modifyPrincipal("dave", "+requires_preauth");
  CHECK(env.curlDirect(env.realm.kdc.kinit("dave", "Dave-pw-9Zt"), env.nginx.httpUrl("/1k")) ==
        "200");
  const std::string pw_file = env.work.write("dave.pw", "Wrong-pw-1Xy\n");
  const std::string auth =
      "      scheme: negotiate\n"
      "      credentials: {username: dave, password_file: {filename: " +
      pw_file + "}}\n";
  H2gate& gate = env.startGate(auth);
  for (int i = 0; i < 3; ++i) {
    const std::string got = env.twoRequests(str(i));
    INFO(gate.process().logTail(20));
    CHECK(got == "000407 407");  // curl reports a CONNECT's own answer as http_connect
  }
  std::string log = gate.stderrText();
  INFO(log);
  const std::string said =
      "getting a ticket for dave@H2GATE.TEST with the configured password: the KDC rejected the "
      "password (the KDC says: ";
  // Logged at warn once, with what to do; the five other requests at debug.
  CHECK(linesWith(log, " warn ", said) == 1);
  CHECK(linesWith(log, " debug ", said) == 5);
  CHECK(linesWith(log, " warn ",
                  "the password is wrong: correct the cluster's credentials (password or "
                  "password_file) and reload; h2gate asks the KDC with this password again in 15 "
                  "minutes") == 1);
  // The KDC was asked once, not once per request.
  if (preauth)
    CHECK(env.realm.kdc.asRequests("dave", "PREAUTH_FAILED") == 1);
  else
    CHECK(env.realm.kdc.asRequests("dave", "ISSUE") ==
          2);  // kinit's, then h2gate's (unreadable to it)
  // squid answered 407 to all six, none with a ticket.
  env.squid->waitForAccessLines(1 + 6, "", milliseconds(10000));
  CHECK(env.squidLinesOf("dave@H2GATE.TEST") == 1);
  const Scrape m = scrapeMetrics(gate.adminPort());
  CHECK(m.sum("h2gate_upstream_auth_total", {{"scheme", "negotiate"}, {"result", "failed"}}) == 6);
  checkNotLogged(gate, {"Wrong-pw-1Xy", "Dave-pw-9Zt"});

  // The corrected password and a reload: requests pass at once (the
  // back-off belongs to the wrong password).
  env.work.write("dave.pw", "Dave-pw-9Zt\n");
  gate.process().signalMain(SIGHUP);
  REQUIRE(gate.process().waitForLog("configuration reloaded from .*clusters: 1 changed \\(proxy\\)",
                                    milliseconds(5000)));
  const std::string got = env.twoRequests("after");
  INFO(gate.process().logTail(20));
  CHECK(got == "200200 200");
  env.squid->waitForAccessLines(1 + 6 + 2, "", milliseconds(10000));
  CHECK(env.squidLinesOf("dave@H2GATE.TEST") == 1 + 2);
  checkNotLogged(gate, {"Wrong-pw-1Xy", "Dave-pw-9Zt"});
}

TEST_CASE("Kerberos with an expired password: 407, one clear line that says so",
          "[auth][kerberos][password]") {
  REQUIRE_AUTH_TOOLS();
  PasswordEnv env;
  env.addUser("carol", "Carol-pw-5Vb");
  // The fixture: before it expires, carol gets through; after, kinit is
  // refused (and would ask for a new password).
  CHECK(env.curlDirect(env.realm.kdc.kinit("carol", "Carol-pw-5Vb"), env.nginx.httpUrl("/1k")) ==
        "200");
  env.realm.kdc.modifyPrincipal("carol", "-pwexpire \"2020-01-01 00:00:00 UTC\"");
  CHECK_THROWS(env.realm.kdc.kinit("carol", "Carol-pw-5Vb"));
  CHECK(env.realm.kdc.asRequests("carol", "CLIENT KEY EXPIRED") == 1);

  H2gate& gate = env.startGate(
      "      scheme: negotiate\n"
      "      credentials: {username: carol, password: Carol-pw-5Vb}\n");
  for (int i = 0; i < 3; ++i) {
    const std::string got = env.twoRequests(str(i));
    INFO(gate.process().logTail(20));
    CHECK(got == "000407 407");
  }
  const std::string log = gate.stderrText();
  INFO(log);
  const std::string said =
      "getting a ticket for carol@H2GATE.TEST with the configured password: the password has "
      "expired (the KDC says: Password has expired)";
  CHECK(linesWith(log, " warn ", said) == 1);
  CHECK(linesWith(log, " debug ", said) == 5);
  CHECK(has(log,
            "change it (kpasswd, or at a desktop of the domain), put the new one in the "
            "cluster's credentials and reload"));
  CHECK(env.realm.kdc.asRequests("carol", "CLIENT KEY EXPIRED") ==
        2);  // kinit's, then h2gate's one
  checkNotLogged(gate, {"Carol-pw-5Vb"});
}
