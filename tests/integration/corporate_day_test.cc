// A Linux user's day behind a company's proxies, end to end with real
// servers: no kinit, the password stored once in the desktop's keyring.
//
//   h2gate credentials set corp 'CORP\erin'      # the password on stdin
//   h2gate --pac http://localhost:PORT/pac/corp.pac --proxy-auth auto
//          --proxy-credentials keyring:corp
//
// The keyring is gnome-keyring-daemon on a private D-Bus session bus
// (tests/support/secret_service.h). The PAC file (served by nginx,
// tests/support/pac_env.h) sends the intranet to squid asking for Negotiate
// (Kerberos, an MIT KDC in a throwaway realm: tests/support/kerberos_proxy.h),
// a partner's site to a proxy asking for NTLM (tests/support/auth_proxy.h:
// pyspnego verifies NTLMv2, another implementation than h2gate's
// gss-ntlmssp), and the rest DIRECT. h2gate gets the Kerberos ticket with
// the keyring's password itself (KRB5CCNAME names a cache that does not
// exist) and renews it: the realm gives erin's tickets 60 s, and the day goes
// on past the first one's end. One credentials entry serves both schemes
// (config/README.md: CORP\erin is erin in the default realm for Kerberos).
// Every transfer is compared byte for byte and found in the right proxy's log
// under the right user; the DIRECT ones in neither.
// [pac_auth][keyring][kerberos][ntlm][renewal]
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/support/auth_proxy.h"
#include "tests/support/pac_auth_env.h"
#include "tests/support/scrape.h"
#include "tests/support/secret_service.h"

using namespace h2gate::test;
using namespace h2gate::test::pacauth;
using std::chrono::milliseconds;

namespace {

// erin's password: her Kerberos principal's and her NTLM account's, as in
// a Windows domain.
const std::string kErinPassword = "Erin-pw-8Hs";
const std::string kErinKerberos = "erin@H2GATE.TEST";
const std::string kErinNtlm = "CORP\\erin";

// A 1 MiB download through h2gate into `file`: "" when it answered 200 with
// the origin's bytes, else what went wrong.
std::string fetchProblem(PacEnv& env, const std::string& url, const std::string& file) {
  const CommandResult r =
      env.curl("", {"-o", file, "-w", "CONNECT %{http_connect}, status %{http_code}", url});
  if (r.exit_code == 0 && r.out.ends_with("status 200") &&
      sha256File(file) == testFile("1m").sha256)
    return "";
  return url + ": curl exit " + std::to_string(r.exit_code) + ", " + r.out +
         (r.out.ends_with("status 200") ? ", not the origin's bytes" : "") + " " + r.err;
}

// The test proxy's log entries of `method` requests whose target ends with
// `target` that it answered 200, and of those the ones authenticated as
// `user`.
struct Served {
  size_t all = 0;
  size_t as_user = 0;
};
Served servedBy(const AuthProxy& proxy, const std::string& method, const std::string& target,
                const std::string& user) {
  Served s;
  for (const auto& e : proxy.requests()) {
    const auto field = [&](const char* k) { return e.count(k) ? e.at(k) : std::string(); };
    if (field("method") != method || !field("target").ends_with(target) || field("status") != "200")
      continue;
    ++s.all;
    if (field("user") == user) ++s.as_user;
  }
  return s;
}

}  // namespace

