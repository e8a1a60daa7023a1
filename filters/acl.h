// h2gate.filters.acl: destination allow/deny lists, evaluated before routing
// (put it before forward_proxy in the chain).
//
//   - name: h2gate.filters.acl
//     typed_config:
//       "@type": type.googleapis.com/h2gate.filters.acl.v1.Config  # optional
//       deny:                    # any match: 403 with the reason as the body
//       - match: {cidrs: [169.254.0.0/16, "fe80::/10"]}
//         reason: link-local addresses (cloud metadata service)
//       allow:                   # optional; when given, a request must match one
//       - match: {ports: [80, 443]}
//
// `match` is described in filters/match_config.h. Deny entries are checked
// first; then, when `allow` is given, a request that matches none of its
// entries is denied too. CIDR ranges apply to IP-literal destinations: a
// name that resolves into a denied range is not caught by h2gate (the
// upstream proxy resolves names; deny it by name too).
#pragma once

#include <string>
#include <vector>

#include "config/node_reader.h"
#include "filters/filter.h"
#include "filters/matcher.h"
#include "filters/registry.h"

namespace h2gate::filters {

inline constexpr const char* kAclType = "type.googleapis.com/h2gate.filters.acl.v1.Config";

class AclFilter : public Filter {
 public:
  struct Entry {
    Match match;
    std::string reason;  // deny entries: the 403 body
  };
  struct Config {
    std::vector<Entry> deny;
    std::vector<Entry> allow;
    bool has_allow = false;            // `allow` given (even empty: then nothing is allowed)
    std::vector<std::string> ignored;  // NO_PROXY entries left out
  };

  explicit AclFilter(Config config);
  std::string init() override;
  // Denied: info.status 403, info.reason; Stop. Otherwise Continue.
  FilterStatus onRequestHead(const RequestHead& head, StreamInfo& info) const override;
  void describePac(PacBuilder& pac) const override;

  const Config& config() const { return config_; }

 private:
  Config config_;
};

FilterPtr createAcl(config::NodeReader& typed_config, const FactoryContext& ctx);

}  // namespace h2gate::filters
