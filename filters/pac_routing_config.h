// The `pac` block of a forward_proxy route: the route follows a PAC file
// (filters/pac_routing.h does the routing).
//
//   routes:
//   - match: {}                  # as for every route (filters/match_config.h)
//     pac:
//       # exactly one of:
//       url: http://wpad.corp.example/proxy.pac   # http:// or https://
//       file: /etc/h2gate/proxy.pac
//       wpad: true               # WPAD by DNS (gateway/pac_engine/wpad.h)
//       system: true             # the platform's setting (gateway/pac_engine/system_proxy.h)
//       refresh_interval: 600s   # fetch again this often; 0s: never (default 10 minutes)
//       retry_interval: 30s      # after a failed fetch (default 30 s)
//       fetch_timeout: 10s       # a download, redirects included (default 10 s)
//       max_size: 8388608        # bytes, file or download (default 8 MiB)
//       trusted_ca: /etc/ssl/corp-ca.pem   # for an https:// url; default: system store
//       evaluation:
//         timeout: 2s            # per FindProxyForURL, its DNS calls included (default 2 s);
//                                #   a worker still busy 200 ms later is killed
//         dns_timeout: 1s        # per DNS call from the file (default 1 s); at most 32
//                                #   names per run (gateway/pac_engine/pac_context.h)
//         memory_limit: 33554432 # bytes per JavaScript heap (default 32 MiB); there is
//                                #   one heap per worker, plus one while a new file loads
//         threads: 2             # worker processes (gateway/pac_engine/worker.h), each an
//                                #   evaluation thread of h2gate's and a heap (default 2)
//         cache_entries: 10000   # answers kept (per https host and port, per http URL); 0: none
//         cache_bytes: 16777216  # bytes they may hold in all (default 16 MiB)
//         cache_ttl: 60s         # how long one is kept (default 60 s)
//       # When there is no PAC file yet or it cannot answer (exception,
//       # timeout, no usable entry): one of direct: true (the default, as
//       # browsers), cluster: NAME, reject: STATUS.
//       fallback: {cluster: corp_proxy}
//       # An answer naming h2gate's own listener: direct (the default) or
//       # reject (503).
//       on_loop: direct
//       # The proxies the PAC file names (PROXY h:p, HTTPS h:p) become pools
//       # made on demand, one per proxy per worker, with these settings:
//       proxies:
//         connect_timeout: 5s    # TCP + TLS (default 5 s)
//         trusted_ca: /etc/ssl/corp-ca.pem   # for HTTPS proxies; default: system store
//         max_connections: 8     # per proxy per worker (default 8)
//         max_proxies: 64        # proxy pools per worker (default 64)
//         idle_timeout: 300s     # a proxy pool with no request this long is closed
//         # Authentication to those proxies: the keys and behaviour of a
//         # cluster's proxy_authentication (config/README.md; parsed by
//         # config::parseProxyAuthentication): scheme auto|negotiate|ntlm|basic,
//         # spn (default HTTP@<the proxy's host>), client_keytab, principal,
//         # credentials {username, password | password_file}. Each proxy has
//         # its own state, as a cluster's endpoint: auto learns from its 407.
//         proxy_authentication:
//           scheme: negotiate
//         # Which of them may get it (the operator's choice, not the PAC
//         # file's): a host name (case-insensitive, a trailing dot ignored),
//         # .domain (the domain and every host under it), an IP address, or
//         # "*" (every proxy). []: none. A proxy not listed gets no
//         # credentials at all (its 407 reaches the app; logged once at warn
//         # per proxy). Default (absent): the PAC file's own domain, so that
//         # a file fetched over plain http (a WPAD URL is http://), which
//         # anyone on the network path can alter, can never send a password
//         # or a token to a host of its choosing outside the domain it came
//         # from (defaultAuthenticateTo below):
//         #   url:    the URL's host without its first label when it has
//         #           three labels or more (wpad.corp.example.com:
//         #           .corp.example.com), else the host itself; an IP
//         #           address: that address only
//         #   wpad:   the same rule on the WPAD URL that found the file in use
//         #   system: the same on the setting's PAC URL (or the WPAD URL its
//         #           automatic detection found); manual settings: the
//         #           proxies they name
//         #   file:   every proxy (the file is on the operator's own disk)
//         # The default is decided when a proxy's pool is made, from the
//         # file in use; when the file comes from elsewhere, pools made
//         # before are made again.
//         authenticate_to: [proxy.corp.example.com, .branch.corp.example]
//
// Errors name file, line, column and field like every config error.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/node_reader.h"
#include "filters/registry.h"
#include "gateway/pac_engine/evaluator.h"
#include "gateway/pac_engine/source.h"

