// h2gate.filters.upstream_headers: headers added to the CONNECT or request
// h2gate sends to the upstream proxy — credentials and identity tokens per
// listener (so per app, with one listener per app) and per cluster.
//
//   - name: h2gate.filters.upstream_headers
//     typed_config:
//       "@type": type.googleapis.com/h2gate.filters.upstream_headers.v1.Config  # optional
//       request_headers_to_add:          # every request of this listener, any cluster
//       - header: {key: X-Identity-Token, value: "${APP1_TOKEN}"}
//       proxy_credentials: {username: app1, password: "${APP1_PASSWORD}"}  # Basic
//       clusters:                        # per cluster, on top of the above
//       - cluster: partner_proxy
//         request_headers_to_add:
//         - header: {key: Proxy-Authorization, value: "Bearer ${PARTNER_TOKEN}"}
//       forward_proxy_authorization: false  # true: pass the app's own on
//
// An added header replaces one of the same name the app sent, and a
// cluster's entry replaces a listener-wide one. Proxy-Authorization from
// here (or proxy_credentials, its Basic shorthand) wins over the cluster's
// proxy_credentials. DIRECT requests get nothing, and neither does a proxy
// a PAC file names (upstream/proxy_request.h listenerHeaders()). The app's own
// Proxy-Authorization is dropped unless forward_proxy_authorization is true
// (not allowed with proxy_auth on the same listener: that header is for
// h2gate). Values are secrets: never logged, redacted in /config_dump.
#pragma once

#include "config/node_reader.h"
#include "filters/filter.h"
#include "filters/registry.h"

namespace h2gate::filters {

inline constexpr const char* kUpstreamHeadersType =
    "type.googleapis.com/h2gate.filters.upstream_headers.v1.Config";

class UpstreamHeadersFilter : public Filter {
 public:
  UpstreamHeadersFilter(UpstreamHeaders headers, bool forward_proxy_authorization)
      : headers_(std::move(headers)), forward_proxy_authorization_(forward_proxy_authorization) {}

  // Points info at the headers (no copy); Continue.
  FilterStatus onRequestHead(const RequestHead&, StreamInfo& info) const override {
    info.upstream_headers = &headers_;
    info.forward_proxy_authorization = forward_proxy_authorization_;
    return FilterStatus::Continue;
  }

  const UpstreamHeaders& headers() const { return headers_; }

 private:
  const UpstreamHeaders headers_;
  const bool forward_proxy_authorization_;
};

FilterPtr createUpstreamHeaders(config::NodeReader& typed_config, const FactoryContext& ctx);

}  // namespace h2gate::filters
