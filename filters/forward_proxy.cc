#include "filters/forward_proxy.h"

namespace h2gate::filters {

FilterStatus ForwardProxyFilter::onRequestHead(const RequestHead&, StreamInfo& info) const {
  info.cluster = config_.cluster;
  info.route_set = true;
  return FilterStatus::Stop;
}

FilterPtr createForwardProxy(config::NodeReader& r, const FactoryContext& ctx) {
  if (!r.expectMap()) return nullptr;
  const std::size_t before = r.diagnostics().problems().size();
  r.allowOnly({"@type", "cluster"});
  r.expectType(kForwardProxyType);
  ForwardProxyFilter::Config config;
  if (auto cluster = r.string("cluster")) {
    if (!cluster->empty() && ctx.bootstrap.findCluster(*cluster) == nullptr) {
      std::string known;
      for (const auto& c : ctx.bootstrap.clusters) {
        if (c.name.empty()) continue;
        known += known.empty() ? "" : ", ";
        known += c.name;
      }
      r.errorAt("cluster",
                "unknown cluster '" + *cluster + "' (" +
                    (known.empty() ? std::string("no clusters are defined") : "known: " + known) +
                    ")");
    }
    config.cluster = *cluster;
  }
  if (r.diagnostics().problems().size() != before) return nullptr;
  return std::make_shared<ForwardProxyFilter>(std::move(config));
}

}  // namespace h2gate::filters
