// The command line of a Kerberos user behind a company's PAC file:
//
//   kinit
//   h2gate --pac http://.../proxy.pac --proxy-auth negotiate
//   h2gate check URL --pac http://.../proxy.pac --proxy-auth negotiate
//
// with real servers (tests/support/pac_auth_env.h): an MIT KDC, nginx
// serving the PAC file and the test files, squid asking for Negotiate
// (plain HTTP/1.1) and nghttpx (TLS, h2) in front of it. The PAC file sends
// one domain to squid, one to nghttpx, one to squid under a name the
// allow-list does not cover, everything else DIRECT. No config file: the
// flags give the listener its pac: route (gateway/server/cli.h).
// [pac_auth][pac_flags]
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "tests/support/pac_auth_env.h"

using namespace h2gate::test;
using namespace h2gate::test::pacauth;
using std::chrono::milliseconds;

namespace {

// Lines of `lines` that hold `needle`.
std::vector<std::string> linesOf(const std::vector<std::string>& lines, const std::string& needle) {
  std::vector<std::string> out;
  for (const std::string& l : lines)
    if (has(l, needle)) out.push_back(l);
  return out;
}

// `h2gate check URL flags...` with the Kerberos tickets of `ccache`.
CommandResult checkWithFlags(const KerberosPacEnv& env, const std::string& ccache,
                             const std::string& url, const std::vector<std::string>& flags) {
  std::vector<std::string> argv{H2gate::binaryPath(H2GATE_BINARY), "check", url};
  argv.insert(argv.end(), flags.begin(), flags.end());
  CommandResult r = runCommand(argv, env.realm.kdc.env(ccache), milliseconds(60000));
  UNSCOPED_INFO("h2gate check " << url << ": exit " << r.exit_code << "\n" << r.out << r.err);
  return r;
}

}  // namespace