namespace h2gate::filters {

// pac.proxies.authenticate_to: which proxies a PAC file names may get the
// credentials of pac.proxies.proxy_authentication. Entries: a host name
// (case-insensitive, a trailing dot ignored), ".domain" (that domain and
// every host under it), an IP address, or "*" (every proxy).
class AuthenticateTo {
 public:
  // Adds one entry as written in the config; "" or why it is not one.
  std::string add(std::string_view entry);
  static AuthenticateTo everyProxy();
  // The default's rule for the host a PAC file came from: an IP address is
  // that address; a name of three labels or more is its domain, the name
  // without its first label (wpad.corp.example.com: .corp.example.com);
  // a shorter one is that name alone. Empty for a host that is none of these.
  static AuthenticateTo domainOf(std::string_view host);
  // Whether a proxy at `host` (a name or an IP address in any notation,
  // IPv6 without brackets) may get the credentials.
  bool allows(std::string_view host) const;
  // "[localhost, .corp.example.com]", "[*]", "[]".
  std::string str() const;
  bool operator==(const AuthenticateTo&) const = default;

 private:
  bool every_ = false;
  std::vector<std::string> exact_;     // names (normal form) and canonical IP addresses
  std::vector<std::string> suffixes_;  // "corp.example.com" for ".corp.example.com"
  std::vector<std::string> shown_;     // the entries in normal form, for str()
};

// authenticate_to when the config leaves it out: the PAC file's own domain
// (filters/README.md says why). `script`: the PAC file in use, for wpad and
// system (null: none yet, nothing allowed). *from gets where the list came
// from, for messages ("the domain of http://wpad.corp.example/wpad.dat").
AuthenticateTo defaultAuthenticateTo(const pac::PacSourceConfig& source,
                                     const pac::PacScript* script, std::string* from);

struct PacRouteConfig {
  pac::PacSourceConfig source;
  pac::PacEvaluator::Options evaluation;
  std::chrono::milliseconds dns_timeout{1000};
  std::size_t memory_limit = 32u << 20;

  struct Fallback {
    enum class Kind { Direct, Cluster, Reject };
    Kind kind = Kind::Direct;
    std::string cluster;
    int status = 503;
  } fallback;

  enum class OnLoop { Direct, Reject };
  OnLoop on_loop = OnLoop::Direct;

  struct Proxies {
    // name and endpoints are each proxy's own; tls is for HTTPS ones.
    config::Cluster cluster = [] {
      config::Cluster c;
      c.tls = config::TlsContext{};
      c.receives_listener_headers = false;  // see config::Cluster
      return c;
    }();
    std::size_t max_proxies = 64;
    std::chrono::milliseconds idle_timeout{std::chrono::minutes(5)};
    // The proxies that may get cluster.authentication's credentials;
    // nullopt: the default (defaultAuthenticateTo).
    std::optional<AuthenticateTo> authenticate_to;
  } proxies;
};

// Reads the `pac` mapping of route `route_name` ("routes[2]", for logs).
// Records every problem; nullopt when there was one.
std::optional<PacRouteConfig> parsePacRoute(config::NodeReader& pac, const FactoryContext& ctx,
                                            const std::string& route_name);

}  // namespace h2gate::filters
