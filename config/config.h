// Schema structs for h2gate's configuration.
//
// Field names follow Envoy's v3 API where the concept is the same, so the YAML
// reads like an Envoy bootstrap. These structs are plain data: the loader
// (config/loader.h) fills them from YAML or from command-line flags, and the
// validator checks cross references. Nothing here does I/O.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace h2gate::filters {
class Filter;  // filters/filter.h
}

namespace h2gate::config {

using Duration = std::chrono::nanoseconds;

// Where a value came from, for error messages and for later validation passes
// (file:line:column, 1-based; line 0 means "not from a file", e.g. a flag).
struct Mark {
  std::string file;
  int line = 0;
  int column = 0;
};

struct SocketAddress {
  std::string address;  // IP literal or host name (clusters); IP literal (listeners)
  uint16_t port_value = 0;
};

// One entry of a listener's filter_chains[].filters[]. typed_config is kept as
// YAML: each filter parses its own config (filters/registry.h). Loading a
// config runs that parser once to validate it (filters::buildChains,
// filters/chain.h) and keeps what it built in `filter`, so the server does
// not parse the YAML again; the server then drops the
// YAML tree (yaml-cpp needs several hundred bytes per value: a 100,000-entry
// acl list would hold tens of megabytes) and keeps `redacted_yaml` for
// /config_dump (dropFilterYaml() in config/dump.h).
struct FilterConfig {
  std::string name;
  YAML::Node typed_config;  // may be null; null after dropFilterYaml()
  Mark mark;
  // Built from typed_config by filters::buildChains() (filters/chain.h);
  // null until then, or when typed_config is invalid. Not yet init()ed.
  // Config only carries it (and dropFilterYaml() asks whether it is set).
  std::shared_ptr<const filters::Filter> filter = nullptr;
  // typed_config as /config_dump shows it (secrets redacted), set when the
  // tree is dropped; empty while typed_config is there or was absent.
  std::string redacted_yaml = {};
};

// Send-buffer tuning of a cluster's or a listener's TCP sockets
// (gateway/net/send_buffer.h): `auto` leaves Linux's autotuning alone and
// follows Windows' ideal send backlog; `fixed` pins SO_SNDBUF to `bytes`.
struct SendBuffer {
  enum class Mode { Auto, Fixed, IdealBacklog };
  Mode mode = Mode::Auto;
  uint32_t bytes = 0;  // fixed only
};

// TCP_NOTSENT_LOWAT default for upstream proxy connections: h2 frames of a
// new stream wait behind at most this much unsent data of others.
inline constexpr uint32_t kDefaultUpstreamNotsentLowat = 128 * 1024;

// One entry of a listener's filter_chain_match.source_prefix_ranges
// (Envoy's CidrRange): the clients that may connect. Checked and turned into
// a range by net::SourceRanges (gateway/net/source_ranges.h), which refuses
// host bits set under the prefix and a prefix_len longer than the address.
struct SourcePrefixRange {
  std::string address_prefix;  // an IPv4 or IPv6 address, as written
  uint32_t prefix_len = 0;
  Mark mark;  // the entry (line 0: --allow)
};

struct Listener {
  std::string name;
  SocketAddress address;
  // Extra addresses bound by the same listener (the default listener binds
  // 127.0.0.1 and ::1). Envoy calls this additional_addresses.
  std::vector<SocketAddress> additional_addresses;
  std::vector<FilterConfig> filters;  // flattened filter_chains[0].filters
  // filter_chains[0].filter_chain_match.source_prefix_ranges (--allow): only
  // clients in these ranges may connect; the others are closed at accept.
  // Empty: anyone who can reach the address; allowed only for a listener
  // whose addresses are all loopback (checkConfig(), gateway/server/load_config.h).
  std::vector<SourcePrefixRange> source_prefix_ranges;
  // HTTP/1 request-head limits (Envoy: max_request_headers_kb / _count).
  uint32_t max_request_headers_kb = 64;
  uint32_t max_request_headers_count = 100;
  // DIRECT routes: one deadline for DNS and all connect attempts.
  Duration direct_connect_timeout{std::chrono::seconds(10)};
  // A tunnel with one direction finished is closed when the other stays
  // silent this long (see ListenerContext).
  Duration tunnel_half_close_timeout{std::chrono::seconds(1)};
  // App-side limits and timeouts (see ListenerContext for their contracts).
  // Envoy names where Envoy has the concept: request_headers_timeout and
  // idle_timeout (HTTP connection manager), tunnel_idle_timeout (tcp_proxy's
  // idle_timeout), max_connections (listener connection limit).
  Duration request_headers_timeout{std::chrono::seconds(10)};
  Duration idle_timeout{std::chrono::seconds(60)};
  Duration tunnel_idle_timeout{std::chrono::hours(1)};
  Duration connect_response_timeout{std::chrono::seconds(60)};
  // Envoy: the HTTP connection manager's stream_idle_timeout (same default).
  Duration stream_idle_timeout{std::chrono::minutes(5)};
  uint32_t max_connections = 4096;
  // App-facing sockets (downloads to apps). TCP_NOTSENT_LOWAT 0: unset.
  SendBuffer send_buffer;
  uint32_t tcp_notsent_lowat = 0;
  // Requests and tunnels to h2gate's own addresses (its listeners and its
  // admin endpoint: a loop, or an app or web page reaching the admin
  // endpoint through the proxy) get 403. false lifts it.
  bool deny_own_addresses = true;
  Mark mark;
};

struct Http2ProtocolOptions {
  uint32_t max_concurrent_streams = 100;
  uint32_t initial_stream_window_size = 1u << 20;       // 1 MiB
  uint32_t initial_connection_window_size = 16u << 20;  // 16 MiB
  // HTTP/2 PING every `interval` (±15% jitter); no answer within `timeout`
  // and the connection is declared dead. A connection idle for longer than
  // `interval` is confirmed with a PING before it gets a new stream. On by
  // default; `interval: 0s` in the config turns it off (nullopt).
  struct Keepalive {
    Duration interval{std::chrono::seconds(30)};
    Duration timeout{std::chrono::seconds(5)};
  };
  std::optional<Keepalive> connection_keepalive = Keepalive{};
};

struct TlsContext {
  std::string sni;  // empty: the endpoint's host name
  std::vector<std::string> alpn_protocols{"h2", "http/1.1"};
  std::string tls_minimum_protocol_version = "TLSv1_2";  // TLSv1_2 | TLSv1_3
  std::string tls_maximum_protocol_version;              // empty: no cap
  std::string trusted_ca;                                // file; empty: system bundle
  std::string certificate_chain;                         // client cert file (optional)
  std::string private_key;                               // client key file (optional)
  bool insecure_skip_verify = false;                     // only from --insecure or explicit YAML
};

// A user name and password for an upstream proxy: Basic, or NTLM's
// explicit identity. The password is a secret: never logged, redacted in
// /config_dump, and wiped (OPENSSL_cleanse) when the struct is destroyed.
struct ProxyCredentials {
  std::string username;
  std::string password;
  // Where the password was read from (password_file), for /config_dump and
  // reload; empty when it was given inline (possibly as ${ENV}).
  std::string password_file;
  // The keyring entry the password (and perhaps the user name) came from
  // (`keyring: NAME`, gateway/base/keyring.h), for /config_dump; empty when
  // not from the keyring. Looked up again at every load (start, reload).
  std::string keyring;

