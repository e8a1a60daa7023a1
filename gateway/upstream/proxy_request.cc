#include "gateway/upstream/proxy_request.h"

#include <algorithm>

#include "gateway/base/ascii.h"
#include "gateway/http1/codec.h"

namespace h2gate::upstream {

const Headers* listenerHeaders(const StreamInfo& info, const config::Cluster& cluster) {
  if (!info.upstream_headers || !cluster.receives_listener_headers) return nullptr;
  return &info.upstream_headers->forCluster(cluster.name);
}

bool isSensitiveHeader(std::string_view name, const StreamInfo& info,
                       const config::Cluster& cluster) {
  if (iequals(name, "proxy-authorization")) return true;
  const Headers* added = listenerHeaders(info, cluster);
  return added && findHeader(*added, name);
}

bool carriesAuthorization(const RequestHead& head, const StreamInfo& info,
                          const config::Cluster& cluster) {
  if (const Headers* added = listenerHeaders(info, cluster);
      added && findHeader(*added, "proxy-authorization"))
    return true;
  return info.forward_proxy_authorization && findHeader(head.headers, "proxy-authorization");
}

Headers forwardedHeaders(const RequestHead& head, const StreamInfo& info,
                         const config::Cluster& cluster, bool lowercase,
                         const std::string& cluster_authorization) {
  const Headers* added = listenerHeaders(info, cluster);
  auto named = [lowercase](Header h) {
    if (lowercase) lowerAsciiInPlace(h.name);
    return h;
  };
  Headers out;
  std::string via;
  bool authorization = false;
  for (const Header& h : head.headers) {
    if (http1::isHopByHop(h.name, head.headers, info.forward_proxy_authorization)) continue;
    if (iequals(h.name, "host") || iequals(h.name, "content-length") || iequals(h.name, "expect"))
      continue;
    if (added && findHeader(*added, h.name)) continue;
    if (iequals(h.name, "via")) {
      via = h.value;
      continue;
    }
    authorization = authorization || iequals(h.name, "proxy-authorization");
    out.push_back(named(h));
  }
  if (!head.is_connect) {
    const std::string ours(http1::kVia);
    out.push_back({lowercase ? "via" : "Via", via.empty() ? ours : via + ", " + ours});
  }
  if (added) {
    for (const Header& h : *added) {
      authorization = authorization || iequals(h.name, "proxy-authorization");
      out.push_back(named(h));
    }
  }
  if (!cluster_authorization.empty() && !authorization)
    out.push_back(
        {lowercase ? "proxy-authorization" : "Proxy-Authorization", cluster_authorization});
  return out;
}

}  // namespace h2gate::upstream
