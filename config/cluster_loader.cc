// clusters[]: an upstream proxy, its endpoints, TLS and HTTP/2 options, in
// Envoy's v3 shapes (plus proxy_credentials, which Envoy has no field for).
#include <algorithm>
#include <string>

#include "config/loader.h"
#include "config/loader_internal.h"

namespace h2gate::config::detail {
namespace {

constexpr uint64_t kMaxInt31 = 2147483647;  // HTTP/2's limit for windows and stream counts
constexpr uint64_t kMinWindow = 65535;      // RFC 9113 initial window; Envoy's minimum too

std::optional<Duration> positiveDuration(NodeReader& r, const char* key) {
  auto d = r.duration(key);
  if (d && d->count() <= 0) {
    r.errorAt(key, "must be greater than 0");
    return std::nullopt;
  }
  return d;
}

// A DataSource that must be a readable file ({filename: PATH}); Envoy's
// inline_string / environment_variable forms are not supported.
std::optional<std::string> readableFile(NodeReader& source) {
  if (source.isNull() || !source.expectMap()) return std::nullopt;
  source.allowOnly({"filename"});
  auto path = source.string("filename", true);
  if (!path) return std::nullopt;
  if (std::string why = checkReadableFile(*path); !why.empty()) {
    source.errorAt("filename", why);
    return std::nullopt;
  }
  return path;
}

// Envoy's TlsParameters.TlsProtocol. TLS below 1.2 is refused.
int tlsRank(const std::string& v) {
  if (v == "TLSv1_2") return 2;
  if (v == "TLSv1_3") return 3;
  return 0;
}

std::optional<std::string> tlsVersion(NodeReader& params, const char* key, bool is_max) {
  auto v = params.choice(key, {"TLS_AUTO", "TLSv1_0", "TLSv1_1", "TLSv1_2", "TLSv1_3"});
  if (!v) return std::nullopt;
  if (*v == "TLSv1_0" || *v == "TLSv1_1") {
    params.errorAt(key, "TLS versions below TLSv1_2 are not supported");
    return std::nullopt;
  }
  if (*v == "TLS_AUTO") return is_max ? std::string() : std::string("TLSv1_2");
  return v;
}

TlsContext parseTls(NodeReader& tc) {
  TlsContext tls;
  if (!tc.expectMap()) return tls;
  tc.allowOnly({"@type", "sni", "common_tls_context"});
  tc.expectType(kUpstreamTlsContextType);
  if (auto sni = tc.string("sni")) tls.sni = *sni;

  NodeReader ctx = tc.child("common_tls_context");
  if (!ctx.expectMap()) return tls;
  ctx.allowOnly({"alpn_protocols", "tls_params", "validation_context", "tls_certificates"});

  if (auto alpn = ctx.stringList("alpn_protocols")) {
    bool ok = !alpn->empty();
    if (!ok) ctx.errorAt("alpn_protocols", "must list at least one of h2, http/1.1");
    for (const std::string& p : *alpn) {
      if (p != "h2" && p != "http/1.1") {
        ctx.errorAt("alpn_protocols", "unsupported protocol '" + p + "' (expected h2, http/1.1)");
        ok = false;
      }
    }
    if (ok) tls.alpn_protocols = *alpn;
  }

  NodeReader params = ctx.child("tls_params");
  if (params.expectMap()) {
    params.allowOnly({"tls_minimum_protocol_version", "tls_maximum_protocol_version"});
    if (auto v = tlsVersion(params, "tls_minimum_protocol_version", false)) {
      tls.tls_minimum_protocol_version = *v;
    }
    if (auto v = tlsVersion(params, "tls_maximum_protocol_version", true)) {
      tls.tls_maximum_protocol_version = *v;
      if (!v->empty() && tlsRank(*v) < tlsRank(tls.tls_minimum_protocol_version)) {
        params.errorAt("tls_maximum_protocol_version",
                       "is below tls_minimum_protocol_version " + tls.tls_minimum_protocol_version);
      }
    }
  }

  NodeReader validation = ctx.child("validation_context");
  if (validation.expectMap()) {
    validation.allowOnly({"trusted_ca", "trust_chain_verification"});
    NodeReader ca = validation.child("trusted_ca");
    if (auto path = readableFile(ca)) tls.trusted_ca = *path;
    // Envoy's own switch for "do not verify the proxy's certificate".
    if (auto v = validation.choice("trust_chain_verification",
                                   {"VERIFY_TRUST_CHAIN", "ACCEPT_UNTRUSTED"})) {
      tls.insecure_skip_verify = *v == "ACCEPT_UNTRUSTED";
    }
  }

  std::vector<NodeReader> certs = ctx.list("tls_certificates");
  for (std::size_t i = 1; i < certs.size(); ++i) {
    certs[i].error("only one client certificate is supported");
  }
  if (!certs.empty() && certs[0].expectMap()) {
    certs[0].allowOnly({"certificate_chain", "private_key"});
    NodeReader chain = certs[0].child("certificate_chain", true);
    NodeReader key = certs[0].child("private_key", true);
    if (auto path = readableFile(chain)) tls.certificate_chain = *path;
    if (auto path = readableFile(key)) tls.private_key = *path;
  }
  return tls;
}

void parseHttp2(NodeReader& h2, Http2ProtocolOptions& out) {
  if (!h2.expectMap()) return;
  h2.allowOnly({"max_concurrent_streams", "initial_stream_window_size",
                "initial_connection_window_size", "connection_keepalive"});
  if (auto v = h2.uint("max_concurrent_streams", 1, kMaxInt31)) {
    out.max_concurrent_streams = static_cast<uint32_t>(*v);
  }
  if (auto v = h2.uint("initial_stream_window_size", kMinWindow, kMaxInt31)) {
    out.initial_stream_window_size = static_cast<uint32_t>(*v);
  }
  if (auto v = h2.uint("initial_connection_window_size", kMinWindow, kMaxInt31)) {
    out.initial_connection_window_size = static_cast<uint32_t>(*v);
  }
  if (h2.has("connection_keepalive")) {
    NodeReader ka = h2.child("connection_keepalive");
    Http2ProtocolOptions::Keepalive keepalive;
    bool off = false;
    if (ka.expectMap()) {
      ka.allowOnly({"interval", "timeout"});
      if (auto d = ka.duration("interval")) {
        if (d->count() < 0) ka.errorAt("interval", "must not be negative");
        off = d->count() == 0;  // 0s: no keepalive PINGs
        if (!off) keepalive.interval = *d;
      }
      if (auto d = positiveDuration(ka, "timeout")) keepalive.timeout = *d;
    }
    out.connection_keepalive = off ? std::nullopt : std::optional(keepalive);
  }
}

// {username, password | password_file: {filename} | keyring: NAME}:
// proxy_credentials and proxy_authentication.credentials.
std::optional<ProxyCredentials> parseCredentials(NodeReader& creds) {
  if (creds.isNull() || !creds.expectMap()) return std::nullopt;
  creds.allowOnly({"username", "password", "password_file", "keyring"});
  const bool from_file = creds.has("password_file");
  const bool from_keyring = creds.has("keyring");
  // From the keyring the user name may come with the password.
  auto user = creds.string("username", !from_keyring);
  if (user && user->empty()) creds.errorAt("username", "must not be empty");
  std::optional<std::string> pass;
  std::string file, entry;
  if (from_file + from_keyring + creds.has("password") > 1) {
    creds.errorAt(from_keyring ? "keyring" : "password_file",
                  "give one of password, password_file and keyring");
  } else if (from_file) {
    NodeReader source = creds.child("password_file");
    if (auto path = readableFile(source)) {
      std::string why;
      pass = readSecretFile(*path, &why);
      if (!pass) source.errorAt("filename", why);
      file = *path;
    }
  } else if (from_keyring) {
    if (auto name = creds.string("keyring", true)) {
      std::string why;
      std::optional<std::string> keyring_user;
      pass = keyringPassword(*name, user ? *user : std::string(), &keyring_user, &why);
      if (!pass) {
        creds.errorAt("keyring", why);
      } else if (!user) {
        user = keyring_user;
      }
      entry = *name;
    }
  } else {
    pass = creds.string("password", true);  // missing: "missing required field"
  }
  if (!user || !pass) {
    if (pass) wipe(*pass);
    return std::nullopt;
  }
  ProxyCredentials out{*user, std::move(*pass), std::move(file), std::move(entry)};
  wipe(*pass);
  return out;
}

}  // namespace
}  // namespace h2gate::config::detail

