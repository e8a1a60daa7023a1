// What the tests of authentication to the proxies a PAC file names share
// (tests/integration/pac_auth_test.cc, with a config file;
// tests/integration/pac_flags_test.cc, with --pac and --proxy-auth): PacEnv
// (tests/support/pac_env.h) with a Kerberos realm and squid asking for
// Negotiate, and helpers to read logs and the admin endpoint. Header-only,
// like pac_env.h (H2GATE_BINARY).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/auth_proxy.h"
#include "tests/support/kerberos_proxy.h"
#include "tests/support/pac_env.h"
#include "tests/support/scrape.h"

namespace h2gate::test::pacauth {

using std::chrono::milliseconds;

inline const char* const kAlice = "alice@H2GATE.TEST";

#define REQUIRE_PAC_AUTH_TOOLS()                                             \
  do {                                                                       \
    if (!haveMountNamespaces()) FAIL("needs root for a private /etc/hosts"); \
    const std::string missing = kerberosToolsMissing() + authProxyMissing(); \
    if (!missing.empty()) FAIL("not installed:" << missing);                 \
  } while (0)

// No NTLM message (base64 "NTLMSSP"), password or Basic credentials
// (checkNotLogged looks for Kerberos tokens itself).
inline const std::vector<std::string> kSecrets{"Negotiate Y", "TlRMTVNTUA", "alice-pw",
                                               "ntlm-pw",     "basic-pw",   "YWxpY2U6"};

// /pac/eval for `url` from the admin endpoint on `admin_port`, its answer's
// body.
inline std::string pacEval(uint16_t admin_port, const std::string& url) {
  std::string q;
  for (char c : url) {
    if (c == ':')
      q += "%3A";
    else if (c == '/')
      q += "%2F";
    else
      q += c;
  }
  const AdminReply r = adminGet(admin_port, "/pac/eval?url=" + q);
  UNSCOPED_INFO("/pac/eval " << url << ": " << r.status << "\n" << r.body);
  return r.body;
}
inline std::string pacEval(const H2gate& gate, const std::string& url) {
  return pacEval(gate.adminPort(), url);
}

// The /clusters line of the proxy pool `route` ("PROXY host:port") from the
// admin endpoint on `admin_port`, or "".
inline std::string clustersLine(uint16_t admin_port, const std::string& route) {
  const std::string body = adminGet(admin_port, "/clusters").body;
  UNSCOPED_INFO("/clusters:\n" << body);
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(route + " ")) return line;
  return "";
}
inline std::string clustersLine(const H2gate& gate, const std::string& route) {
  return clustersLine(gate.adminPort(), route);
}

// Lines of `text` that hold `needle`.
inline size_t linesWith(const std::string& text, const std::string& needle) {
  size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += has(line, needle) ? 1 : 0;
  return n;
}

inline size_t endingWith(const std::vector<std::string>& lines, const std::string& tail) {
  return static_cast<size_t>(std::count_if(
      lines.begin(), lines.end(), [&](const std::string& l) { return l.ends_with(" " + tail); }));
}

// A PAC file that sends files.a.test (or, with `host`, that host) to
// `proxy` and everything else DIRECT.
inline std::string pacFor(const std::string& proxy, const std::string& host = "files.a.test") {
  return "function FindProxyForURL(url, host) {\n"
         "  if (host == \"" +
         host + "\") return \"" + proxy +
         "\";\n"
         "  return \"DIRECT\";\n"
         "}\n";
}

// The PAC route's block: `url`, then `proxies` (lines indented 16).
inline std::string pacBlock(const std::string& url, const std::string& proxies) {
  return "              url: " + url +
         "\n"
         "              fallback: {reject: 503}\n"
         "              proxies:\n" +
         proxies;
}

// PacEnv with a realm (alice's ticket) and squid asking for Negotiate,
// resolving the test's names (origin.test, files.a.test) to nginx.
struct KerberosPacEnv : PacEnv {
  KerberosPacEnv() {
    Squid::Options s = negotiateSquidOptions(realm);
    s.hosts = PacEnv::squidOptions().hosts;
    // Its access log keeps the query: each absolute-form request is found
    // by its own.
    s.extra_config = "strip_query_terms off\n";
    squid = std::make_unique<Squid>(s);
  }
  H2gate& startWith(const std::string& pac_block) {
    H2gate& g = start(PacEnv::listener("local_proxy", pac_block), {"local_proxy"},
                      [&](H2gate::Options& o) { o.env = realm.kdc.env(realm.alice); });
    REQUIRE(g.process().waitForLog("using the PAC file from", kPacLoadTimeout));
    return g;
  }
  // h2gate started with flags only (no -c), as a user types it: `flags`,
  // then --listen 127.0.0.1:0 --admin 127.0.0.1:0 --log-level debug; the
  // Kerberos tickets of `ccache`; `hosts` its /etc/hosts; `env` on top (a
  // desktop session's, say); under ASan, what gss-ntlmssp needs
  // (ntlmSanitizerEnv).
  H2gate& startWithFlags(const std::string& ccache, const std::vector<std::string>& flags,
                         const std::string& hosts,
                         const std::map<std::string, std::optional<std::string>>& env = {}) {
    gate.reset();  // one at a time
    H2gate::Options o;
    o.binary = H2GATE_BINARY;
    o.args = flags;
    o.args.insert(o.args.end(),
                  {"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-level", "debug"});
    o.hosts = hosts;
    o.env = realm.kdc.env(ccache);
    for (const auto& [k, v] : env) o.env[k] = v;
    ntlmSanitizerEnv(o);
    gate = std::make_unique<H2gate>(std::move(o));
    REQUIRE(gate->process().waitForLog("using the PAC file from", kPacLoadTimeout));
    return *gate;
  }
  KerberosRealm realm;
  std::unique_ptr<Squid> squid;
};

}  // namespace h2gate::test::pacauth
