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
//
// Errors name file, line, column and field like every config error.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "config/node_reader.h"
#include "filters/registry.h"
#include "gateway/pac_engine/evaluator.h"
#include "gateway/pac_engine/source.h"

namespace h2gate::filters {

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
  } proxies;
};

// Reads the `pac` mapping of route `route_name` ("routes[2]", for logs).
// Records every problem; nullopt when there was one.
std::optional<PacRouteConfig> parsePacRoute(config::NodeReader& pac, const FactoryContext& ctx,
                                            const std::string& route_name);

}  // namespace h2gate::filters
