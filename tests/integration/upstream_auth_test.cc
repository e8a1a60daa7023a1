// Proxy authentication with real servers: an MIT KDC in a
// throwaway realm (tests/support/kerberos.h) and squid with
// negotiate_kerberos_auth; nghttpx in front of that squid for Negotiate over
// HTTP/2; for NTLM (and the auto matrix and Kerberos mutual authentication,
// which squid does not send) the test proxy tests/support/auth_proxy.py,
// whose acceptors are pyspnego (NTLMv2) and MIT's GSSAPI. Every fixture is
// first proven with curl's own GSSAPI / NTLM client. A hostile proxy
// (tests/support/hostile_server.py) that names a new huge scheme in each 407
// cannot grow h2gate's log or memory without bound.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/auth_proxy.h"
#include "tests/support/h2gate.h"
#include "tests/support/hostile_server.h"
#include "tests/support/kerberos_proxy.h"
#include "tests/support/listeners_env.h"
#include "tests/support/net.h"
#include "tests/support/origin.h"
#include "tests/support/scrape.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_ca.h"
#include "tests/support/upstream_proxies.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

const char* const kAlice = "alice@H2GATE.TEST";

// Skips (with the reason on stdout) where the Kerberos tools or the test
// venv are missing; tests/run.sh installs both.
#define REQUIRE_AUTH_TOOLS()                                                 \
  do {                                                                       \
    const std::string missing = kerberosToolsMissing() + authProxyMissing(); \
    if (!missing.empty()) FAIL("not installed:" << missing);                 \
  } while (0)

// Access log lines of squid with this status.
size_t squidStatusCount(const Squid& squid, int status) {
  size_t n = 0;
  for (const auto& line : squid.accessLines()) {
    std::istringstream in(line);
    std::string client, method, url, code;
    in >> client >> method >> url >> code;
    if (code == str(status)) ++n;
  }
  return n;
}

// h2gate (debug log) to the proxy at localhost:`port` with `auth` (lines of
// its proxy_authentication), trusting `ca` (empty: plain HTTP).
H2gate::Options authGateOptions(uint16_t port, const std::string& ca, const std::string& auth) {
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  o.yaml = authConfigYaml("localhost", port, ca, auth);
  o.args = {"--log-level", "debug"};
  return o;
}

// The realm, nginx behind squid (https_port and http_port) with
// negotiate_kerberos_auth, alice's ticket; h2gate started by the test.
struct KerberosEnv : KerberosSquidEnv {
  KerberosEnv() : KerberosSquidEnv("auth") {}

  // h2gate with `auth`, to squid's https_port as "localhost", with the
  // given credential cache (empty: none) and extra environment.
  H2gate& startGate(const std::string& auth, const std::string& ccache,
                    std::map<std::string, std::optional<std::string>> env = {}, uint16_t port = 0) {
    H2gate::Options o = authGateOptions(port ? port : squid->httpsPort(), ca.caCertPath(), auth);
    o.env = realm.kdc.env(ccache.empty() ? "FILE:" + work.file("no-such-cache") : ccache);
    for (auto& [k, v] : env) o.env[k] = v;
    gate = std::make_unique<H2gate>(std::move(o));
    return *gate;
  }

  CommandResult curl(const std::vector<std::string>& args) {
    return curlThrough(*gate, "", ca, args);
  }

  // Nothing h2gate logged may carry a credential: no Kerberos token (they
  // start "YII" in base64), no password, no Proxy-Authorization value.
  // ("NTLMSSP" in base64: TlRMTVNTUA).
  void checkNoSecretsLogged() { checkNotLogged(*gate, {"Negotiate Y", "alice-pw", "TlRMTVNTUA"}); }

  TempDir out{"out"};
  std::unique_ptr<H2gate> gate;
};

}  // namespace

