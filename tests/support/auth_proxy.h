// The authenticating HTTP/1.1 test proxy (tests/support/auth_proxy.py, run
// with the test venv's Python: pyspnego and python-gssapi verify NTLMv2 and
// Kerberos): offers the schemes it is given in its 407s, authenticates NTLM
// per connection and Negotiate/Basic per request, tunnels CONNECTs and
// forwards absolute-form requests. Its log has one JSON line per request.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/peer_logs.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace h2gate::test {

// The venv Python with pyspnego and gssapi (deploy/install-deps.sh --test).
inline constexpr const char* kTestVenvPython = "/opt/h2gate-test/venv/bin/python";

class AuthProxy {
 public:
  struct Options {
    std::string schemes = "ntlm";  // offered in this order: negotiate, ntlm, basic
    bool one_line = false;         // all challenges on one Proxy-Authenticate line
    // NTLM users, "DOMAIN:user:password" lines (NTLM_USER_FILE).
    std::vector<std::string> ntlm_users;
    std::string basic;  // "user:password"
    // Negotiate: the service keytab and the realm's krb5.conf.
    std::string keytab;
    std::string krb5_conf;
    std::string mutual = "ok";  // ok | forged | none
    // Who verifies NTLM: "pyspnego", or "gss-ntlmssp" (through python-gssapi).
    std::string ntlm_acceptor = "pyspnego";
    // TLS with this certificate (and ALPN list, e.g. "h2,http/1.1").
    std::string tls_cert, tls_key, alpn;
    // How each 407 is framed: body | empty | chunked | close-first | close
    // (auth_proxy.py --challenge-framing).
    std::string challenge_framing = "body";
    // Names the proxy resolves to 127.0.0.1 (e.g. origin.test), as squid's
    // Options::hosts (tests/support/upstream_proxies.h).
    std::vector<std::string> hosts;
  };
  explicit AuthProxy(Options options);
  ~AuthProxy();
  AuthProxy(const AuthProxy&) = delete;
  AuthProxy& operator=(const AuthProxy&) = delete;

  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Logged requests, parsed (field -> value, as strings).
  std::vector<std::map<std::string, std::string>> requests() const;
  std::string logText() const;

 private:
  Options options_;
  TempDir dir_;
  PeerLog requests_log_{"auth_proxy requests.log", dir_.file("requests.log")};
  PeerLog stderr_log_{"auth_proxy stderr", dir_.file("auth_proxy.stderr")};
  std::unique_ptr<Process> process_;
  uint16_t port_ = 0;
};

// "" when the test proxy can run here, else what is missing.
std::string authProxyMissing();

// h2gate's config for the proxy authentication tests: directModeYaml()'s
// listener routed to cluster "proxy" at `host`:`port`, which has
// `cluster_extra` (lines indented 4) first, then `auth` under
// proxy_authentication (lines indented 6; none when empty), over TLS
// verified with `ca` unless `ca` is empty.
std::string authConfigYaml(const std::string& host, uint16_t port, const std::string& ca,
                           const std::string& auth, const std::string& cluster_extra = "");

}  // namespace h2gate::test
