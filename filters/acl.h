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
//       check_resolved_addresses: true   # optional, default true (below)
//
// `match` is described in filters/match_config.h. Deny entries are checked
// first; then, when `allow` is given, a request that matches none of its
// entries is denied too. IP literals are judged in canonical form
// ("0x7f.1" is 127.0.0.1, "[::ffff:127.0.0.1]" too: the request parser
// canonicalises them).
//
// Resolved addresses: a request that goes DIRECT is judged again, before
// h2gate connects, against every address its name resolved to (checkAddress):
// a deny entry that matches any of them refuses the request (403, and
// h2gate connects to none). `allow` judges the name as written, not its
// addresses. Through an upstream proxy the proxy resolves names, so only
// the name (or literal) is judged. check_resolved_addresses: false turns the
// second look off (deny ranges then catch IP literals only).
#pragma once

#include <string>
#include <vector>

#include "config/node_reader.h"
#include "filters/filter.h"
#include "filters/registry.h"
#include "gateway/match/matcher.h"

namespace h2gate::filters {

inline constexpr const char* kAclType = "type.googleapis.com/h2gate.filters.acl.v1.Config";

class AclFilter : public Filter {
 public:
  struct Entry {
    match::Match match;
    std::string reason;  // deny entries: the 403 body
  };
  struct Config {
    std::vector<Entry> deny;
    std::vector<Entry> allow;
    bool has_allow = false;  // `allow` given (even empty: then nothing is allowed)
    bool check_resolved_addresses = true;
    std::vector<std::string> ignored;  // NO_PROXY entries left out
  };

  explicit AclFilter(Config config);
  std::string init() override;
  // Denied: info.status 403, info.reason; Stop. Otherwise Continue.
  FilterStatus onRequestHead(const RequestHead& head, StreamInfo& info) const override;
  // The deny entries, against one resolved address (403 with the entry's
  // reason and the address).
  std::optional<Refusal> checkAddress(const RequestHead& head, const StreamInfo& info,
                                      const net::IpAddress& address) const override;
  void describePac(PacBuilder& pac) const override;

  const Config& config() const { return config_; }

 private:
  Config config_;
};

FilterPtr createAcl(config::NodeReader& typed_config, const FactoryContext& ctx);

}  // namespace h2gate::filters
