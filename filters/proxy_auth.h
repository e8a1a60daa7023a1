// h2gate.filters.proxy_auth: Basic authentication of the apps on a proxy
// listener — worth it when the listener is bound beyond loopback, allowed
// anywhere. Put it first in the chain.
//
//   - name: h2gate.filters.proxy_auth
//     typed_config:
//       "@type": type.googleapis.com/h2gate.filters.proxy_auth.v1.Config  # optional
//       realm: h2gate            # optional
//       users:
//       - username: build-agent
//         password: "${H2GATE_AGENT_PASSWORD}"
//
// A request without valid credentials gets 407 with
// `Proxy-Authenticate: Basic realm="h2gate"` and the connection is closed
// (clients retry with credentials on a new one). Credentials are compared
// as SHA-256 digests with CRYPTO_memcmp against every user, so the time
// taken says nothing about how close a guess was or which user exists. The
// app's Proxy-Authorization is for h2gate only: never forwarded upstream
// (upstream_headers refuses forward_proxy_authorization next to this
// filter), never logged. Only digests of the passwords are kept.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "config/node_reader.h"
#include "filters/filter.h"
#include "filters/registry.h"

namespace h2gate::filters {

inline constexpr const char* kProxyAuthType =
    "type.googleapis.com/h2gate.filters.proxy_auth.v1.Config";

class ProxyAuthFilter : public Filter {
 public:
  using Digest = std::array<unsigned char, 32>;  // SHA-256 of "user:password"

  ProxyAuthFilter(std::string realm, std::vector<Digest> users);

  // Valid credentials: Continue. Otherwise 407 (info.status, info.reason,
  // info.reply_headers) and Stop.
  FilterStatus onRequestHead(const RequestHead& head, StreamInfo& info) const override;

  // True when `header` (a Proxy-Authorization value) carries the Basic
  // credentials of one of the users.
  bool accepts(std::string_view header) const;

  static Digest digest(std::string_view user_colon_password);

 private:
  const std::string challenge_;  // the Proxy-Authenticate header line
  const std::vector<Digest> users_;
};

FilterPtr createProxyAuth(config::NodeReader& typed_config, const FactoryContext& ctx);

}  // namespace h2gate::filters