  ProxyCredentials() = default;
  ProxyCredentials(std::string user, std::string pass, std::string file = {},
                   std::string keyring_entry = {})
      : username(std::move(user)),
        password(std::move(pass)),
        password_file(std::move(file)),
        keyring(std::move(keyring_entry)) {}
  ProxyCredentials(const ProxyCredentials&) = default;
  ProxyCredentials(ProxyCredentials&&) noexcept = default;
  ProxyCredentials& operator=(const ProxyCredentials& other);
  ProxyCredentials& operator=(ProxyCredentials&& other) noexcept;
  ~ProxyCredentials();
};

// Overwrites the bytes of `s` (its whole capacity) with OPENSSL_cleanse.
void wipe(std::string& s);

// How h2gate authenticates to a cluster's proxies (the cluster's
// proxy_authentication; see gateway/upstream/auth/proxy_auth.h). The user
// name and password, when given, live in Cluster::credentials.
struct ProxyAuthentication {
  enum class Scheme {
    Auto,       // the strongest scheme the proxy offers: Negotiate > NTLM > Basic
    Negotiate,  // Kerberos through SPNEGO (GSSAPI / SSPI), a token per request
    Ntlm,       // NTLMv2 (gss-ntlmssp / SSPI), per HTTP/1.1 connection
    Basic,      // the credentials, on every request
  };
  Scheme scheme = Scheme::Auto;
  // Negotiate's service principal, GSSAPI style "HTTP@proxy.example.com";
  // empty: HTTP@<the endpoint's address>.
  std::string spn;
  // Negotiate for service accounts: a client keytab to get tickets from
  // (kept in memory, never in the user's cache); empty: the user's
  // credential cache (KRB5CCNAME, as after kinit).
  std::string client_keytab;
  // The Kerberos client principal to use (from the keytab or the cache
  // collection); empty: the keytab's first / the cache's default.
  std::string principal;
};

std::string_view schemeName(ProxyAuthentication::Scheme s);

struct Cluster {
  std::string name;
  Duration connect_timeout{std::chrono::seconds(5)};
  std::vector<SocketAddress> endpoints;  // flattened load_assignment.endpoints[].lb_endpoints[]
  std::optional<TlsContext> tls;         // transport_socket; absent: plain TCP to the proxy
  Http2ProtocolOptions http2;
  // proxy_credentials, or proxy_authentication.credentials. Alone (no
  // `authentication`): Basic on every request.
  std::optional<ProxyCredentials> credentials;
  std::optional<ProxyAuthentication> authentication;  // proxy_authentication
  uint32_t max_connections = 8;  // circuit_breakers.thresholds[0].max_connections
  // Requests and tunnels in progress on the cluster (waiting for a
  // connection or on one), across all workers; beyond it a new one gets 503
  // at once. circuit_breakers.thresholds[0].max_requests. Envoy's default is
  // 1024; h2gate's matches the listener's max_connections, so a cluster does
  // not refuse long-lived tunnels (websockets, streaming) the listener takes.
  uint32_t max_requests = 4096;
  // An idle HTTP/1.1 keep-alive connection to a proxy unused this long is
  // closed (0: never). HTTP/1.1 only: an idle h2 connection is kept open and
  // proven alive by its keepalive PING (http2.connection_keepalive).
  // HttpProtocolOptions.common_http_protocol_options.idle_timeout; 50 s is
  // below squid's 2 min and nginx's 75 s, so h2gate closes first.
  Duration idle_timeout{std::chrono::seconds(50)};
  SendBuffer send_buffer;
  uint32_t tcp_notsent_lowat = kDefaultUpstreamNotsentLowat;  // 0: unset
  Mark mark;
  // Whether a listener's upstream_headers (its request_headers_to_add and
  // proxy_credentials: credentials, identity tokens) may go to this
  // cluster. True for the clusters of the config, which the operator wrote;
  // false for a proxy that a PAC file names (upstream/router.h
  // ProxyTemplate), which whoever serves the PAC file chose. Not a config
  // field: upstream/proxy_request.h listenerHeaders() is the one place that
  // reads it.
  bool receives_listener_headers = true;
};

// How h2gate authenticates to the proxies of `c`, for log lines: "" when it
// does not; "basic" for credentials alone; else the scheme, with where
// Kerberos tickets come from when h2gate gets them itself, e.g. "negotiate
// (Kerberos keytab /etc/h.keytab)" or "auto (Kerberos tickets got with the
// password of 'alice', no kinit)".
std::string authenticationText(const Cluster& c);

struct Admin {
  SocketAddress address{"127.0.0.1", 9901};
  bool enabled = true;
  // Names (and name:port) a request's Host may carry besides the admin
  // listener's own address, a loopback address and "localhost": how a
  // monitoring system reaches it by name. Anything else is refused (DNS
  // rebinding guard; see gateway/server/admin.h). Lower case, no trailing dot.
  std::vector<std::string> allowed_hosts;
};

// A config file larger than this is refused before it is parsed (the flag
// --max-config-size changes it): parsing costs far more memory than the file.
inline constexpr uint64_t kDefaultMaxConfigBytes = 8u << 20;
// Sequences and mappings nested deeper than this are an error (an h2gate
// config needs about ten levels); yaml-cpp would recurse, or queue tokens
// for the whole file, before giving up.
inline constexpr int kMaxYamlDepth = 64;

struct Bootstrap {
  Admin admin;
  std::vector<Listener> listeners;
  std::vector<Cluster> clusters;
  // Worker threads, each with its own event loop (--concurrency).
  uint32_t concurrency = 1;
  Duration drain_timeout{std::chrono::seconds(30)};
  // After the machine's addresses or routes change, or it resumes from
  // suspend, every upstream h2 connection must answer a PING within this or
  // it is replaced (Firefox's network.http.network-changed.timeout). 0s:
  // no network monitor.
  Duration network_change_timeout{std::chrono::seconds(5)};
  std::string source;  // the file it came from, or "<flags>" / "<default>"

  const Cluster* findCluster(const std::string& name) const {
    for (const auto& c : clusters)
      if (c.name == name) return &c;
    return nullptr;
  }
};

}  // namespace h2gate::config