TEST_CASE(
    "pac flags: kinit, then h2gate --pac URL --proxy-auth negotiate: squid, an h2 proxy with "
    "a ticket per tunnel, DIRECT, and a proxy the allow-list leaves out",
    "[pac_auth][pac_flags][kerberos][h2]") {
  REQUIRE_PAC_AUTH_TOOLS();
  KerberosPacEnv env;
  Nghttpx nghttpx(negotiateNghttpxOptions(env.ca, env.squid->httpPort()));
  testFile("1k");

  // The user's day starts with a ticket.
  const std::string ccache = env.realm.kdc.kinit("alice", "alice-pw");

  const std::string squid = "PROXY localhost:" + str(env.squid->httpPort());
  const std::string h2 = "HTTPS localhost:" + str(nghttpx.port());
  // The same nghttpx under its address: it logs the Proxy-Authorization
  // of each request, so that "none" is seen, not inferred.
  const std::string other = "HTTPS 127.0.0.1:" + str(nghttpx.port());
  env.writePac("corp.pac",
               "function FindProxyForURL(url, host) {\n"
               "  if (host == \"files.a.test\") return \"" +
                   squid +
                   "\";\n"
                   "  if (host == \"origin.test\") return \"" +
                   h2 +
                   "\";\n"
                   "  if (host == \"other.test\") return \"" +
                   other +
                   "\";\n"
                   "  return \"DIRECT\";\n"
                   "}\n");
  // Served as http://localhost:PORT/...: authenticate_to's default is the
  // PAC file's own host, localhost, so the proxies named localhost get the
  // ticket and the one named 127.0.0.1 does not.
  const std::string pac_url = "http://localhost:" + str(env.nginx.httpPort()) + "/pac/corp.pac";
  const std::string hosts = "127.0.0.1 localhost web.internal.test\n";
  // --cacert: the test CA signed nghttpx's certificate (a company's would
  // be in the system store).
  const std::vector<std::string> flags{"--pac",     pac_url,    "--proxy-auth",
                                       "negotiate", "--cacert", env.ca.caCertPath()};
  H2gate& gate = env.startWithFlags(ccache, flags, hosts);
  INFO(gate.process().logTail(60));

  // What the flags made, as YAML would have written it; no secret.
  const std::string dump = adminGet(gate.adminPort(), "/config_dump").body;
  INFO(dump);
  CHECK(has(dump, "url: " + pac_url + "\n"));
  CHECK(has(dump, "scheme: negotiate\n"));
  CHECK(has(dump, "trusted_ca: " + env.ca.caCertPath() + "\n"));
  CHECK_FALSE(has(dump, "authenticate_to"));  // the default
  CHECK(has(gate.stderrText(), "get credentials (negotiate): [localhost]"));
  CHECK(has(gate.stderrText(), "routes follow a PAC file"));
  CHECK_FALSE(has(gate.stderrText(), "direct mode"));

  // 20 tunnels at once through the h2 proxy (HTTP/1.1 to the origin: a
  // tunnel per transfer).
  std::vector<std::string> args{"-Z", "--parallel-max", "20", "--http1.1", "-w", "%{http_code}\\n"};
  for (int i = 0; i < 20; ++i)
    args.insert(args.end(), {"-o", env.out.file("h2-" + str(i)),
                             env.url("origin.test", true, "/1m?" + str(i))});
  const CommandResult r = env.curl("", args);
  CHECK(countOccurrences(r.out, "200\n") == 20);
  for (int i = 0; i < 20; ++i)
    CHECK(sha256File(env.out.file("h2-" + str(i))) == testFile("1m").sha256);
  // squid over plain HTTP/1.1: a tunnel and an absolute-form GET.
  CHECK(env.fetch("", env.url("files.a.test", true, "/1m?s1"), "s1"));
  CHECK(env.fetch("", env.url("files.a.test", false, "/1m?s2"), "s2"));
  // DIRECT.
  CHECK(env.fetch("", env.url("web.internal.test", true, "/1m?d1"), "d1"));
  // The proxy the allow-list leaves out: no credentials, its 407 reaches the app.
  CHECK(env.curl("", {"-o", "/dev/null", "-w", "%{http_connect}",
                      env.url("other.test", true, "/1k?o1")})
            .out == "407");
  CHECK(env.curl("",
                 {"-o", "/dev/null", "-w", "%{http_code}", env.url("other.test", false, "/1k?o2")})
            .out == "407");

  // nghttpx: one h2 connection from h2gate, 20 CONNECTs, 20 distinct
  // tokens; under its address, no Proxy-Authorization at all.
  const auto all = nghttpx.waitForAccessLines(22, "", milliseconds(10000));
  INFO("nghttpx: " << nghttpx.accessLog());
  const auto connects = linesOf(all, "CONNECT origin.test:");
  REQUIRE(connects.size() == 20);
  std::set<std::string> clients;
  for (const std::string& l : connects) clients.insert(l.substr(0, l.find(' ')));
  CHECK(clients.size() == 1);
  CHECK(linesOf(connects, " h2 ").size() == 20);
  const std::set<std::string> tokens = negotiateTokens(connects);
  CHECK(tokens.size() == 20);
  CHECK(tokens.count("") == 0);
  const auto unauthenticated = linesOf(all, "other.test:");
  CHECK(unauthenticated.size() == 2);
  CHECK(negotiateTokens(unauthenticated) == std::set<std::string>{""});
  CHECK(linesOf(unauthenticated, "proxy-authorization=-").size() == 2);
  // squid: each transfer under alice's principal, in the right place; the
  // left-out proxy's two requests came without credentials.
  const auto lines = env.squid->waitForAccessLines(24, "", milliseconds(10000));
  INFO("squid: " << env.squid->accessLog());
  const auto via_h2 = linesOf(lines, " origin.test:");
  CHECK(via_h2.size() == 20);
  CHECK(endingWith(via_h2, kAlice) == 20);
  const auto via_squid = linesOf(lines, "files.a.test:");
  CHECK(via_squid.size() == 2);
  CHECK(endingWith(via_squid, kAlice) == 2);
  const auto refused = linesOf(lines, "other.test:");
  CHECK(refused.size() == 2);
  CHECK(linesOf(refused, " 407 ").size() == 2);
  CHECK(endingWith(refused, kAlice) == 0);
  CHECK(linesWith(env.squid->accessLog(), "web.internal.test") == 0);
  CHECK(has(pacEval(gate, env.url("other.test", false, "/")),
            "credentials for " + other + ": none, not in authenticate_to [localhost]"));
  checkNotLogged(gate, kSecrets);

  // h2gate check with the same flags: the PAC answer, then the h2 proxy
  // with its ticket.
  CommandResult c = checkWithFlags(env, ccache, env.url("origin.test", true, "/1k"), flags);
  INFO("h2gate check: " << c.out << c.err);
  CHECK(c.exit_code == 0);
  CHECK(has(c.out, "answer: " + h2 + "\n"));
  CHECK(has(c.out, "credentials for " + h2 + ": negotiate\n"));
  CHECK(has(c.out, " goes to " + h2 + "\n"));
  CHECK(has(c.out, "configured: negotiate"));
  CHECK(has(c.out, "sending Negotiate ("));
  CHECK(has(c.out, "Negotiate accepted (200"));
  CHECK(has(c.out, "ok    connect"));
  CHECK(has(c.out, "\nOK: " + env.url("origin.test", true, "/1k") + " answered 200 through " + h2 +
                       " (127.0.0.1:" + str(nghttpx.port()) + ", h2)"));
  // The left-out proxy: said, and its 407 is the verdict.
  c = checkWithFlags(env, ccache, env.url("other.test", false, "/1k"), flags);
  INFO("h2gate check: " << c.out << c.err);
  CHECK(c.exit_code == 1);
  CHECK(has(c.out, other + " gets no credentials: not in authenticate_to [localhost]"));
  CHECK(has(c.out, "\nFAIL (proxy-auth): 407 from " + other +
                       ", which gets no credentials: not in authenticate_to [localhost]"));
  CHECK(has(c.out, "add its host with --proxy-auth-allow HOST"));
  CHECK_FALSE(has(c.out + c.err, "alice-pw"));

  // --proxy-auth-allow replaces the default: only 127.0.0.1 now, so the
  // proxy named localhost gets no ticket and the app its 407.
  std::vector<std::string> allow = flags;
  allow.insert(allow.end(), {"--proxy-auth-allow", "127.0.0.1"});
  H2gate& allowed = env.startWithFlags(ccache, allow, hosts);
  INFO(allowed.process().logTail(40));
  CHECK(env.curl("", {"-o", "/dev/null", "-w", "%{http_connect}",
                      env.url("files.a.test", true, "/1k?a1")})
            .out == "407");
  CHECK(has(adminGet(allowed.adminPort(), "/config_dump").body,
            "authenticate_to:\n                          - 127.0.0.1\n"));
  CHECK(has(allowed.stderrText(), "gets no credentials: not in authenticate_to [127.0.0.1]"));
}