TEST_CASE("Kerberos fixture: curl's GSSAPI client gets through squid's negotiate_kerberos_auth",
          "[auth][kerberos]") {
  REQUIRE_AUTH_TOOLS();
  KerberosEnv env;
  const std::string url = env.nginx.httpUrl("/1k");
  auto curl = [&](const std::string& ccache, std::vector<std::string> args) {
    args.insert(args.begin(), {"-o", "/dev/null", "-w", "%{http_code}"});
    return env.realm.curl(ccache, args);
  };
  // http_port, absolute-form and CONNECT, as curl --proxy-negotiate -U : does it.
  auto r = curl(env.realm.alice, {"--proxy", "http://localhost:" + str(env.squid->httpPort()),
                                  "--proxy-negotiate", "-U", ":", url});
  INFO(r.err << env.squid->cacheLog());
  CHECK(r.out == "200");
  r = curl(env.realm.alice, {"--proxy", "http://localhost:" + str(env.squid->httpPort()),
                             "--proxy-negotiate", "-U", ":", "-p", url});
  CHECK(r.out == "200");
  // https_port (curl 8 speaks TLS to a proxy). Debian 13's curl 8.14.1 stops
  // before it sends anything there: "Failed to find the SSL filter" (exit 43),
  // its TLS channel binding for Negotiate does not find the proxy's TLS layer
  // (a curl bug, fixed upstream later). h2gate's own Negotiate over that
  // https_port is the next test's.
  r = curl(env.realm.alice,
           {"--proxy", "https://localhost:" + str(env.squid->httpsPort()), "--proxy-cacert",
            env.ca.caCertPath(), "--proxy-negotiate", "-U", ":", url});
  const bool curl_channel_binding_bug =
      r.exit_code == 43 && has(r.err, "Failed to find the SSL filter");
  if (curl_channel_binding_bug)
    WARN("this curl cannot do Negotiate to an HTTPS proxy (" << r.err
                                                             << "): https_port unproven here");
  else
    CHECK(r.out == "200");
  // Without a ticket squid says 407.
  r = curl("FILE:" + env.work.file("none"),
           {"--proxy", "http://localhost:" + str(env.squid->httpPort()), "--proxy-negotiate", "-U",
            ":", url});
  CHECK(r.out == "407");
  const auto lines =
      env.squid->waitForAccessLines(curl_channel_binding_bug ? 3 : 4, "", milliseconds(5000));
  CHECK(std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
          return l.ends_with(std::string(" ") + kAlice);
        }) >= (curl_channel_binding_bug ? 2 : 3));
}

TEST_CASE("Negotiate through h2gate: CONNECT and absolute-form, a ticket on every request",
          "[auth][kerberos]") {
  REQUIRE_AUTH_TOOLS();
  KerberosEnv env;
  const std::string scheme = GENERATE("negotiate", "auto");
  INFO("scheme " << scheme);
  H2gate& gate = env.startGate("      scheme: " + scheme + "\n", env.realm.alice);
  const TestFile& f = testFile("1m");

  // CONNECT: 1 MiB byte-identical through the tunnel (squid https_port).
  for (int i = 0; i < 3; ++i) {
    auto r = env.curl({"-o", env.out.file("dl"), "-w", "%{http_code}", env.nginx.httpsUrl("/1m")});
    INFO(r.err << gate.process().logTail(30));
    REQUIRE(r.out == "200");
    CHECK(sha256File(env.out.file("dl")) == f.sha256);
  }
  // Absolute-form GET and POST.
  auto r = env.curl({"-o", env.out.file("dl"), "-w", "%{http_code}", env.nginx.httpUrl("/1m")});
  CHECK(r.out == "200");
  CHECK(sha256File(env.out.file("dl")) == f.sha256);
  r = env.curl({"--data-binary", "@" + f.path, env.nginx.httpUrl("/upload")});
  INFO(r.err);
  CHECK(r.out == f.sha256 + " " + str(f.size) + "\n");

  // squid saw alice on every request; it answered 407 only to auto's very
  // first request (which then went again with a token): none after it.
  const auto lines =
      env.squid->waitForAccessLines(scheme == "auto" ? 6 : 5, "", milliseconds(10000));
  INFO(env.squid->accessLog());
  size_t authed = 0;
  for (const auto& l : lines) authed += l.ends_with(std::string(" ") + kAlice) ? 1 : 0;
  CHECK(authed == 5);
  const size_t denied = squidStatusCount(*env.squid, 407);
  CHECK(denied == (scheme == "auto" ? 1u : 0u));
  if (scheme == "auto") {
    const auto connects = env.squid->accessLines("CONNECT");
    REQUIRE(!connects.empty());
    CHECK(connects.front().find(" 407 ") != std::string::npos);
    CHECK(gate.stderrText().find("wants negotiate authentication (auto)") != std::string::npos);
  }

  const AdminReply clusters = adminGet(gate.adminPort(), "/clusters");
  CHECK(clusters.body.find("auth=negotiate") != std::string::npos);
  const Scrape m = scrapeMetrics(gate.adminPort());
  CHECK(m.sum("h2gate_upstream_auth_total", {{"scheme", "negotiate"}, {"result", "success"}}) == 5);
  CHECK(m.sum("h2gate_upstream_auth_total", {{"result", "rejected"}}) == 0);
  env.checkNoSecretsLogged();
}