TEST_CASE(
    "a Linux user's day: the password in the keyring, no kinit; h2gate --pac with --proxy-auth "
    "auto: Kerberos to squid (the ticket renewed), NTLM to another proxy, the rest DIRECT",
    "[pac_auth][keyring][kerberos][ntlm][renewal]") {
  REQUIRE_PAC_AUTH_TOOLS();
  SecretService desktop;
  KerberosPacEnv env;
  // erin's tickets last a minute (the principal's maxlife): h2gate renews
  // them after 48 s (20% before the end, config/README.md).
  env.realm.kdc.addPrincipal("erin", kErinPassword);
  env.realm.kdc.modifyPrincipal("erin", "-maxlife \"60 seconds\"");
  AuthProxy::Options po;
  po.schemes = "ntlm";
  po.ntlm_users = {"CORP:erin:" + kErinPassword};
  po.hosts = {"origin.test"};
  AuthProxy ntlm_proxy(po);

  // The fixtures, proven by other clients: kinit's ticket and curl's GSSAPI
  // through squid; curl's own NTLM through the NTLM proxy, which reaches
  // origin.test.
  const std::string kinit_cache = env.realm.kdc.kinit("erin", kErinPassword);
  const auto kinit_at = Clock::now();
  const std::string squid_url = "http://localhost:" + str(env.squid->httpPort());
  const auto squidStatus = [&](const std::string& ccache) {
    return env.realm
        .curl(ccache, {"-o", "/dev/null", "-w", "%{http_code}", "--proxy", squid_url,
                       "--proxy-negotiate", "-U", ":", env.url("files.a.test", false, "/1k?proof")})
        .out;
  };
  CHECK(squidStatus(kinit_cache) == "200");
  CommandResult proof =
      runCurl({"-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", env.ca.caCertPath(),
               "-x", ntlm_proxy.url(), "--proxy-ntlm", "-U", kErinNtlm + ":" + kErinPassword,
               env.url("origin.test", true, "/1k?proof")});
  CHECK(proof.out == "200");
  const std::string origin_tls = "origin.test:" + str(env.nginx.tlsPort());
  REQUIRE(servedBy(ntlm_proxy, "CONNECT", origin_tls, kErinNtlm).as_user == 1);

  // 1. erin stores her password once (the prompt reads standard input when
  //    it is not a terminal).
  SecretService::Run set =
      desktop.h2gate({"credentials", "set", "corp", kErinNtlm}, kErinPassword + "\n");
  CHECK(set.code() == 0);
  CHECK(set.out == "stored entry 'corp' (user CORP\\erin) in the Secret Service\n");
  // secret-tool, another client of the Secret Service, finds it there.
  CHECK(desktop.run({"secret-tool", "lookup", "entry", "corp"}).out == kErinPassword);

  // 2. The company's PAC file, and h2gate started with it: no kinit, no
  //    credential cache at all.
  const std::string pac_url = "http://localhost:" + str(env.nginx.httpPort()) + "/pac/corp.pac";
  const std::string kerberos_proxy = "PROXY localhost:" + str(env.squid->httpPort());
  const std::string ntlm_route = "PROXY localhost:" + str(ntlm_proxy.port());
  env.writePac("corp.pac",
               "function FindProxyForURL(url, host) {\n"
               "  if (host == \"files.a.test\") return \"" +
                   kerberos_proxy +
                   "\";  // the intranet\n"
                   "  if (host == \"origin.test\") return \"" +
                   ntlm_route +
                   "\";  // a partner's site\n"
                   "  return \"DIRECT\";\n"
                   "}\n");
  const std::string no_cache = "FILE:" + env.work.file("no-such-cache");
  H2gate& gate = env.startWithFlags(
      no_cache, {"--pac", pac_url, "--proxy-auth", "auto", "--proxy-credentials", "keyring:corp"},
      "127.0.0.1 localhost web.internal.test\n", desktop.env());
  CHECK(has(gate.stderrText(),
            "proxies named by the PAC file that get credentials (auto (Kerberos tickets got "
            "with the password of 'CORP\\erin', no kinit)): [localhost]"));
  const std::string dump = adminGet(gate.adminPort(), "/config_dump").body;
  CHECK(has(dump, "keyring: corp\n"));
  CHECK(has(dump, "scheme: auto\n"));
  CHECK_FALSE(has(dump, kErinPassword));

  // 3. The day: a round every 2 s (or as fast as the machine allows), the
  //    apps fetching from the intranet and the partner (a tunnel and an
  //    absolute-form GET each) and from the web (DIRECT), until a round
  //    starts well after the end of h2gate's first ticket (60 s).
  const auto day_start = Clock::now();
  int rounds = 0;
  size_t failed = 0;
  for (bool last = false; !last; ++rounds) {
    const auto round_start = Clock::now();
    last = secondsSince(day_start) >= 64;
    const std::string t = str(static_cast<uint64_t>(rounds));
    for (const auto& [host, tls, tag] : std::vector<std::tuple<std::string, bool, std::string>>{
             {"files.a.test", true, "kc"},
             {"files.a.test", false, "kg"},
             {"origin.test", true, "nc"},
             {"origin.test", false, "ng"},
             {"web.internal.test", true, "dc"},
             {"web.internal.test", false, "dg"}}) {
      const std::string problem =
          fetchProblem(env, env.url(host, tls, "/1m?" + tag + t), env.out.file(tag));
      INFO("round " << t << ", " << secondsSince(day_start) << " s into the day");
      CHECK(problem == "");
      failed += problem.empty() ? 0 : 1;
    }
    std::this_thread::sleep_until(round_start + std::chrono::seconds(2));
  }
  INFO(rounds << " rounds in " << secondsSince(day_start) << " s, " << failed
              << " transfers failed");
  const std::string log = gate.stderrText();
  std::string kerberos_lines;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);)
    if (has(line, "Kerberos: ")) kerberos_lines += line + "\n";
  INFO("h2gate's Kerberos lines:\n" << kerberos_lines);

  // The ticket: got once with the password, renewed before it ended (not
  // got anew once it had).
  const size_t got = linesWith(log, "Kerberos: got a ticket for " + kErinKerberos +
                                        " with the configured password (no kinit; kept in "
                                        "memory), valid until ");
  const size_t renewed = linesWith(log, "Kerberos: renewed the ticket for " + kErinKerberos +
                                            " with the configured password (no kinit; kept in "
                                            "memory), valid until ");
  CHECK(got == 1);
  CHECK(renewed >= 1);
  CHECK(renewed <= 2);
  CHECK(linesWith(log, "renewing the ticket for") == 0);                  // no failed renewal
  CHECK(env.realm.kdc.asRequests("erin", "ISSUE") == 1 + got + renewed);  // kinit's, h2gate's
  CHECK_FALSE(std::filesystem::exists(env.work.file("no-such-cache")));
  // The fixture's tickets do end: kinit's, older than a minute now, no longer
  // gets through.
  REQUIRE(Clock::now() - kinit_at > std::chrono::seconds(62));
  CHECK(squidStatus(kinit_cache) == "407");

  // squid: each of h2gate's requests under erin's principal; the only 407
  // (besides the expired ticket's just now) is auto's first request, which
  // learnt the scheme.
  const size_t squid_requests = 2 * static_cast<size_t>(rounds);
  const auto lines =
      env.squid->waitForAccessLines(1 + 1 + squid_requests + 1, "", milliseconds(10000));
  INFO("squid: " << env.squid->accessLog());
  const auto fromSquid = [&](const std::string& needle) {
    std::vector<std::string> out;
    for (const std::string& l : lines)
      if (has(l, needle) && !has(l, "?proof")) out.push_back(l);
    return out;
  };
  // (A tunnel's line ends with the user squid authenticated; auto's first
  // CONNECT, the 407, has none.)
  const auto tunnels = fromSquid("CONNECT files.a.test:");
  CHECK(tunnels.size() == static_cast<size_t>(rounds) + 1);
  CHECK(endingWith(tunnels, kErinKerberos) == static_cast<size_t>(rounds));
  for (int i = 0; i < rounds; ++i) {
    const auto get = fromSquid("/1m?kg" + str(static_cast<uint64_t>(i)) + " ");
    CHECK(get.size() == 1);
    CHECK(endingWith(get, kErinKerberos) == 1);
  }
  CHECK(linesWith(env.squid->accessLog(), " 407 ") == 2);
  // The NTLM proxy: each of h2gate's requests on a connection NTLMv2
  // authenticated as CORP\erin.
  const Served ntlm_tunnels = servedBy(ntlm_proxy, "CONNECT", origin_tls, kErinNtlm);
  CHECK(ntlm_tunnels.all == static_cast<size_t>(rounds) + 1);  // and curl's proof
  CHECK(ntlm_tunnels.as_user == ntlm_tunnels.all);
  for (int i = 0; i < rounds; ++i) {
    const Served get =
        servedBy(ntlm_proxy, "GET", "/1m?ng" + str(static_cast<uint64_t>(i)), kErinNtlm);
    CHECK(get.all == 1);
    CHECK(get.as_user == 1);
  }
  for (const auto& e : ntlm_proxy.requests())
    if (e.count("nt_len")) CHECK(std::stoi(e.at("nt_len")) > 24);  // NTLMv2
  CHECK(linesWith(ntlm_proxy.logText(), "ntlm-rejected") == 0);
  // DIRECT: in no proxy's log.
  CHECK_FALSE(has(env.squid->accessLog(), "web.internal.test"));
  CHECK_FALSE(has(ntlm_proxy.logText(), "web.internal.test"));

  // What the admin endpoint says of the two proxies.
  CHECK(has(pacEval(gate, env.url("files.a.test", false, "/")),
            "credentials for " + kerberos_proxy + ": auto\n"));
  CHECK(has(clustersLine(gate, kerberos_proxy), " auth=negotiate "));
  CHECK(has(clustersLine(gate, ntlm_route), " auth=ntlm "));
  const Scrape m = scrapeMetrics(gate.adminPort());
  CHECK(m.sum("h2gate_upstream_auth_total", {{"scheme", "negotiate"}, {"result", "success"}}) ==
        static_cast<double>(squid_requests));
  CHECK(m.sum("h2gate_upstream_auth_total", {{"result", "failed"}}) == 0);
  CHECK(m.sum("h2gate_upstream_auth_total", {{"result", "rejected"}}) == 0);
  checkNotLogged(gate, {kErinPassword, "TlRMTVNTUA", "Negotiate Y"});
}