TEST_CASE("pac flags: usage errors exit 2 with one line; check says when the PAC file is missing",
          "[pac_flags]") {
  PacEnv env;
  testFile("1k");
  const std::string binary = H2gate::binaryPath(H2GATE_BINARY);
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  for (const Case& c :
       {Case{{"--pac", "/nonexistent/proxy.pac"},
             "h2gate: --pac: cannot read '/nonexistent/proxy.pac': No such file or directory\n"},
        Case{{"--proxy-auth", "negotiate"},
             "h2gate: --proxy-auth needs the proxies it is for: --upstream URL, --pac, --wpad or "
             "--system-proxy (for clusters in a config file set proxy_authentication instead)\n"},
        Case{{"--wpad", "-c", "/etc/h2gate/h2gate.yaml"},
             "h2gate: --wpad and -c cannot be combined: in a config file, write the route as the "
             "forward_proxy's pac: (config/README.md)\n"},
        Case{{"check", "http://example.test/", "--system-proxy", "--upstream", "https://p.test"},
             "h2gate: --system-proxy and --upstream cannot be combined: the PAC file chooses the "
             "proxies\n"}}) {
    std::vector<std::string> argv{binary};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const CommandResult r =
        runCommand(argv, {{"H2GATE_UPSTREAM", std::nullopt}}, milliseconds(10000));
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err == c.error + "Run 'h2gate --help' for usage.\n");
  }

  // A PAC URL that answers 404: check says so, then goes the way the daemon
  // would (the route's fallback, DIRECT) and works.
  const std::string url = "http://127.0.0.1:" + str(env.nginx.httpPort()) + "/1k";
  const CommandResult r =
      runCommand({binary, "check", url, "--pac", env.pacUrl("missing.pac")}, milliseconds(60000));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(has(r.out, "WARN  pac"));
  CHECK(has(r.out, "no PAC file loaded"));
  CHECK(has(r.out, "error: no_script: no PAC file has loaded"));
  CHECK(has(r.out, "goes DIRECT"));
  CHECK(has(r.out, "\nOK: " + url + " answered 200 directly (DIRECT)"));
}
