// h2gate.filters.forward_proxy: the terminal filter that routes a request to a
// cluster (an upstream proxy) or DIRECT.
//
//   - name: h2gate.filters.forward_proxy
//     typed_config:
//       "@type": type.googleapis.com/h2gate.filters.forward_proxy.v1.Config  # optional
//       cluster: corp_proxy   # optional; absent, null or "": connect directly
//       fallback_clusters: [backup_proxy]  # optional, tried in order
//       direct_fallback: false             # optional: DIRECT after the last one
//
// Fallback: when no proxy of a cluster can be reached for a request (connect
// or TLS failure, DNS failure of the proxy's name, all its endpoints down, no
// connection free in time), the request goes to the next cluster in the list,
// and after the last one DIRECT if direct_fallback is true. A proxy's own
// answer (403, 407, 502...) is final: it reached a proxy, which decided.
//
// Later rules (per-host routes, bypass lists) extend Config and route(); the
// filter stays stateless after construction, so it is shared across workers.
#pragma once

#include <string>
#include <vector>

#include "config/node_reader.h"
#include "filters/filter.h"
#include "filters/registry.h"

namespace h2gate::filters {

inline constexpr const char* kForwardProxyType =
    "type.googleapis.com/h2gate.filters.forward_proxy.v1.Config";

class ForwardProxyFilter : public Filter {
 public:
  struct Config {
    std::string cluster;                         // empty: DIRECT
    std::vector<std::string> fallback_clusters;  // only with a cluster
    bool direct_fallback = false;                // only with a cluster
  };

  explicit ForwardProxyFilter(Config config);

  // Sets info.cluster, info.fallbacks and info.route_set; always Stop
  // (nothing runs after it).
  FilterStatus onRequestHead(const RequestHead& head, StreamInfo& info) const override;
  bool terminal() const override { return true; }

  const Config& config() const { return config_; }

 private:
  Config config_;
  std::vector<std::string> fallbacks_;  // fallback_clusters, then "" if direct_fallback
};

// Parses typed_config (recording problems, e.g. an unknown cluster at the
// `cluster` key) and returns the filter, or nullptr when it is invalid.
FilterPtr createForwardProxy(config::NodeReader& typed_config, const FactoryContext& ctx);

}  // namespace h2gate::filters