namespace h2gate::config {

std::optional<ProxyAuthentication> parseProxyAuthentication(NodeReader& r, Cluster& c) {
  using detail::parseCredentials;
  using detail::readableFile;
  if (r.isNull() || !r.expectMap()) return std::nullopt;
  r.allowOnly({"scheme", "spn", "client_keytab", "principal", "credentials"});
  ProxyAuthentication a;
  using Scheme = ProxyAuthentication::Scheme;
  if (auto v = r.choice("scheme", {"auto", "negotiate", "ntlm", "basic"})) {
    a.scheme = *v == "negotiate" ? Scheme::Negotiate
               : *v == "ntlm"    ? Scheme::Ntlm
               : *v == "basic"   ? Scheme::Basic
                                 : Scheme::Auto;
  }
  const bool kerberos = a.scheme == Scheme::Auto || a.scheme == Scheme::Negotiate;
  const std::string not_kerberos = "is for Negotiate (Kerberos): scheme " +
                                   std::string(schemeName(a.scheme)) + " has no use for it";
  if (auto spn = r.string("spn")) {
    // GSSAPI's host-based service name: service@host.
    const size_t at = spn->find('@');
    if (!kerberos)
      r.errorAt("spn", not_kerberos);
    else if (spn->find('/') != std::string::npos)
      r.errorAt("spn",
                "expected GSSAPI's SERVICE@HOST form, e.g. HTTP@proxy.example.com (not a "
                "Kerberos principal name like HTTP/proxy.example.com@REALM)");
    else if (at == std::string::npos || at == 0 || at + 1 == spn->size() ||
             spn->find_first_of(" \t") != std::string::npos)
      r.errorAt("spn", "expected SERVICE@HOST, e.g. HTTP@proxy.example.com");
    else
      a.spn = *spn;
  }
  if (r.has("client_keytab")) {
    NodeReader kt = r.child("client_keytab");
    if (!kerberos)
      r.errorAt("client_keytab", not_kerberos);
    else if (auto path = readableFile(kt))
      a.client_keytab = *path;
  }
  if (auto p = r.string("principal")) {
    if (!kerberos)
      r.errorAt("principal", not_kerberos);
    else if (p->empty())
      r.errorAt("principal", "must not be empty");
    else
      a.principal = *p;
  }
  if (r.has("credentials")) {
    if (c.credentials) {
      r.errorAt("credentials",
                "the cluster has proxy_credentials already: give the credentials once");
    } else {
      NodeReader creds = r.child("credentials");
      c.credentials = parseCredentials(creds);
    }
  }
  // Negotiate gets its tickets from the keytab or, without one, with the
  // password of the credentials (no kinit): both would leave one unused.
  // (auto may use both: the keytab for Negotiate, the credentials for NTLM
  // and Basic.)
  if (a.scheme == Scheme::Negotiate && !a.client_keytab.empty() && c.credentials)
    r.errorAt("client_keytab",
              "scheme negotiate takes its Kerberos tickets either from client_keytab or with "
              "the password of credentials, not both: remove one");
  if (a.scheme == Scheme::Basic && !c.credentials && !r.has("credentials"))
    r.error("scheme basic needs credentials (a username and a password)");
  // A ':' in the user name cannot be sent in Basic auth (RFC 7617).
  if (c.credentials && c.credentials->username.find(':') != std::string::npos &&
      (a.scheme == Scheme::Basic || a.scheme == Scheme::Auto))
    r.error("the user name contains ':', which Basic cannot carry (scheme " +
            std::string(schemeName(a.scheme)) + ")");
  return a;
}

}  // namespace h2gate::config

