// h2gate.filters.forward_proxy: the terminal filter that routes a request to a
// cluster (an upstream proxy), DIRECT, or refuses it.
//
//   - name: h2gate.filters.forward_proxy
//     typed_config:
//       "@type": type.googleapis.com/h2gate.filters.forward_proxy.v1.Config  # optional
//       routes:                    # optional; in order, the first match wins
//       - match: {host_suffixes: [internal.example], cidrs: [10.0.0.0/8]}
//         direct: true             # connect directly
//       - match: {hosts: ["*.partner.example"]}
//         cluster: partner_proxy   # through this cluster...
//         fallback_clusters: []    # ...then these, then DIRECT if direct_fallback
//         direct_fallback: false
//       - match: {hosts: [ads.example]}
//         reject: 403              # answer this status (400..599)
//         reason: blocked by policy  # optional body text
//       - match: {}
//         pac: {url: http://wpad.corp.example/proxy.pac}  # follow a PAC file
//                                  # (filters/pac_routing_config.h, pac_routing.h)
//       # No rule matched: the default route.
//       cluster: corp_proxy   # optional; absent, null or "": connect directly
//       fallback_clusters: [backup_proxy]  # optional, tried in order
//       direct_fallback: false             # optional: DIRECT after the last one
//       pac:                  # optional: the PAC file made from these routes
//       (filters/served_pac.h)
//         serve_on_listener: false   # also answer GET /proxy.pac on this proxy listener
//         proxy: ""                  # host:port in PROXY; default this listener's address
//         direct_fallback: false     # "PROXY …; DIRECT"
//
// `match` is described in filters/match_config.h. A rule after one that
// matches every request, a default cluster after such a rule, an unknown
// cluster, a rule with none or several of cluster/direct/reject/pac:
// config errors. A pac rule's request is routed when its tunnel opens, by
// what the PAC file answers (StreamInfo::route_decider).
//
// Fallback: when no proxy of a cluster can be reached for a request (connect
// or TLS failure, DNS failure of the proxy's name, all its endpoints down, no
// connection free in time), the request goes to the next cluster in the list,
// and after the last one DIRECT if direct_fallback is true. A proxy's own
// answer (403, 407, 502...) is final: it reached a proxy, which decided.
//
// Routes judge the destination as the app wrote it (IP literals in canonical
// form). In direct mode, reject rules are also applied to the addresses the
// name resolved to (checkAddress): the rules before the one the name chose
// (all of them when the name fell to the default route) are tried in order
// against each address as if the app had asked for it, and when the first
// that matches is a reject rule the request gets its status. A rule that
// matched the name before a reject range is the exception it reads as
// (list a name before the range to let it through).
//
// The filter is immutable after construction and shared by all workers.
#pragma once

#include <string>
#include <vector>

#include "config/node_reader.h"
#include "filters/filter.h"
#include "filters/pac_routing.h"
#include "filters/registry.h"
#include "filters/served_pac.h"
#include "gateway/match/matcher.h"

namespace h2gate::filters {

inline constexpr const char* kForwardProxyType =
    "type.googleapis.com/h2gate.filters.forward_proxy.v1.Config";

class ForwardProxyFilter : public Filter {
 public:
  struct Route {
    enum class Action { Cluster, Direct, Reject, Pac };
    std::string name;  // "routes[2]", for logs
    match::Match match;
    Action action = Action::Direct;
    std::string cluster;                         // Cluster
    std::vector<std::string> fallback_clusters;  // Cluster
    bool direct_fallback = false;                // Cluster
    int status = 0;                              // Reject
    std::string reason;                          // Reject: the body
    std::shared_ptr<PacRoute> pac;               // Pac
  };
  struct Config {
    std::vector<Route> routes;
    std::string cluster;                         // the default; empty: DIRECT
    std::vector<std::string> fallback_clusters;  // only with a cluster
    bool direct_fallback = false;                // only with a cluster
    PacOptions pac;
    // NO_PROXY entries the chosen mode ignores ("PATH: 'entry': why").
    std::vector<std::string> ignored;
  };

  explicit ForwardProxyFilter(Config config);

  // Logs the NO_PROXY entries left out, once per build; starts the PAC
  // routes' sources and evaluators.
  std::string init() override;
  void onNetworkChange() const override;
  // Sets info.cluster, info.fallbacks and info.route_set, or info.status and
  // info.reason for a reject rule; always Stop (nothing runs after it).
  FilterStatus onRequestHead(const RequestHead& head, StreamInfo& info) const override;
  // Direct mode: reject rules against one resolved address (above).
  std::optional<Refusal> checkAddress(const RequestHead& head, const StreamInfo& info,
                                      const net::IpAddress& address) const override;
  bool terminal() const override { return true; }
  void describePac(PacBuilder& pac) const override;

  const Config& config() const { return config_; }
  // The routes that follow a PAC file, in order.
  std::vector<std::shared_ptr<PacRoute>> pacRoutes() const;

 private:
  struct Decision {
    std::string cluster;
    std::vector<std::string> fallbacks;  // fallback clusters, then "" if direct_fallback
  };
  static Decision decision(const std::string& cluster, const std::vector<std::string>& fallbacks,
                           bool direct_fallback);
  void apply(const Route& route, std::size_t index, StreamInfo& info) const;
  // Index of the first route matching `dest`, or routes.size() (default).
  std::size_t firstMatch(const match::Destination& dest, std::size_t end) const;

  Config config_;
  bool address_rejects_ = false;  // a reject rule has a CIDR pattern
  Decision default_;
  std::vector<Decision> decisions_;  // per route (Cluster and Direct)
};

// Parses typed_config (recording problems, e.g. an unknown cluster at the
// `cluster` key) and returns the filter, or nullptr when it is invalid.
FilterPtr createForwardProxy(config::NodeReader& typed_config, const FactoryContext& ctx);

// "" when `name` is a defined cluster, else the error message (for filters
// that name clusters).
std::string unknownCluster(const std::string& name, const FactoryContext& ctx);

}  // namespace h2gate::filters
