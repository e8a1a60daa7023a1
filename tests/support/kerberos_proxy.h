// Proxies that ask for Negotiate (Kerberos), for the authentication tests
// (tests/integration/upstream_auth_test.cc, check_test.cc, sspi_wine_test.cc):
// a throwaway realm (tests/support/kerberos.h) with one user and the key of
// the proxy's service principal, squid's negotiate_kerberos_auth or the test
// proxy (tests/support/auth_proxy.h) with that key, and nginx behind it.
#pragma once

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tests/support/auth_proxy.h"
#include "tests/support/kerberos.h"
#include "tests/support/origin.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_ca.h"
#include "tests/support/upstream_proxies.h"
#include "tests/support/util.h"

namespace h2gate::test {

// A realm with alice (password "alice-pw") holding a ticket, and the key of
// HTTP/localhost (the service principal of a proxy reached as "localhost")
// in a keytab. The KDC stops with it.
struct KerberosRealm {
  KerberosRealm();

  Kdc kdc;
  std::string http_keytab;  // HTTP/localhost's key
  std::string alice;        // alice's credential cache, "FILE:<path>"

  // curl (curlBinary() -q -sS, then `args`) with the realm's environment for
  // `ccache` (Kdc::env), e.g. to prove a proxy with --proxy-negotiate -U :.
  CommandResult curl(const std::string& ccache, const std::vector<std::string>& args) const;

  // `o` for the test proxy, verifying Negotiate with HTTP/localhost's key
  // and this realm's krb5.conf.
  AuthProxy::Options negotiateProxyOptions(AuthProxy::Options o) const;
};

// squid asking for Negotiate: negotiate_kerberos_auth with HTTP/localhost's
// key from `realm`; with `ca`, an https_port too (its certificate from `ca`).
Squid::Options negotiateSquidOptions(const KerberosRealm& realm, TestCA* ca = nullptr);

// nghttpx (TLS, h2, its certificate from `ca`) in front of squid's
// `squid_port`, logging each request's Proxy-Authorization: how a test sees
// the Negotiate token of every h2 stream.
Nghttpx::Options negotiateNghttpxOptions(TestCA& ca, uint16_t squid_port);
// The distinct Negotiate tokens in such nghttpx access lines; a line
// without one adds "" (so a stream without a token shows).
std::set<std::string> negotiateTokens(const std::vector<std::string>& lines);

// nginx (HTTP and HTTPS, its certificate from `ca`) and a realm with alice's
// ticket; everything in `work`. A test puts its proxy in between.
struct KerberosOriginEnv {
  explicit KerberosOriginEnv(const std::string& work_name) : work(work_name) {}

  static Nginx::Options nginxOptions(TestCA& ca);

  TempDir work;
  TestCA ca{work.path().string()};
  KerberosRealm realm;
  Nginx nginx{nginxOptions(ca)};
};

// The same with squid (http_port and https_port) asking for Negotiate in
// between.
struct KerberosSquidEnv : KerberosOriginEnv {
  explicit KerberosSquidEnv(const std::string& work_name);

  std::unique_ptr<Squid> squid;
};

}  // namespace h2gate::test