TEST_CASE("Negotiate for a service account: a client keytab, no user credential cache",
          "[auth][kerberos]") {
  REQUIRE_AUTH_TOOLS();
  KerberosEnv env;
  env.realm.kdc.addRandomKey("svc-h2gate");
  const std::string keytab = env.realm.kdc.keytab("svc.keytab", {"svc-h2gate"});
  H2gate& gate = env.startGate(
      "      scheme: negotiate\n"
      "      client_keytab: {filename: " +
          keytab +
          "}\n"
          "      principal: svc-h2gate@H2GATE.TEST\n",
      /*ccache=*/"");
  for (const std::string& url : {env.nginx.httpsUrl("/1k"), env.nginx.httpUrl("/1k")}) {
    auto r = env.curl({"-o", "/dev/null", "-w", "%{http_code}", url});
    INFO(r.err << gate.process().logTail(20));
    CHECK(r.out == "200");
  }
  const auto lines = env.squid->waitForAccessLines(2, "", milliseconds(10000));
  INFO(env.squid->accessLog());
  CHECK(std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
          return l.ends_with(" svc-h2gate@H2GATE.TEST");
        }) == 2);
  // The tickets stayed in memory: no credential cache was written.
  CHECK_FALSE(std::filesystem::exists(env.work.file("no-such-cache")));
  env.checkNoSecretsLogged();
}

TEST_CASE("Negotiate failures: the app gets squid's 407, the reason is logged once",
          "[auth][kerberos]") {
  REQUIRE_AUTH_TOOLS();
  KerberosEnv env;
  std::string ccache;
  std::string auth = "      scheme: negotiate\n";
  std::string logged;
  SECTION("no credential cache: run kinit") {
    logged = "no Kerberos ticket: run kinit";
  }
  SECTION("an expired ticket") {
    ccache = env.realm.kdc.kinit("alice", "alice-pw", "2s");
    std::this_thread::sleep_for(milliseconds(3000));
    logged = "the Kerberos ticket has expired";
  }
  SECTION("a service principal the KDC does not know") {
    ccache = env.realm.alice;
    auth += "      spn: HTTP@wrong.localhost\n";
    logged = "HTTP/wrong.localhost@H2GATE.TEST not found in Kerberos database";
  }
  H2gate& gate = env.startGate(auth, ccache);
  for (int i = 0; i < 3; ++i) {
    // (curl reports a CONNECT's own answer as http_connect.)
    auto r = env.curl({"-o", "/dev/null", "-w", "%{http_connect}", env.nginx.httpsUrl("/1k")});
    INFO(r.err << gate.process().logTail(20));
    CHECK(r.out == "407");
    r = env.curl({"-o", "/dev/null", "-w", "%{http_code}", env.nginx.httpUrl("/1k")});
    CHECK(r.out == "407");
  }
  const std::string log = gate.stderrText();
  INFO(log);
  // Logged at warn once (the other five at debug), with what to do.
  CHECK(countOccurrences(log, " warn ") >= 1);
  size_t warned = 0;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);)
    if (line.find(" warn ") != std::string::npos && line.find(logged) != std::string::npos)
      ++warned;
  CHECK(warned == 1);
  CHECK(countOccurrences(log, logged) == 6);
  // No retry storm: one request each, squid answered 407 to each (squid logs
  // a request after its answer is out: wait for the six lines).
  env.squid->waitForAccessLines(6, "", milliseconds(10000));
  CHECK(squidStatusCount(*env.squid, 407) == 6);
  const Scrape m = scrapeMetrics(gate.adminPort());
  CHECK(m.sum("h2gate_upstream_auth_total", {{"scheme", "negotiate"}, {"result", "failed"}}) == 6);
  env.checkNoSecretsLogged();
}

TEST_CASE("Negotiate over HTTP/2: 20 tunnels on one connection, each with its own ticket",
          "[auth][kerberos][h2]") {
  REQUIRE_AUTH_TOOLS();
  KerberosEnv env;
  Nghttpx nghttpx(negotiateNghttpxOptions(env.ca, env.squid->httpPort()));
  H2gate& gate = env.startGate("      scheme: negotiate\n", env.realm.alice, {}, nghttpx.port());
  REQUIRE(gate.process().waitForLog("negotiated h2", milliseconds(10000)));
  // 20 tunnels at once, each a CONNECT stream.
  // HTTP/1.1 to the origin, so curl opens a tunnel per transfer (over h2
  // it would multiplex them all in one).
  std::vector<std::string> args{"-Z", "--parallel-max", "20", "--http1.1", "-w", "%{http_code}\\n"};
  for (int i = 0; i < 20; ++i)
    args.insert(args.end(), {"-o", "/dev/null", env.nginx.httpsUrl("/1m?" + str(i))});
  auto r = env.curl(args);
  INFO(r.err << gate.process().logTail(30));
  CHECK(countOccurrences(r.out, "200\n") == 20);
  const auto connects = nghttpx.waitForAccessLines(20, "CONNECT", milliseconds(10000));
  REQUIRE(connects.size() == 20);
  // One h2 connection from h2gate; every stream carried a different token.
  CHECK(nghttpx.clients("CONNECT").size() == 1);
  const std::set<std::string> tokens = negotiateTokens(connects);
  CHECK(tokens.size() == 20);
  CHECK(tokens.count("") == 0);
  // squid authenticated each as alice.
  const auto lines = env.squid->waitForAccessLines(20, "CONNECT", milliseconds(10000));
  CHECK(std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
          return l.ends_with(std::string(" ") + kAlice);
        }) == 20);
  CHECK(squidStatusCount(*env.squid, 407) == 0);
  env.checkNoSecretsLogged();
}

