#include "filters/forward_proxy.h"

#include <algorithm>

namespace h2gate::filters {

ForwardProxyFilter::ForwardProxyFilter(Config config) : config_(std::move(config)) {
  fallbacks_ = config_.fallback_clusters;
  if (config_.direct_fallback) fallbacks_.emplace_back();
}

FilterStatus ForwardProxyFilter::onRequestHead(const RequestHead&, StreamInfo& info) const {
  info.cluster = config_.cluster;
  info.fallbacks = fallbacks_;
  info.route_set = true;
  return FilterStatus::Stop;
}

namespace {

// "" when `name` is a defined cluster, else the error message.
std::string unknownCluster(const std::string& name, const FactoryContext& ctx) {
  if (ctx.bootstrap.findCluster(name) != nullptr) return {};
  std::string known;
  for (const auto& c : ctx.bootstrap.clusters) {
    if (c.name.empty()) continue;
    known += known.empty() ? "" : ", ";
    known += c.name;
  }
  return "unknown cluster '" + name + "' (" +
         (known.empty() ? std::string("no clusters are defined") : "known: " + known) + ")";
}

}  // namespace

FilterPtr createForwardProxy(config::NodeReader& r, const FactoryContext& ctx) {
  if (!r.expectMap()) return nullptr;
  const std::size_t before = r.diagnostics().problems().size();
  r.allowOnly({"@type", "cluster", "fallback_clusters", "direct_fallback"});
  r.expectType(kForwardProxyType);
  ForwardProxyFilter::Config config;
  if (auto cluster = r.string("cluster")) {
    if (!cluster->empty()) {
      if (std::string err = unknownCluster(*cluster, ctx); !err.empty()) r.errorAt("cluster", err);
    }
    config.cluster = *cluster;
  }
  for (config::NodeReader& item : r.list("fallback_clusters")) {
    if (!item.node().IsScalar() || item.node().Scalar().empty()) {
      item.error("expected a cluster name");
      continue;
    }
    const std::string name = item.node().Scalar();
    if (std::string err = unknownCluster(name, ctx); !err.empty()) {
      item.error(err);
    } else if (name == config.cluster || std::count(config.fallback_clusters.begin(),
                                                    config.fallback_clusters.end(), name) != 0) {
      item.error("cluster '" + name + "' is already in the route");
    } else {
      config.fallback_clusters.push_back(name);
    }
  }
  if (auto direct = r.boolean("direct_fallback")) config.direct_fallback = *direct;
  if (config.cluster.empty()) {
    if (!config.fallback_clusters.empty())
      r.errorAt("fallback_clusters",
                "needs a cluster to fall back from (without `cluster` requests go DIRECT)");
    if (config.direct_fallback)
      r.errorAt("direct_fallback",
                "needs a cluster to fall back from (without `cluster` requests go DIRECT)");
  }
  if (r.diagnostics().problems().size() != before) return nullptr;
  return std::make_shared<ForwardProxyFilter>(std::move(config));
}

}  // namespace h2gate::filters
