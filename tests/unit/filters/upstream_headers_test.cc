// upstream_headers: what reaches the upstream proxy (via forwardedHeaders),
// its config errors and redaction.
#include "filters/upstream_headers.h"

#include <catch2/catch.hpp>

#include "config/dump.h"
#include "filter_env.h"
#include "filters/registry.h"
#include "gateway/upstream/proxy_request.h"
#include "tests/support/config_util.h"

using namespace h2gate;
using namespace h2gate::filters;
using h2gate::testing::allProblems;
using h2gate::testing::App1Env;
using h2gate::testing::connectWith;
using h2gate::testing::ScopedEnv;

namespace {

// "name: value" lines of what goes to the proxy of `cluster`.
// The cluster's own credentials go in as auth::RequestAuth makes them:
// only when the request carries no Proxy-Authorization of its own.
std::string sent(const RequestHead& head, const StreamInfo& info, const config::Cluster& cluster) {
  const std::string own =
      cluster.credentials && !upstream::carriesAuthorization(head, info, cluster)
          ? basicCredentials(cluster.credentials->username, cluster.credentials->password)
          : "";
  std::string out;
  for (const Header& h : upstream::forwardedHeaders(head, info, cluster, false, own))
    out += h.name + ": " + h.value + "\n";
  return out;
}

}  // namespace

TEST_CASE("upstream_headers: per listener and per cluster, replacing app headers",
          "[filters][upstream_headers]") {
  ScopedEnv token("H2GATE_TEST_TOKEN", "t0k3n");
  App1Env env;
  const FilterPtr f = env.make(kUpstreamHeaders,
                               "request_headers_to_add:\n"
                               "- header: {key: X-Identity, value: 'app1 ${H2GATE_TEST_TOKEN}'}\n"
                               "proxy_credentials: {username: app1, password: pw1}\n"
                               "clusters:\n"
                               "- cluster: partner\n"
                               "  request_headers_to_add:\n"
                               "  - header: {key: Proxy-Authorization, value: Bearer xyz}\n"
                               "  - header: {key: x-identity, value: partner-app1}\n");
  INFO(allProblems(env.diag.problems()));
  REQUIRE(f);
  const RequestHead head = connectWith({{"User-Agent", "curl"},
                                        {"X-Identity", "spoofed"},
                                        {"Proxy-Authorization", "Basic YXBwOmFwcA=="}});
  StreamInfo info;
  CHECK(f->onRequestHead(head, info) == FilterStatus::Continue);
  REQUIRE(info.upstream_headers);
  config::Cluster corp = env.bootstrap.clusters[0];
  corp.credentials = config::ProxyCredentials{"cluster-user", "cluster-pw"};
  // The app's X-Identity and Proxy-Authorization are gone; the listener's
  // credentials win over the cluster's.
  CHECK(sent(head, info, corp) ==
        "User-Agent: curl\n"
        "X-Identity: app1 t0k3n\n"
        "Proxy-Authorization: Basic YXBwMTpwdzE=\n");
  CHECK(sent(head, info, env.bootstrap.clusters[1]) ==
        "User-Agent: curl\n"
        "Proxy-Authorization: Bearer xyz\n"
        "x-identity: partner-app1\n");
  // What h2 sends never-indexed: credentials and every added header.
  CHECK(upstream::isSensitiveHeader("proxy-authorization", StreamInfo{}, corp));
  CHECK(upstream::isSensitiveHeader("x-identity", info, corp));
  CHECK_FALSE(upstream::isSensitiveHeader("user-agent", info, corp));
  CHECK_FALSE(upstream::isSensitiveHeader("x-identity", StreamInfo{}, corp));
  // Without the filter: the cluster's credentials, never the app's.
  CHECK(sent(head, StreamInfo{}, corp) ==
        "User-Agent: curl\n"
        "X-Identity: spoofed\n"
        "Proxy-Authorization: Basic Y2x1c3Rlci11c2VyOmNsdXN0ZXItcHc=\n");
}

TEST_CASE("upstream_headers: forward_proxy_authorization passes the app's own on",
          "[filters][upstream_headers]") {
  App1Env env;
  const FilterPtr f = env.make(kUpstreamHeaders, "{forward_proxy_authorization: true}");
  REQUIRE(f);
  const RequestHead head = connectWith({{"Proxy-Authorization", "Basic YXBwOmFwcA=="}});
  StreamInfo info;
  f->onRequestHead(head, info);
  config::Cluster corp = env.bootstrap.clusters[0];
  corp.credentials = config::ProxyCredentials{"u", "p"};
  // One Proxy-Authorization only: the app's wins over the cluster's.
  CHECK(sent(head, info, corp) == "Proxy-Authorization: Basic YXBwOmFwcA==\n");
}

TEST_CASE("upstream_headers: config errors", "[filters][upstream_headers]") {
  App1Env env;
  env.listener.filters.push_back(config::FilterConfig{kProxyAuth, YAML::Node(), {}});
  CHECK_FALSE(env.make(kUpstreamHeaders,
                       "request_headers_to_add:\n"
                       "- header: {key: 'bad name', value: x}\n"
                       "- header: {key: Host, value: x}\n"
                       "- {key: a, value: b}\n"
                       "clusters:\n"
                       "- cluster: nope\n"
                       "- cluster: corp\n"
                       "- cluster: corp\n"
                       "forward_proxy_authorization: true\n"));
  CHECK(allProblems(env.diag.problems()) ==
        "h.yaml:2:17: typed_config.request_headers_to_add[0].header.key: 'bad name' is not a "
        "valid header name\n"
        "h.yaml:3:17: typed_config.request_headers_to_add[1].header.key: Host is set from the "
        "request target and cannot be added\n"
        "h.yaml:4:4: typed_config.request_headers_to_add[2].key: unknown field (expected one of: "
        "header)\n"
        "h.yaml:4:12: typed_config.request_headers_to_add[2].value: unknown field (expected one "
        "of: header)\n"
        "h.yaml:4:3: typed_config.request_headers_to_add[2].header: missing required field\n"
        "h.yaml:6:12: typed_config.clusters[0].cluster: unknown cluster 'nope' (known: corp, "
        "partner)\n"
        "h.yaml:8:12: typed_config.clusters[2].cluster: cluster 'corp' is listed twice\n"
        "h.yaml:9:30: typed_config.forward_proxy_authorization: cannot be true on a listener "
        "with proxy_auth: the app's Proxy-Authorization is h2gate's own credential there\n");
}

TEST_CASE("upstream_headers: values are redacted in /config_dump", "[filters][upstream_headers]") {
  config::Bootstrap b = config::defaultBootstrap();
  b.listeners[0].filters.insert(
      b.listeners[0].filters.begin(),
      config::FilterConfig{kUpstreamHeaders,
                           YAML::Load("request_headers_to_add:\n"
                                      "- header: {key: X-Identity, value: literal-secret}\n"
                                      "proxy_credentials: {username: app1, password: pw1}\n"),
                           {}});
  const std::string dump = config::dumpYaml(b);
  INFO(dump);
  CHECK(dump.find("literal-secret") == std::string::npos);
  CHECK(dump.find("pw1") == std::string::npos);
  CHECK(dump.find("X-Identity") != std::string::npos);
  CHECK(dump.find("app1") != std::string::npos);
}