namespace {

// The authenticating test proxy (plain HTTP unless `tls`) in front of nginx;
// h2gate started by the test.
struct ProxyEnv {
  explicit ProxyEnv(AuthProxy::Options o, bool kerberos = false) {
    if (kerberos) {
      realm = std::make_unique<KerberosRealm>();
      o = realm->negotiateProxyOptions(std::move(o));
    }
    o.ntlm_users = {"CORP:alice:ntlm-pw"};
    proxy = std::make_unique<AuthProxy>(std::move(o));
  }

  H2gate& startGate(const std::string& auth, const std::string& ca = "") {
    H2gate::Options o = authGateOptions(proxy->port(), ca, auth);
    if (realm) o.env = realm->kdc.env(realm->alice);
    ntlmSanitizerEnv(o);
    gate = std::make_unique<H2gate>(std::move(o));
    return *gate;
  }

  CommandResult curl(const std::vector<std::string>& args) {
    return curlThrough(*gate, "", ca, args);
  }

  // No password, no NTLM message (TlRMTVNTUA: "NTLMSSP" in base64), no
  // Kerberos token.
  void checkNoSecretsLogged() { checkNotLogged(*gate, {"ntlm-pw", "TlRMTVNTUA"}); }

  // The proxy's log entries with this "scheme".
  std::vector<std::map<std::string, std::string>> entries(const std::string& scheme) const {
    std::vector<std::map<std::string, std::string>> out;
    for (auto& e : proxy->requests())
      if (e["scheme"] == scheme) out.push_back(e);
    return out;
  }

  TempDir work{"auth-proxy"};
  TestCA ca{work.path().string()};
  Nginx nginx{KerberosOriginEnv::nginxOptions(ca)};
  std::unique_ptr<KerberosRealm> realm;
  std::unique_ptr<AuthProxy> proxy;
  TempDir out{"out"};
  std::unique_ptr<H2gate> gate;
};

const char* const kNtlmAuth =
    "      scheme: ntlm\n"
    "      credentials: {username: 'CORP\\alice', password: ntlm-pw}\n";

}  // namespace

TEST_CASE("NTLM fixture: curl --proxy-ntlm is verified by pyspnego (NTLMv2)", "[auth][ntlm]") {
  REQUIRE_AUTH_TOOLS();
  AuthProxy::Options o;
  o.schemes = "ntlm";
  ProxyEnv env(o);
  auto curl = [&](const std::string& user, std::vector<std::string> args) {
    std::vector<std::string> all{"-sS",
                                 "-o",
                                 "/dev/null",
                                 "-w",
                                 "%{http_code}%{http_connect}",
                                 "--proxy",
                                 env.proxy->url(),
                                 "--proxy-ntlm",
                                 "-U",
                                 user};
    all.insert(all.end(), args.begin(), args.end());
    return runCurl(all, milliseconds(30000));
  };
  CHECK(curl("CORP\\alice:ntlm-pw", {env.nginx.httpUrl("/1k")}).out == "200000");
  CHECK(curl("CORP\\alice:ntlm-pw", {"--cacert", env.ca.caCertPath(), env.nginx.httpsUrl("/1k")})
            .out == "200200");
  CHECK(curl("CORP\\alice:wrong", {env.nginx.httpUrl("/1k")}).out == "407000");
  INFO(env.proxy->logText());
  const auto ok = env.entries("ntlm");
  REQUIRE(ok.size() == 2);
  for (const auto& e : ok) {
    CHECK(e.at("user") == "CORP\\alice");
    CHECK(std::stoi(e.at("nt_len")) > 24);  // NTLMv2
  }
  CHECK(env.entries("ntlm-rejected").size() == 1);
}