namespace h2gate::config::detail {
namespace {

void parseProtocolOptions(NodeReader& options, Cluster& c) {
  if (!options.expectMap()) return;
  options.allowOnly({kHttpProtocolOptionsKey});
  NodeReader http = options.child(kHttpProtocolOptionsKey);
  if (!http.expectMap()) return;
  // Only auto_config: ALPN picks h2 or HTTP/1.1 per connection. Envoy v3
  // keeps the upstream idle_timeout here too (Cluster's own
  // common_http_protocol_options is deprecated there).
  http.allowOnly({"@type", "common_http_protocol_options", "auto_config"});
  http.expectType(kHttpProtocolOptionsType);
  NodeReader common = http.child("common_http_protocol_options");
  if (common.expectMap()) {
    common.allowOnly({"idle_timeout"});
    // 0s: never (as in Envoy); a negative duration is refused by duration().
    if (auto d = common.duration("idle_timeout")) c.idle_timeout = *d;
  }
  NodeReader automatic = http.child("auto_config");
  if (!automatic.expectMap()) return;
  automatic.allowOnly({"http2_protocol_options"});
  NodeReader h2 = automatic.child("http2_protocol_options");
  parseHttp2(h2, c.http2);
}

}  // namespace

Cluster parseCluster(NodeReader& r) {
  Cluster c;
  c.mark = r.mark();
  if (!r.expectMap()) return c;
  r.allowOnly({"name", "connect_timeout", "load_assignment", "transport_socket",
               "typed_extension_protocol_options", "proxy_credentials", "proxy_authentication",
               "circuit_breakers", "send_buffer", "tcp_notsent_lowat"});
  if (auto name = r.string("name", true)) {
    if (name->empty()) r.errorAt("name", "must not be empty");
    c.name = *name;
  }
  if (auto d = positiveDuration(r, "connect_timeout")) c.connect_timeout = *d;

  // No endpoints at all is reported by validate(), for flag-made clusters
  // too; an invalid endpoint keeps a placeholder so that is not reported twice.
  NodeReader la = r.child("load_assignment");
  if (!la.isNull() && la.expectMap()) {
    la.allowOnly({"cluster_name", "endpoints"});
    if (auto cn = la.string("cluster_name"); cn && !c.name.empty() && *cn != c.name) {
      la.errorAt("cluster_name", "must match the cluster name '" + c.name + "'");
    }
    for (NodeReader& locality : la.list("endpoints")) {
      if (!locality.expectMap()) continue;
      locality.allowOnly({"lb_endpoints"});
      for (NodeReader& lb : locality.list("lb_endpoints")) {
        SocketAddress parsed;  // stays empty when the entry is invalid
        if (lb.expectMap()) {
          lb.allowOnly({"endpoint"});
          NodeReader endpoint = lb.child("endpoint", true);
          if (!endpoint.isNull() && endpoint.expectMap()) {
            endpoint.allowOnly({"address"});
            NodeReader address = endpoint.child("address", true);
            if (auto a = parseAddress(address, AddressKind::Endpoint)) parsed = *a;
          }
        }
        c.endpoints.push_back(std::move(parsed));
      }
    }
  }

  if (r.has("transport_socket")) {
    NodeReader ts = r.child("transport_socket");
    if (ts.expectMap()) {
      ts.allowOnly({"name", "typed_config"});
      ts.choice("name", {kTlsTransportSocket}, true);
      NodeReader tc = ts.child("typed_config");
      c.tls = parseTls(tc);
    }
  }

  NodeReader options = r.child("typed_extension_protocol_options");
  parseProtocolOptions(options, c);

  NodeReader creds = r.child("proxy_credentials");
  c.credentials = parseCredentials(creds);
  // A ':' in the user name cannot be sent in Basic auth (RFC 7617).
  if (c.credentials && c.credentials->username.find(':') != std::string::npos) {
    creds.errorAt("username", "must not contain ':'");
  }
  NodeReader auth = r.child("proxy_authentication");
  c.authentication = parseProxyAuthentication(auth, c);
  // NTLM authenticates a connection, which HTTP/2 cannot carry (its streams
  // are independent requests): such a cluster offers only http/1.1.
  if (c.authentication && c.authentication->scheme == ProxyAuthentication::Scheme::Ntlm && c.tls) {
    auto& alpn = c.tls->alpn_protocols;
    if (std::find(alpn.begin(), alpn.end(), "http/1.1") == alpn.end())
      auth.errorAt("scheme",
                   "NTLM needs HTTP/1.1 connections, but alpn_protocols does not offer http/1.1");
    else
      alpn = {"http/1.1"};
  }

  parseSocketTuning(r, c.send_buffer, c.tcp_notsent_lowat);

  NodeReader breakers = r.child("circuit_breakers");
  if (breakers.expectMap()) {
    breakers.allowOnly({"thresholds"});
    std::vector<NodeReader> thresholds = breakers.list("thresholds");
    for (std::size_t i = 1; i < thresholds.size(); ++i) {
      thresholds[i].error("only one threshold (the default priority) is supported");
    }
    if (!thresholds.empty() && thresholds[0].expectMap()) {
      thresholds[0].allowOnly({"max_connections", "max_requests"});
      if (auto n = thresholds[0].uint("max_connections", 1, 10000)) {
        c.max_connections = static_cast<uint32_t>(*n);
      }
      if (auto n = thresholds[0].uint("max_requests", 1, 1000000)) {
        c.max_requests = static_cast<uint32_t>(*n);
      }
    }
  }
  return c;
}

}  // namespace h2gate::config::detail
