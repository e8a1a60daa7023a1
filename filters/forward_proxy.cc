#include "filters/forward_proxy.h"

#include <algorithm>

#include "filters/match_config.h"
#include "filters/pac_routing_config.h"
#include "gateway/base/log.h"

namespace h2gate::filters {

ForwardProxyFilter::Decision ForwardProxyFilter::decision(const std::string& cluster,
                                                          const std::vector<std::string>& fallbacks,
                                                          bool direct_fallback) {
  Decision d{cluster, fallbacks};
  if (direct_fallback) d.fallbacks.emplace_back();
  return d;
}

ForwardProxyFilter::ForwardProxyFilter(Config config) : config_(std::move(config)) {
  default_ = decision(config_.cluster, config_.fallback_clusters, config_.direct_fallback);
  for (const Route& r : config_.routes) {
    decisions_.push_back(decision(r.action == Route::Action::Cluster ? r.cluster : std::string(),
                                  r.fallback_clusters, r.direct_fallback));
    // Only an address pattern can match an address the name did not: a
    // rule without one matched the name as well, or matches no address.
    if (r.action == Route::Action::Reject)
      for (const match::HostPattern& p : r.match.destinations.patterns())
        address_rejects_ = address_rejects_ || p.kind == match::HostPattern::Kind::Cidr;
  }
}

std::string ForwardProxyFilter::init() {
  for (const std::string& why : config_.ignored)
    H2G_LOG(Warn, 0, 0, "forward_proxy: NO_PROXY entry left out, it never matches: " << why);
  for (const Route& r : config_.routes)
    if (r.pac)
      if (std::string err = r.pac->start(); !err.empty()) return err;
  return {};
}

void ForwardProxyFilter::onNetworkChange() const {
  for (const Route& r : config_.routes)
    if (r.pac) r.pac->networkChanged();
}

std::vector<std::shared_ptr<PacRoute>> ForwardProxyFilter::pacRoutes() const {
  std::vector<std::shared_ptr<PacRoute>> out;
  for (const Route& r : config_.routes)
    if (r.pac) out.push_back(r.pac);
  return out;
}

void ForwardProxyFilter::apply(const Route& route, std::size_t index, StreamInfo& info) const {
  if (route.action == Route::Action::Reject) {
    info.status = route.status;
    info.reason = route.reason;
    return;
  }
  if (route.action == Route::Action::Pac) {
    info.cluster.clear();
    info.fallbacks.clear();
    info.route_decider = route.pac;
    info.route_set = true;
    return;
  }
  info.cluster = decisions_[index].cluster;
  info.fallbacks = decisions_[index].fallbacks;
  info.route_set = true;
}

std::size_t ForwardProxyFilter::firstMatch(const match::Destination& dest, std::size_t end) const {
  for (std::size_t i = 0; i < end; ++i)
    if (config_.routes[i].match.matches(dest)) return i;
  return config_.routes.size();
}

FilterStatus ForwardProxyFilter::onRequestHead(const RequestHead& head, StreamInfo& info) const {
  if (!config_.routes.empty()) {
    const match::Destination dest(head.host, head.port, head.is_connect);
    if (const std::size_t i = firstMatch(dest, config_.routes.size()); i < config_.routes.size()) {
      const Route& r = config_.routes[i];
      H2G_LOG(Debug, info.connection_id, info.stream_id,
              "route " << r.name << " matched " << head.authority() << ": "
                       << (r.action == Route::Action::Reject ? "reject " + std::to_string(r.status)
                           : r.action == Route::Action::Direct ? std::string("DIRECT")
                           : r.action == Route::Action::Pac    ? std::string("PAC file")
                                                               : "cluster " + r.cluster));
      apply(r, i, info);
      return FilterStatus::Stop;
    }
  }
  info.cluster = default_.cluster;
  info.fallbacks = default_.fallbacks;
  info.route_set = true;
  return FilterStatus::Stop;
}

std::optional<Refusal> ForwardProxyFilter::checkAddress(const RequestHead& head, const StreamInfo&,
                                                        const net::IpAddress& address) const {
  if (!address_rejects_) return std::nullopt;
  // The first rule the address matches, if it is a reject rule that comes
  // before the one the name chose (the same walk as onRequestHead): the
  // first rule among those before the name's that matches the address.
  const match::Destination dest(address, head.port, head.is_connect);
  const std::size_t i = firstMatch(dest, config_.routes.size());
  if (i >= config_.routes.size() || config_.routes[i].action != Route::Action::Reject)
    return std::nullopt;
  if (firstMatch(match::Destination(head.host, head.port, head.is_connect), i) < i)
    return std::nullopt;
  const Route& r = config_.routes[i];
  return Refusal{r.status, r.reason + " (" + head.host + " resolves to " + dest.ip()->str() + ")"};
}

void ForwardProxyFilter::describePac(PacBuilder& pac) const {
  pac.options() = config_.pac;
  for (const Route& r : config_.routes) {
    const std::string what =
        r.action == Route::Action::Direct ? r.name + ": direct"
        : r.action == Route::Action::Reject
            ? r.name + ": reject " + std::to_string(r.status) + " (h2gate answers)"
        : r.action == Route::Action::Pac ? r.name + ": h2gate follows a PAC file"
                                         : r.name + ": cluster " + r.cluster;
    pac.add(
        r.match,
        r.action == Route::Action::Direct ? PacBuilder::Action::Direct : PacBuilder::Action::Proxy,
        what);
  }
  if (config_.cluster.empty())
    pac.setDefault(PacBuilder::Action::Direct, "default route: direct");
  else
    pac.setDefault(PacBuilder::Action::Proxy, "default route: cluster " + config_.cluster);
}

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

namespace {

// `cluster`, `fallback_clusters` and `direct_fallback` at this level (the
// default route or one rule). Returns false when `cluster` is absent/empty.
bool parseClusterRoute(config::NodeReader& r, const FactoryContext& ctx, std::string& cluster,
                       std::vector<std::string>& fallbacks, bool& direct_fallback) {
  if (auto c = r.string("cluster")) {
    if (!c->empty()) {
      if (std::string err = unknownCluster(*c, ctx); !err.empty()) r.errorAt("cluster", err);
    }
    cluster = *c;
  }
  for (config::NodeReader& item : r.list("fallback_clusters")) {
    if (!item.node().IsScalar() || item.node().Scalar().empty()) {
      item.error("expected a cluster name");
      continue;
    }
    const std::string name = item.node().Scalar();
    if (std::string err = unknownCluster(name, ctx); !err.empty()) {
      item.error(err);
    } else if (name == cluster || std::count(fallbacks.begin(), fallbacks.end(), name) != 0) {
      item.error("cluster '" + name + "' is already in the route");
    } else {
      fallbacks.push_back(name);
    }
  }
  if (auto direct = r.boolean("direct_fallback")) direct_fallback = *direct;
  if (cluster.empty()) {
    const std::string why =
        "needs a cluster to fall back from (without `cluster` requests go DIRECT)";
    if (!fallbacks.empty()) r.errorAt("fallback_clusters", why);
    if (direct_fallback) r.errorAt("direct_fallback", why);
    return false;
  }
  return true;
}

// Appends the rule to out.routes (also when it is invalid, so names stay
// aligned with the YAML). Returns whether its match could be read.
bool parseRoute(config::NodeReader& r, const FactoryContext& ctx, ForwardProxyFilter::Config& out) {
  using Route = ForwardProxyFilter::Route;
  Route& route = out.routes.emplace_back();
  route.name = "routes[" + std::to_string(out.routes.size() - 1) + "]";
  if (!r.expectMap()) return false;
  r.allowOnly({"match", "cluster", "fallback_clusters", "direct_fallback", "direct", "reject",
               "reason", "pac"});
  config::NodeReader m = r.child("match", true);
  std::optional<match::Match> match = m.isNull() ? std::nullopt : parseMatch(m, &out.ignored);
  if (match) route.match = std::move(*match);

  const int actions =
      int(r.has("cluster")) + int(r.has("direct")) + int(r.has("reject")) + int(r.has("pac"));
  if (actions != 1) {
    r.error(actions == 0 ? "a route needs one of cluster, direct: true, reject: STATUS or pac"
                         : "a route takes only one of cluster, direct, reject and pac");
    return match.has_value();
  }
  if (r.has("pac")) {
    route.action = Route::Action::Pac;
    for (const char* key : {"fallback_clusters", "direct_fallback"})
      if (r.has(key)) r.errorAt(key, "a pac route takes its fallback in pac.fallback");
    config::NodeReader pac = r.child("pac");
    if (std::optional<PacRouteConfig> cfg =
            parsePacRoute(pac, ctx, ctx.listener.name + "/" + route.name)) {
      std::vector<std::string> own;
      auto add = [&own](const config::SocketAddress& a) {
        own.push_back(
            (a.address.find(':') != std::string::npos ? "[" + a.address + "]" : a.address) + ":" +
            std::to_string(a.port_value));
      };
      add(ctx.listener.address);
      for (const auto& a : ctx.listener.additional_addresses) add(a);
      route.pac = std::make_shared<PacRoute>(std::move(*cfg), std::move(own));
    }
  }
  if (r.has("cluster")) {
    route.action = Route::Action::Cluster;
    if (!parseClusterRoute(r, ctx, route.cluster, route.fallback_clusters, route.direct_fallback))
      r.errorAt("cluster", "must name a cluster (use direct: true for DIRECT)");
  } else {
    for (const char* key : {"fallback_clusters", "direct_fallback"})
      if (r.has(key)) r.errorAt(key, "applies only to a route with a cluster");
  }
  if (r.has("direct")) {
    route.action = Route::Action::Direct;
    if (auto d = r.boolean("direct"); d && !*d)
      r.errorAt("direct", "takes only true (route elsewhere with cluster or reject)");
  }
  if (r.has("reject")) {
    route.action = Route::Action::Reject;
    if (auto status = r.uint("reject", 400, 599)) route.status = static_cast<int>(*status);
    route.reason = "refused by h2gate route rule " + route.name;
  }
  if (auto reason = r.string("reason")) {
    if (route.action != Route::Action::Reject)
      r.errorAt("reason", "applies only to a reject route");
    else if (!reason->empty())
      route.reason = *reason;
  }
  return match.has_value();
}

void parsePac(config::NodeReader& r, PacOptions& out) {
  if (r.isNull() || !r.expectMap()) return;
  r.allowOnly({"serve_on_listener", "proxy", "direct_fallback"});
  if (auto b = r.boolean("serve_on_listener")) out.serve_on_listener = *b;
  if (auto b = r.boolean("direct_fallback")) out.direct_fallback = *b;
  if (auto proxy = r.string("proxy")) {
    const std::size_t colon = proxy->rfind(':');
    const bool ok = colon != std::string::npos && colon > 0 && colon + 1 < proxy->size() &&
                    proxy->find_first_of(" \t;\"\\") == std::string::npos;
    if (!ok)
      r.errorAt("proxy", "expected host:port (e.g. 127.0.0.1:3128), got '" + *proxy + "'");
    else
      out.proxy = *proxy;
  }
}

}  // namespace

FilterPtr createForwardProxy(config::NodeReader& r, const FactoryContext& ctx) {
  if (!r.expectMap()) return nullptr;
  const std::size_t before = r.diagnostics().problems().size();
  r.allowOnly({"@type", "routes", "cluster", "fallback_clusters", "direct_fallback", "pac"});
  r.expectType(kForwardProxyType);
  ForwardProxyFilter::Config config;
  // The first rule that matches every request, if any: what follows it is
  // unreachable.
  std::optional<std::string> catch_all;
  for (config::NodeReader& route : r.list("routes")) {
    if (catch_all)
      route.error("unreachable: " + *catch_all +
                  " before it matches every request (a catch-all must be the last rule)");
    const bool match_ok = parseRoute(route, ctx, config);
    if (!catch_all && match_ok && config.routes.back().match.catchAll())
      catch_all = config.routes.back().name;
  }
  parseClusterRoute(r, ctx, config.cluster, config.fallback_clusters, config.direct_fallback);
  if (catch_all) {
    for (const char* key : {"cluster", "fallback_clusters", "direct_fallback"})
      if (r.has(key))
        r.errorAt(key, "never used: " + *catch_all +
                           " matches every request, so no request reaches the default route");
  }
  config::NodeReader pac = r.child("pac");
  parsePac(pac, config.pac);
  if (r.diagnostics().problems().size() != before) return nullptr;
  return std::make_shared<ForwardProxyFilter>(std::move(config));
}

}  // namespace h2gate::filters