TEST_CASE("NTLM through h2gate: CONNECT, keep-alive absolute-form on an authenticated connection",
          "[auth][ntlm]") {
  REQUIRE_AUTH_TOOLS();
  AuthProxy::Options o;
  o.schemes = "ntlm";
  ProxyEnv env(o);
  H2gate& gate = env.startGate(kNtlmAuth);
  const TestFile& f = testFile("1m");
  // A POST first: the handshake holds its body back until the last leg.
  auto r = env.curl({"--data-binary", "@" + f.path, env.nginx.httpUrl("/upload")});
  INFO(r.err << gate.process().logTail(30) << env.proxy->logText());
  CHECK(r.out == f.sha256 + " " + str(f.size) + "\n");
  // CONNECT: a connection and a handshake per tunnel, 1 MiB byte-identical.
  for (int i = 0; i < 3; ++i) {
    r = env.curl({"-o", env.out.file("dl"), "-w", "%{http_code}", env.nginx.httpsUrl("/1m")});
    REQUIRE(r.out == "200");
    CHECK(sha256File(env.out.file("dl")) == f.sha256);
  }
  // Five GETs on one app connection: h2gate reuses the authenticated
  // keep-alive connection, which needs no more credentials.
  std::vector<std::string> gets{"-w", "%{http_code} "};
  for (int i = 0; i < 5; ++i)
    gets.insert(gets.end(), {"-o", "/dev/null", env.nginx.httpUrl("/1k?" + str(i))});
  r = env.curl(gets);
  CHECK(r.out == "200 200 200 200 200 ");

  const auto challenged = env.entries("ntlm-challenge");
  const auto authenticated = env.entries("ntlm");
  const auto reused = env.entries("ntlm-connection");
  // POST + 3 CONNECTs: four handshakes, each on its own connection, NTLMv2.
  CHECK(challenged.size() == 4);
  REQUIRE(authenticated.size() == 4);
  for (const auto& e : authenticated) {
    CHECK(std::stoi(e.at("nt_len")) > 24);
    CHECK(e.at("user") == "CORP\\alice");
  }
  CHECK(authenticated[0].at("method") == "POST");
  CHECK(authenticated[0].at("body_len") == str(f.size));
  CHECK(challenged[0].at("client") == authenticated[0].at("client"));
  // The GETs went on the POST's connection, authenticated once.
  REQUIRE(reused.size() == 5);
  for (const auto& e : reused) CHECK(e.at("client") == authenticated[0].at("client"));
  CHECK(env.entries("none").empty());  // never a request without credentials

  CHECK(gate.stderrText().find("NTLM authenticates a connection, which HTTP/2 cannot carry") !=
        std::string::npos);
  CHECK(adminGet(gate.adminPort(), "/clusters").body.find("auth=ntlm") != std::string::npos);
  const Scrape m = scrapeMetrics(gate.adminPort());
  CHECK(m.sum("h2gate_upstream_auth_total", {{"scheme", "ntlm"}, {"result", "success"}}) == 4);
  // /config_dump shows the scheme and the user, never the password.
  const AdminReply dump = adminGet(gate.adminPort(), "/config_dump");
  CHECK(dump.body.find("scheme: ntlm") != std::string::npos);
  CHECK(dump.body.find("password: \"[redacted]\"") != std::string::npos);
  CHECK(dump.body.find("ntlm-pw") == std::string::npos);
  env.checkNoSecretsLogged();
}

TEST_CASE("NTLM with a wrong password: the app gets the 407 once, no loop", "[auth][ntlm]") {
  REQUIRE_AUTH_TOOLS();
  AuthProxy::Options o;
  o.schemes = "ntlm";
  ProxyEnv env(o);
  H2gate& gate = env.startGate(
      "      scheme: ntlm\n"
      "      credentials: {username: 'CORP\\alice', password: not-the-password}\n");
  for (int i = 0; i < 2; ++i) {
    auto r = env.curl({"-o", "/dev/null", "-w", "%{http_connect}", env.nginx.httpsUrl("/1k")});
    INFO(r.err << gate.process().logTail(20));
    CHECK(r.out == "407");
    r = env.curl({"-o", "/dev/null", "-w", "%{http_code}", env.nginx.httpUrl("/1k")});
    CHECK(r.out == "407");
  }
  INFO(env.proxy->logText());
  // Each request: one handshake, rejected, and nothing more.
  CHECK(env.entries("ntlm-challenge").size() == 4);
  CHECK(env.entries("ntlm-rejected").size() == 4);
  CHECK(env.proxy->requests().size() == 8);
  const std::string log = gate.stderrText();
  CHECK(countOccurrences(log, "rejected the ntlm credentials") == 4);
  size_t warned = 0;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);)
    warned += line.find(" warn ") != std::string::npos &&
              line.find("rejected the ntlm credentials") != std::string::npos;
  CHECK(warned == 1);
  const Scrape m = scrapeMetrics(gate.adminPort());
  CHECK(m.sum("h2gate_upstream_auth_total", {{"scheme", "ntlm"}, {"result", "rejected"}}) == 4);
  env.checkNoSecretsLogged();
}

