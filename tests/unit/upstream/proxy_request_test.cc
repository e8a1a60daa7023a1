// What a request carries to a proxy of the listener's upstream_headers:
// a cluster of the config gets them, a proxy that a PAC file named does not
// (config::Cluster::receives_listener_headers, upstream/proxy_request.h).
#include "gateway/upstream/proxy_request.h"

#include <catch2/catch.hpp>

using namespace h2gate;
using namespace h2gate::upstream;

namespace {

RequestHead connectHead() {
  RequestHead h;
  h.method = "CONNECT";
  h.target = "origin.test:443";
  h.is_connect = true;
  h.host = "origin.test";
  h.port = 443;
  h.headers = {{"User-Agent", "curl/8"}};
  return h;
}

UpstreamHeaders configuredHeaders() {
  UpstreamHeaders u;
  u.all = {{"X-Identity-Token", "token-all"},
           {"Proxy-Authorization", basicCredentials("app1", "pw1")}};
  u.by_cluster = {{"partner", {{"X-Identity-Token", "token-partner"}}}};
  return u;
}

}  // namespace

TEST_CASE("proxy request: the listener's headers go to configured clusters only",
          "[upstream][proxy_request][pac_security]") {
  const UpstreamHeaders added = configuredHeaders();
  StreamInfo info;
  info.upstream_headers = &added;
  const RequestHead head = connectHead();

  config::Cluster corp;
  corp.name = "corp";
  const Headers to_corp = forwardedHeaders(head, info, corp, false);
  REQUIRE(findHeader(to_corp, "x-identity-token"));
  CHECK(findHeader(to_corp, "x-identity-token")->value == "token-all");
  CHECK(findHeader(to_corp, "proxy-authorization"));
  CHECK(carriesAuthorization(head, info, corp));
  CHECK(isSensitiveHeader("X-Identity-Token", info, corp));

  config::Cluster partner;
  partner.name = "partner";
  const Headers to_partner = forwardedHeaders(head, info, partner, true);
  REQUIRE(findHeader(to_partner, "x-identity-token"));
  CHECK(findHeader(to_partner, "x-identity-token")->value == "token-partner");

  // A proxy a PAC file named: the same cluster shape, but nothing of the
  // listener's, and the cluster's own credentials (none) are all it gets.
  config::Cluster pac_named;
  pac_named.name = "PROXY 203.0.113.7:3128";
  pac_named.receives_listener_headers = false;
  const Headers to_pac = forwardedHeaders(head, info, pac_named, false);
  CHECK_FALSE(findHeader(to_pac, "x-identity-token"));
  CHECK_FALSE(findHeader(to_pac, "proxy-authorization"));
  CHECK(findHeader(to_pac, "user-agent"));
  CHECK_FALSE(carriesAuthorization(head, info, pac_named));
  CHECK(listenerHeaders(info, pac_named) == nullptr);
  CHECK(listenerHeaders(info, corp) != nullptr);
  // Not even under a configured cluster's name.
  pac_named.name = "partner";
  CHECK_FALSE(findHeader(forwardedHeaders(head, info, pac_named, false), "x-identity-token"));

  // The app's own Proxy-Authorization, when the listener passes it on, is
  // the app's choice and goes wherever the request goes.
  RequestHead with_own = head;
  with_own.headers.push_back({"Proxy-Authorization", "Basic YXBwOm93bg=="});
  info.forward_proxy_authorization = true;
  CHECK(findHeader(forwardedHeaders(with_own, info, pac_named, false), "proxy-authorization"));
}
