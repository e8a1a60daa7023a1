// What h2gate sends to an upstream proxy for an app request, shared by the
// h2 and HTTP/1.1 upstream paths: the header list (hop-by-hop removed,
// credentials added) and the response framing rules.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "gateway/base/http_types.h"

namespace h2gate::upstream {

// The listener's upstream_headers for a request that `cluster` carries, or
// null when it gets none: no upstream_headers filter, or a cluster that may
// not receive them (config::Cluster::receives_listener_headers: a proxy a
// PAC file named). The one decision point for what of the listener's
// credentials and extra headers reaches a proxy; everything below asks it.
const Headers* listenerHeaders(const StreamInfo& info, const config::Cluster& cluster);

// The app's end-to-end headers to pass on (lower-cased names for h2): no
// hop-by-hop headers, no Host (the authority carries it), no app-sent
// Proxy-Authorization (unless info.forward_proxy_authorization), no framing
// headers, none that info.upstream_headers replaces; then Via for
// absolute-form requests, listenerHeaders(info, cluster), and `cluster_authorization` (the
// cluster's own credentials, made by auth::RequestAuth; empty: none) as Proxy-Authorization unless
// one is already there (one from upstream_headers wins over the app's, which wins over the
// cluster's).
Headers forwardedHeaders(const RequestHead& head, const StreamInfo& info,
                         const config::Cluster& cluster, bool lowercase,
                         const std::string& cluster_authorization = {});

// Whether the request already carries a Proxy-Authorization of its own to
// the proxy (from upstream_headers, or the app's with
// forward_proxy_authorization): then the cluster's authentication stays out.
bool carriesAuthorization(const RequestHead& head, const StreamInfo& info,
                          const config::Cluster& cluster);

// Headers whose values are secrets on the wire to the proxy: HTTP/2 sends
// them never-indexed (HPACK), so apps sharing a connection cannot probe them
// through compression. Proxy-Authorization, and every header
// upstream_headers adds (credentials, identity tokens).
bool isSensitiveHeader(std::string_view name, const StreamInfo& info,
                       const config::Cluster& cluster);

}  // namespace h2gate::upstream