TEST_CASE("auto picks Negotiate when offered, NTLM when only NTLM is, Basic last", "[auth][auto]") {
  REQUIRE_AUTH_TOOLS();
  struct Case {
    const char* offered;
    bool one_line;
    const char* picked;
  };
  const Case c = GENERATE(Case{"basic,ntlm,negotiate", true, "negotiate"},
                          Case{"ntlm,basic,negotiate", false, "negotiate"},
                          Case{"basic,ntlm", false, "ntlm"}, Case{"basic", false, "basic"});
  INFO("offered " << c.offered << (c.one_line ? " (one line)" : ""));
  AuthProxy::Options o;
  o.schemes = c.offered;
  o.one_line = c.one_line;
  o.basic = "CORP\\alice:ntlm-pw";
  ProxyEnv env(o, /*kerberos=*/true);
  // As in a domain, one password serves every scheme: with credentials,
  // Negotiate's ticket is got with it (not taken from alice's cache).
  env.realm->kdc.changePassword("alice", "ntlm-pw");
  H2gate& gate = env.startGate(
      "      scheme: auto\n"
      "      credentials: {username: 'CORP\\alice', password: ntlm-pw}\n");
  for (int i = 0; i < 2; ++i) {
    auto r = env.curl({"-o", "/dev/null", "-w", "%{http_code}", env.nginx.httpsUrl("/1k")});
    INFO(r.err << gate.process().logTail(20) << env.proxy->logText());
    CHECK(r.out == "200");
  }
  INFO(env.proxy->logText());
  const auto all = env.proxy->requests();
  // The first request learnt it (one 407); the second sent it up front.
  REQUIRE(all.size() >= 3);
  CHECK(all[0].at("scheme") == "none");
  CHECK(all.back().at("scheme") == c.picked);
  CHECK(env.entries("none").size() == 1);
  CHECK(adminGet(gate.adminPort(), "/clusters").body.find(std::string("auth=") + c.picked) !=
        std::string::npos);
  env.checkNoSecretsLogged();
}

TEST_CASE("Negotiate mutual authentication: a proxy whose answer does not verify is not trusted",
          "[auth][kerberos]") {
  REQUIRE_AUTH_TOOLS();
  AuthProxy::Options o;
  o.schemes = "negotiate";
  o.mutual = GENERATE("ok", "forged");
  ProxyEnv env(o, /*kerberos=*/true);
  H2gate& gate = env.startGate("      scheme: negotiate\n");
  auto r = env.curl({"-s", "-w", "%{http_code}%{http_connect}", env.nginx.httpsUrl("/1k")});
  INFO(r.err << gate.process().logTail(20) << env.proxy->logText());
  const auto entries = env.entries("negotiate");
  REQUIRE(entries.size() == 1);  // the proxy accepted the ticket either way
  CHECK(entries[0].at("user") == kAlice);
  const Scrape m = scrapeMetrics(gate.adminPort());
  if (std::string(o.mutual) == "ok") {
    CHECK(r.out.ends_with("200200"));
    CHECK(m.sum("h2gate_upstream_auth_total", {{"result", "success"}}) == 1);
  } else {
    // The tunnel is not handed to the app: 502 with the reason (which
    // curl does not show for a CONNECT; the access log has it).
    CHECK(r.out.ends_with("000502"));
    const auto log = gate.waitForAccessLog(1);
    REQUIRE(log.size() == 1);
    CHECK(log[0].get("status") == "502");
    CHECK(log[0].line.find("could not prove its identity") != std::string::npos);
    CHECK(m.sum("h2gate_upstream_auth_total", {{"result", "mutual_failed"}}) == 1);
    CHECK(gate.stderrText().find("Kerberos mutual-authentication token does not verify") !=
          std::string::npos);
  }
}

