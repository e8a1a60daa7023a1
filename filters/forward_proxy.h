// h2gate.filters.forward_proxy: the terminal filter that routes a request to a
// cluster (an upstream proxy) or DIRECT.
//
//   - name: h2gate.filters.forward_proxy
//     typed_config:
//       "@type": type.googleapis.com/h2gate.filters.forward_proxy.v1.Config  # optional
//       cluster: corp_proxy   # optional; absent, null or "": connect directly
//
// Later rules (per-host routes, bypass lists) extend Config and route(); the
// filter stays stateless after construction, so it is shared across workers.
#pragma once

#include <string>

#include "config/node_reader.h"
#include "filters/filter.h"
#include "filters/registry.h"

namespace h2gate::filters {

inline constexpr const char* kForwardProxyType =
    "type.googleapis.com/h2gate.filters.forward_proxy.v1.Config";

class ForwardProxyFilter : public Filter {
 public:
  struct Config {
    std::string cluster;  // empty: DIRECT
  };

  explicit ForwardProxyFilter(Config config) : config_(std::move(config)) {}

  // Sets info.cluster and info.route_set; always Stop (nothing runs after it).
  FilterStatus onRequestHead(const RequestHead& head, StreamInfo& info) const override;
  bool terminal() const override { return true; }

  const Config& config() const { return config_; }

 private:
  Config config_;
};

// Parses typed_config (recording problems, e.g. an unknown cluster at the
// `cluster` key) and returns the filter, or nullptr when it is invalid.
FilterPtr createForwardProxy(config::NodeReader& typed_config, const FactoryContext& ctx);

}  // namespace h2gate::filters
