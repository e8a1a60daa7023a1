#include "tests/support/kerberos_proxy.h"

namespace h2gate::test {

KerberosRealm::KerberosRealm() {
  kdc.addPrincipal("alice", "alice-pw");
  kdc.addRandomKey("HTTP/localhost");
  http_keytab = kdc.keytab("http.keytab", {"HTTP/localhost"});
  alice = kdc.kinit("alice", "alice-pw");
}

CommandResult KerberosRealm::curl(const std::string& ccache,
                                  const std::vector<std::string>& args) const {
  std::vector<std::string> argv{"env"};
  for (const auto& [k, v] : kdc.env(ccache))
    if (v) argv.push_back(k + "=" + *v);
  argv.insert(argv.end(), {curlBinary(), "-q", "-sS"});
  argv.insert(argv.end(), args.begin(), args.end());
  return runCommand(argv, std::chrono::milliseconds(30000));
}

AuthProxy::Options KerberosRealm::negotiateProxyOptions(AuthProxy::Options o) const {
  o.keytab = http_keytab;
  o.krb5_conf = kdc.krb5Conf();
  return o;
}

Squid::Options negotiateSquidOptions(const KerberosRealm& realm, TestCA* ca) {
  Squid::Options s;
  if (ca) {
    s.ca = ca;
    s.https = true;
  }
  s.negotiate_keytab = realm.http_keytab;
  s.negotiate_principal = "HTTP/localhost@" + realm.kdc.realm();
  s.krb5_conf = realm.kdc.krb5Conf();
  return s;
}

KerberosSquidEnv::KerberosSquidEnv(const std::string& work_name)
    : KerberosOriginEnv(work_name),
      squid(std::make_unique<Squid>(negotiateSquidOptions(realm, &ca))) {}

Nghttpx::Options negotiateNghttpxOptions(TestCA& ca, uint16_t squid_port) {
  Nghttpx::Options n;
  n.ca = &ca;
  n.backend_port = squid_port;
  n.log_headers = {"proxy-authorization"};
  return n;
}

std::set<std::string> negotiateTokens(const std::vector<std::string>& lines) {
  std::set<std::string> tokens;
  for (const std::string& l : lines) {
    const size_t at = l.find("proxy-authorization=Negotiate ");
    tokens.insert(at == std::string::npos ? std::string() : l.substr(at));
  }
  return tokens;
}

Nginx::Options KerberosOriginEnv::nginxOptions(TestCA& ca) {
  Nginx::Options n;
  n.ca = &ca;
  return n;
}

}  // namespace h2gate::test