TEST_CASE("auto: an HTTP/2 proxy that wants NTLM is reached over HTTP/1.1 from then on",
          "[auth][ntlm][h2]") {
  REQUIRE_AUTH_TOOLS();
  ProxyEnv* envp = nullptr;
  // TLS with ALPN h2 and http/1.1: over h2 the proxy answers every stream
  // with 407 NTLM (it cannot do NTLM there); over HTTP/1.1 it does.
  TempDir certs("auth-tls");
  TestCA proxy_ca(certs.path().string());
  const CertFiles cert = proxy_ca.issueServer("authproxy");
  AuthProxy::Options o;
  o.schemes = "ntlm";
  o.tls_cert = cert.cert;
  o.tls_key = cert.key;
  o.alpn = "h2,http/1.1";
  ProxyEnv env(o);
  envp = &env;
  H2gate& gate = env.startGate(
      "      scheme: auto\n"
      "      credentials: {username: 'CORP\\alice', password: ntlm-pw}\n",
      proxy_ca.caCertPath());
  REQUIRE(gate.process().waitForLog("negotiated h2", milliseconds(10000)));
  for (int i = 0; i < 2; ++i) {
    auto r = envp->curl({"-o", "/dev/null", "-w", "%{http_code}", env.nginx.httpsUrl("/1k")});
    INFO(r.err << gate.process().logTail(30) << env.proxy->logText());
    CHECK(r.out == "200");
  }
  INFO(env.proxy->logText());
  const auto all = env.proxy->requests();
  REQUIRE(!all.empty());
  // Once over h2 (407), then HTTP/1.1 with the three messages, per tunnel.
  CHECK(all[0].at("scheme") == "h2");
  CHECK(env.entries("h2").size() == 1);
  CHECK(env.entries("ntlm").size() == 2);
  CHECK(gate.stderrText().find("reaches this proxy over HTTP/1.1 connections from now on") !=
        std::string::npos);
  CHECK(adminGet(gate.adminPort(), "/clusters").body.find("auth=ntlm") != std::string::npos);
}

TEST_CASE("NTLM, Negotiate and Basic over HTTP/1.1 with 407s of every framing", "[auth][shapes]") {
  // The proxy frames each 407 with a body, with Content-Length: 0, chunked,
  // or closes after it (after the first, bare one only, or after every one).
  // h2gate learns the scheme from a bare request's 407 (auto), then answers.
  // An NTLM proxy that closes after its challenge cannot be answered (the
  // challenge belongs to the closed connection): the handshake is tried on
  // one new connection, then the app gets the 407.
  REQUIRE_AUTH_TOOLS();
  const std::string scheme = GENERATE("ntlm", "negotiate", "basic");
  const std::string framing = GENERATE("body", "empty", "chunked", "close-first", "close");
  INFO(scheme << ", 407s framed '" << framing << "'");
  const bool fails = scheme == "ntlm" && framing == "close";
  AuthProxy::Options o;
  o.schemes = scheme;
  o.basic = "CORP\\alice:ntlm-pw";
  o.challenge_framing = framing;
  ProxyEnv env(o, /*kerberos=*/scheme == "negotiate");

  // curl's own client against the same proxy first.
  // As "localhost": the proxy's Kerberos service is HTTP/localhost.
  std::vector<std::string> fixture{
      curlBinary(),   "-q",        "-sS",
      "-o",           "/dev/null", "-w",
      "%{http_code}", "--proxy",   "http://localhost:" + str(env.proxy->port())};
  if (scheme == "ntlm")
    fixture.insert(fixture.end(), {"--proxy-ntlm", "-U", "CORP\\alice:ntlm-pw"});
  else if (scheme == "negotiate")
    fixture.insert(fixture.end(), {"--proxy-negotiate", "-U", ":"});
  else
    fixture.insert(fixture.end(), {"--proxy-basic", "-U", "CORP\\alice:ntlm-pw"});
  fixture.push_back(env.nginx.httpUrl("/1k"));
  std::map<std::string, std::optional<std::string>> curl_env;
  if (env.realm) curl_env = env.realm->kdc.env(env.realm->alice);
  const CommandResult proof = runCommand(fixture, curl_env, milliseconds(30000));
  INFO("curl: " << proof.out << " " << proof.err << env.proxy->logText());
  CHECK(proof.out == (fails ? "407" : "200"));
  const size_t proof_entries = env.proxy->requests().size();

  // With credentials, Negotiate's ticket is got with their password: as in
  // a domain, one password serves every scheme.
  if (env.realm) env.realm->kdc.changePassword("alice", "ntlm-pw");
  H2gate& gate = env.startGate(
      "      scheme: auto\n"
      "      credentials: {username: 'CORP\\alice', password: ntlm-pw}\n");
  const std::string want = fails ? "407" : "200";
  // A GET learns the scheme; then a POST with a body, three GETs on one app
  // connection and a CONNECT.
  auto r = env.curl({"-o", "/dev/null", "-w", "%{http_code}", env.nginx.httpUrl("/1k?learn")});
  INFO(r.err << gate.process().logTail(30) << env.proxy->logText());
  CHECK(r.out == want);
  const TestFile& f = testFile("1k");
  r = env.curl(
      {"-w", " %{http_code}", "--data-binary", "@" + f.path, env.nginx.httpUrl("/upload")});
  if (fails)
    CHECK(r.out.ends_with(" 407"));
  else
    CHECK(r.out == f.sha256 + " " + str(f.size) + "\n 200");
  std::vector<std::string> gets{"-w", "%{http_code} "};
  for (int i = 0; i < 3; ++i)
    gets.insert(gets.end(), {"-o", "/dev/null", env.nginx.httpUrl("/1k?" + str(i))});
  r = env.curl(gets);
  CHECK(r.out == want + " " + want + " " + want + " ");
  r = env.curl({"-o", env.out.file("t"), "-w", "%{http_connect}", env.nginx.httpsUrl("/1k")});
  CHECK(r.out == want);
  if (!fails) CHECK(sha256File(env.out.file("t")) == f.sha256);

  // Bounded: six requests, at most two connections each, each with at most
  // three legs (bare, negotiate, authenticate).
  const auto entries = env.proxy->requests();
  const size_t ours = entries.size() - proof_entries;
  CHECK(ours <= 6 * 3);
  std::set<std::string> clients;
  for (size_t i = proof_entries; i < entries.size(); ++i) clients.insert(entries[i].at("client"));
  CHECK(clients.size() <= 6 * 2);
  if (fails)
    CHECK(gate.stderrText().find("closes the connection after the challenge") != std::string::npos);
  else
    CHECK(env.entries(scheme).size() >= 1);
  env.checkNoSecretsLogged();
}

TEST_CASE("a proxy naming a new 30 KB scheme in each 407: h2gate's log and memory stay bounded",
          "[auth][hostile]") {
  // auto: nothing h2gate can answer; basic: the credentials are rejected.
  // Either way each 407 is a failure whose cause names the scheme.
  const std::string scheme = GENERATE("auto", "basic");
  INFO("scheme " << scheme);
  HostileServer::Options po;
  po.mode = HostileServer::Mode::Auth407;
  po.scheme_bytes = 30 * 1024;
  HostileServer proxy(po);
  // The fixture, with curl: two 407s, each with a scheme of its own of 30 KB.
  CommandResult c = runCurl({"-sS", "-o", "/dev/null", "-D", "-", "-x", proxy.url(),
                             "http://origin.test/a", "http://origin.test/b"},
                            milliseconds(20000));
  INFO(c.err);
  REQUIRE(countOccurrences(c.out, "HTTP/1.1 407 ") == 2);
  const auto challenge = regexSearch(c.out, "Proxy-Authenticate: ([^\r\n]*)");
  REQUIRE(challenge);
  REQUIRE((*challenge)[1].size() == 30 * 1024);
  REQUIRE(c.out.rfind("Proxy-Authenticate: ") != c.out.find("Proxy-Authenticate: "));
  REQUIRE(!has(c.out.substr(c.out.rfind("Proxy-Authenticate: ")), (*challenge)[1]));

  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  o.yaml = authConfigYaml("127.0.0.1", proxy.port(), "",
                          scheme == "auto"
                              ? "      scheme: auto\n"
                              : "      scheme: basic\n"
                                "      credentials: {username: alice, password: alice-pw}\n");
  o.args = {"--log-level", "info"};
  H2gate gate(o);
  const pid_t pid = gate.process().pid();
  TempDir out("hostile-407");
  // `n` requests, one curl: each gets the proxy's 407.
  auto requests = [&](int n, const std::string& tag) {
    std::vector<std::string> args{"-sS", "-x",        gate.proxyUrl(), "-w", "%{http_code}\n",
                                  "-o",  "/dev/null", "--max-time",    "120"};
    for (int i = 0; i < n; ++i) args.push_back("http://origin.test/" + tag + str(i));
    CommandResult r = runCurl(args, milliseconds(150000));
    INFO(r.err);
    CHECK(countOccurrences(r.out, "407\n") == static_cast<size_t>(n));
  };
  // Warm-up: the first causes are logged and remembered, buffers grown.
  requests(50, "warm");
  const long hwm_before = procStatusKiB(pid, "VmHWM");
  const size_t log_before = gate.stderrText().size();
  constexpr int kRequests = 400;
  requests(kRequests, "flood");
  const long hwm_after = procStatusKiB(pid, "VmHWM");
  const std::string log = gate.stderrText();
  std::cout << "[figures] 407 with a new 30 KB scheme (" << scheme << "), " << kRequests
            << " requests after 50: h2gate log " << log_before << " -> " << log.size()
            << " bytes, VmHWM " << hwm_before << " -> " << hwm_after << " KiB\n";
  CHECK(proxy.requests() >= static_cast<size_t>(kRequests + 50 + 2));
  // Unbounded, each request added a 30 KB warning to the log and a 30 KB
  // cause to memory: 12 MB of each for these 400.
  CHECK(log.size() < 256 * 1024);
  CHECK(log.size() - log_before < 16 * 1024);
  CHECK(has(log, "further new ones are logged at debug level only"));
  CHECK(hwm_before > 0);
  if (gate.sanitized()) {
    WARN("memory bound not checked under AddressSanitizer");
  } else {
    CHECK(hwm_after - hwm_before < 4 * 1024);
  }
}
