#include "config/dump.h"

#include <filesystem>

#include <catch2/catch.hpp>

#include "config/loader.h"
#include "gateway/base/keyring.h"
#include "gateway/server/load_config.h"
#include "tests/support/config_util.h"
#include "tests/support/temp_dir.h"

using namespace h2gate::config;
using h2gate::testing::allProblems;
using h2gate::testing::ScopedEnv;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

const std::string kSourceDir = H2GATE_SOURCE_DIR;
const std::string kExampleDir = kSourceDir + "/config/examples";
const char* kPassword = "s3cr3t-Pa55";

using h2gate::testing::kMinimalConfig;
using h2gate::testing::loadYaml;

// kMinimalConfig and a cluster c (to p.example:443) with `fields`, indented 4,
// ahead of its load_assignment; REQUIREs that it loads.
Bootstrap loadWithCluster(const std::string& fields) {
  const LoadResult r = loadYaml(h2gate::testing::withCluster(fields + h2gate::testing::kEndpoint));
  INFO(allProblems(r.problems));
  REQUIRE(r.ok());
  return r.bootstrap;
}

// Equal, except that `b` (loaded from a dump) may hold kRedacted where `a`
// has a secret scalar.
bool sameNode(const YAML::Node& a, const YAML::Node& b) {
  const bool a_null = !a.IsDefined() || a.IsNull();
  const bool b_null = !b.IsDefined() || b.IsNull();
  if (a_null || b_null) return a_null == b_null;
  if (a.IsScalar() && b.IsScalar() && b.Scalar() == kRedacted) return true;
  if (a.Type() != b.Type()) return false;
  if (a.IsScalar()) return a.Scalar() == b.Scalar();
  if (a.size() != b.size()) return false;
  if (a.IsSequence()) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!sameNode(a[i], b[i])) return false;
    }
    return true;
  }
  auto x = a.begin();
  auto y = b.begin();
  for (; x != a.end(); ++x, ++y) {
    if (!sameNode(x->first, y->first) || !sameNode(x->second, y->second)) return false;
  }
  return true;
}

void checkSameAddress(const SocketAddress& a, const SocketAddress& b) {
  CHECK(a.address == b.address);
  CHECK(a.port_value == b.port_value);
}

// Field by field, Marks and source aside. The password is compared only when
// `password` is set: after a dump it is kRedacted.
void checkEquivalent(const Bootstrap& a, const Bootstrap& b) {
  checkSameAddress(a.admin.address, b.admin.address);
  CHECK(a.admin.enabled == b.admin.enabled);
  CHECK(a.admin.allowed_hosts == b.admin.allowed_hosts);
  CHECK(a.concurrency == b.concurrency);
  CHECK(a.drain_timeout == b.drain_timeout);
  CHECK(a.network_change_timeout == b.network_change_timeout);
  REQUIRE(a.listeners.size() == b.listeners.size());
  for (std::size_t i = 0; i < a.listeners.size(); ++i) {
    const Listener& x = a.listeners[i];
    const Listener& y = b.listeners[i];
    CHECK(x.name == y.name);
    checkSameAddress(x.address, y.address);
    REQUIRE(x.additional_addresses.size() == y.additional_addresses.size());
    for (std::size_t k = 0; k < x.additional_addresses.size(); ++k) {
      checkSameAddress(x.additional_addresses[k], y.additional_addresses[k]);
    }
    CHECK(x.max_request_headers_kb == y.max_request_headers_kb);
    CHECK(x.max_request_headers_count == y.max_request_headers_count);
    CHECK(x.direct_connect_timeout == y.direct_connect_timeout);
    CHECK(x.tunnel_half_close_timeout == y.tunnel_half_close_timeout);
    CHECK(x.request_headers_timeout == y.request_headers_timeout);
    CHECK(x.idle_timeout == y.idle_timeout);
    CHECK(x.tunnel_idle_timeout == y.tunnel_idle_timeout);
    CHECK(x.connect_response_timeout == y.connect_response_timeout);
    CHECK(x.stream_idle_timeout == y.stream_idle_timeout);
    CHECK(x.max_connections == y.max_connections);
    CHECK(x.send_buffer.mode == y.send_buffer.mode);
    CHECK(x.send_buffer.bytes == y.send_buffer.bytes);
    CHECK(x.tcp_notsent_lowat == y.tcp_notsent_lowat);
    CHECK(x.deny_own_addresses == y.deny_own_addresses);
    REQUIRE(x.filters.size() == y.filters.size());
    for (std::size_t k = 0; k < x.filters.size(); ++k) {
      CHECK(x.filters[k].name == y.filters[k].name);
      CHECK(sameNode(x.filters[k].typed_config, y.filters[k].typed_config));
    }
  }
  REQUIRE(a.clusters.size() == b.clusters.size());
  for (std::size_t i = 0; i < a.clusters.size(); ++i) {
    const Cluster& x = a.clusters[i];
    const Cluster& y = b.clusters[i];
    CHECK(x.name == y.name);
    CHECK(x.connect_timeout == y.connect_timeout);
    REQUIRE(x.endpoints.size() == y.endpoints.size());
    for (std::size_t k = 0; k < x.endpoints.size(); ++k) {
      checkSameAddress(x.endpoints[k], y.endpoints[k]);
    }
    REQUIRE(x.tls.has_value() == y.tls.has_value());
    if (x.tls) {
      CHECK(x.tls->sni == y.tls->sni);
      CHECK(x.tls->alpn_protocols == y.tls->alpn_protocols);
      CHECK(x.tls->tls_minimum_protocol_version == y.tls->tls_minimum_protocol_version);
      CHECK(x.tls->tls_maximum_protocol_version == y.tls->tls_maximum_protocol_version);
      CHECK(x.tls->trusted_ca == y.tls->trusted_ca);
      CHECK(x.tls->certificate_chain == y.tls->certificate_chain);
      CHECK(x.tls->private_key == y.tls->private_key);
      CHECK(x.tls->insecure_skip_verify == y.tls->insecure_skip_verify);
    }
    CHECK(x.http2.max_concurrent_streams == y.http2.max_concurrent_streams);
    CHECK(x.http2.initial_stream_window_size == y.http2.initial_stream_window_size);
    CHECK(x.http2.initial_connection_window_size == y.http2.initial_connection_window_size);
    REQUIRE(x.http2.connection_keepalive.has_value() == y.http2.connection_keepalive.has_value());
    if (x.http2.connection_keepalive) {
      CHECK(x.http2.connection_keepalive->interval == y.http2.connection_keepalive->interval);
      CHECK(x.http2.connection_keepalive->timeout == y.http2.connection_keepalive->timeout);
    }
    REQUIRE(x.credentials.has_value() == y.credentials.has_value());
    if (x.credentials) {
      CHECK(x.credentials->username == y.credentials->username);
      CHECK(x.credentials->password_file == y.credentials->password_file);
      CHECK(x.credentials->keyring == y.credentials->keyring);
      // y was loaded from a dump: an inline password is redacted, a
      // password_file and a keyring entry are read again.
      if (x.credentials->password_file.empty() && x.credentials->keyring.empty())
        CHECK(y.credentials->password == kRedacted);
      else
        CHECK(y.credentials->password == x.credentials->password);
    }
    REQUIRE(x.authentication.has_value() == y.authentication.has_value());
    if (x.authentication) {
      CHECK(x.authentication->scheme == y.authentication->scheme);
      CHECK(x.authentication->spn == y.authentication->spn);
      CHECK(x.authentication->client_keytab == y.authentication->client_keytab);
      CHECK(x.authentication->principal == y.authentication->principal);
    }
    CHECK(x.max_connections == y.max_connections);
    CHECK(x.max_requests == y.max_requests);
    CHECK(x.idle_timeout == y.idle_timeout);
    CHECK(x.send_buffer.mode == y.send_buffer.mode);
    CHECK(x.send_buffer.bytes == y.send_buffer.bytes);
    CHECK(x.tcp_notsent_lowat == y.tcp_notsent_lowat);
  }
}

// Dumps `b`, loads the dump back under the same source name, checks the two
// Bootstraps match and that dumping again gives the same text. Returns the dump.
std::string roundTrip(const Bootstrap& b) {
  const std::string dump = dumpYaml(b);
  INFO(dump);
  const LoadResult again = h2gate::loadConfigString(dump, b.source);
  INFO(allProblems(again.problems));
  REQUIRE(again.ok());
  checkEquivalent(b, again.bootstrap);
  CHECK(dumpYaml(again.bootstrap) == dump);
  // The running server's form (the filters' YAML dropped, their redacted
  // text kept) dumps the same.
  Bootstrap compact = again.bootstrap;
  dropFilterYaml(compact);
  for (const Listener& l : compact.listeners)
    for (const FilterConfig& f : l.filters) CHECK_FALSE(f.typed_config.IsMap());
  CHECK(dumpYaml(compact) == dump);
  return dump;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("every example dumps, reloads and dumps the same again", "[config][dump]") {
  ScopedEnv password("PROXY_PASSWORD", kPassword);
  // per_app.yaml's secrets: none may reach the dump either.
  ScopedEnv ci("CI_PROXY_PASSWORD", kPassword);
  ScopedEnv browser("BROWSER_TOKEN", kPassword);
  ScopedEnv lan("LAN_USER_PASSWORD", kPassword);
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kExampleDir)) {
    if (entry.path().extension() != ".yaml") continue;
    ++count;
    const std::string path = entry.path().string();
    const LoadResult r = h2gate::loadConfigFile(path);
    INFO(path << "\n" << allProblems(r.problems));
    REQUIRE(r.ok());
    const std::string dump = roundTrip(r.bootstrap);
    CHECK(dump.rfind("# h2gate effective configuration (secrets redacted) from " + path + "\n",
                     0) == 0);
    CHECK_FALSE(contains(dump, kPassword));
  }
  CHECK(count >= 9);
}

TEST_CASE("the built-in default dumps and reloads", "[config][dump]") {
  const Bootstrap b = defaultBootstrap();
  const std::string dump = roundTrip(b);
  CHECK(dump.rfind("# h2gate effective configuration (secrets redacted) from <default>\n", 0) == 0);
  // Filters without typed_config stay without it.
  CHECK_FALSE(contains(dump, "typed_config"));
}

TEST_CASE("the proxy password never appears in the dump", "[config][dump]") {
  SECTION("from the environment (upstream_auth.yaml)") {
    ScopedEnv password("PROXY_PASSWORD", kPassword);
    const LoadResult r = h2gate::loadConfigFile(kExampleDir + "/upstream_auth.yaml");
    INFO(allProblems(r.problems));
    REQUIRE(r.ok());
    REQUIRE(r.bootstrap.clusters.at(0).credentials->password == kPassword);
    const std::string dump = dumpYaml(r.bootstrap);
    INFO(dump);
    CHECK_FALSE(contains(dump, kPassword));
    CHECK(contains(dump, "password: \"[redacted]\""));
    CHECK(contains(dump, "username: alice"));
    const YAML::Node creds =
        YAML::Load(dump)["static_resources"]["clusters"][0]["proxy_credentials"];
    CHECK(creds["username"].as<std::string>() == "alice");
    CHECK(creds["password"].as<std::string>() == kRedacted);
  }
  SECTION("written in the YAML") {
    const Bootstrap b =
        loadWithCluster("    proxy_credentials: {username: bob, password: \"s3cr3t-Pa55\"}\n");
    const std::string dump = roundTrip(b);
    CHECK_FALSE(contains(dump, kPassword));
    CHECK(contains(dump, kRedacted));
    CHECK(contains(dump, "username: bob"));
  }
}

TEST_CASE("proxy_authentication: dumped in full, its password redacted", "[config][dump]") {
  h2gate::test::TempDir dir("dump");
  const std::string file = dir.write("pw", std::string(kPassword) + "\n");
  const std::string keytab = dir.write("svc.keytab", "not parsed by the loader");
  SECTION("negotiate with a keytab, NTLM credentials inline") {
    const Bootstrap b = loadWithCluster(R"(    proxy_authentication:
      scheme: auto
      spn: HTTP@proxy.corp.example
      client_keytab: {filename: )" + keytab +
                                        R"(}
      principal: svc@CORP.EXAMPLE
      credentials: {username: 'CORP\alice', password: "s3cr3t-Pa55"}
)");
    const std::string dump = roundTrip(b);
    CHECK_FALSE(contains(dump, kPassword));
    const YAML::Node a =
        YAML::Load(dump)["static_resources"]["clusters"][0]["proxy_authentication"];
    CHECK(a["scheme"].as<std::string>() == "auto");
    CHECK(a["spn"].as<std::string>() == "HTTP@proxy.corp.example");
    CHECK(a["client_keytab"]["filename"].as<std::string>() == keytab);
    CHECK(a["principal"].as<std::string>() == "svc@CORP.EXAMPLE");
    CHECK(a["credentials"]["username"].as<std::string>() == "CORP\\alice");
    CHECK(a["credentials"]["password"].as<std::string>() == kRedacted);
    CHECK_FALSE(YAML::Load(dump)["static_resources"]["clusters"][0]["proxy_credentials"]);
  }
  SECTION("a password_file is named, its content never shown") {
    const Bootstrap b = loadWithCluster(R"(    proxy_authentication:
      scheme: ntlm
      credentials: {username: alice@CORP, password_file: {filename: )" +
                                        file + R"(}}
)");
    REQUIRE(b.clusters[0].credentials->password == kPassword);
    const std::string dump = roundTrip(b);
    CHECK_FALSE(contains(dump, kPassword));
    const YAML::Node a =
        YAML::Load(dump)["static_resources"]["clusters"][0]["proxy_authentication"];
    CHECK(a["scheme"].as<std::string>() == "ntlm");
    CHECK(a["credentials"]["password_file"]["filename"].as<std::string>() == file);
    CHECK_FALSE(a["credentials"]["password"]);
  }
}

TEST_CASE("a keyring entry is named in the dump, its password never shown",
          "[config][dump][keyring]") {
  // The keyring as config's parser sees it (gateway/base/keyring.h).
  h2gate::keyring::setLookupForTesting(
      [](const std::string& name, h2gate::keyring::Entry* out, std::string*) {
        if (name != "corp") return h2gate::keyring::Status::NotFound;
        out->username = "CORP\\alice";
        out->password = kPassword;
        return h2gate::keyring::Status::Ok;
      });
  struct Restore {
    ~Restore() { h2gate::keyring::setLookupForTesting({}); }
  } restore;
  SECTION("in proxy_authentication") {
    const Bootstrap b = loadWithCluster(R"(    proxy_authentication:
      scheme: ntlm
      credentials: {keyring: corp}
)");
    REQUIRE(b.clusters[0].credentials->password == kPassword);
    const std::string dump = roundTrip(b);
    CHECK_FALSE(contains(dump, kPassword));
    const YAML::Node c =
        YAML::Load(dump)["static_resources"]["clusters"][0]["proxy_authentication"]["credentials"];
    CHECK(c["keyring"].as<std::string>() == "corp");
    CHECK(c["username"].as<std::string>() == "CORP\\alice");
    CHECK_FALSE(c["password"]);
    CHECK_FALSE(c["password_file"]);
  }
  SECTION("in proxy_credentials") {
    const Bootstrap b = loadWithCluster("    proxy_credentials: {keyring: corp}\n");
    const std::string dump = roundTrip(b);
    CHECK_FALSE(contains(dump, kPassword));
    CHECK(YAML::Load(dump)["static_resources"]["clusters"][0]["proxy_credentials"]["keyring"]
              .as<std::string>() == "corp");
  }
}

TEST_CASE("secret-named keys in filter typed_config are redacted", "[config][dump]") {
  const LoadResult r = loadYaml(kMinimalConfig);
  REQUIRE(r.ok());
  Bootstrap b = r.bootstrap;
  // No shipped filter has such fields; a future one (or a Bootstrap built in
  // code) might.
  b.listeners[0].filters[0].typed_config = YAML::Load(R"(
path: /var/log/h2gate.log
upstream_password: x-pass-1
nested:
  Api_TOKEN: x-tok-2
  list:
  - {client_secret: x-sec-3, keep: visible-1}
  - {secrets: [x-sec-4, x-sec-5]}
Proxy-Authorization: Basic x-auth-6
password_file: {path: x-file-7}
env_ref: ${SOME_VAR}
)");
  const std::string dump = dumpYaml(b);
  INFO(dump);
  for (const char* secret :
       {"x-pass-1", "x-tok-2", "x-sec-3", "x-sec-4", "x-sec-5", "x-auth-6", "x-file-7"}) {
    CHECK_FALSE(contains(dump, secret));
  }
  CHECK(contains(dump, "visible-1"));
  CHECK(contains(dump, "/var/log/h2gate.log"));
  CHECK(contains(dump, "${SOME_VAR}"));  // the reference as written, not its value

  const YAML::Node tc = YAML::Load(
      dump)["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"];
  CHECK(tc["upstream_password"].as<std::string>() == kRedacted);
  CHECK(tc["nested"]["Api_TOKEN"].as<std::string>() == kRedacted);
  CHECK(tc["nested"]["list"][0]["client_secret"].as<std::string>() == kRedacted);
  CHECK(tc["nested"]["list"][0]["keep"].as<std::string>() == "visible-1");
  CHECK(tc["nested"]["list"][1]["secrets"].as<std::string>() == kRedacted);
  CHECK(tc["Proxy-Authorization"].as<std::string>() == kRedacted);
  CHECK(tc["password_file"].as<std::string>() == kRedacted);

  // The Bootstrap's own node is not modified.
  CHECK(b.listeners[0].filters[0].typed_config["upstream_password"].as<std::string>() ==
        "x-pass-1");
}

TEST_CASE("isSecretKey matches password, secret, token, authorization in any case",
          "[config][dump]") {
  for (const char* key : {"password", "upstream_password", "PASSWORD", "client_secret", "Secret",
                          "api_token", "TOKENS", "authorization", "Proxy-Authorization"}) {
    INFO(key);
    CHECK(isSecretKey(key));
  }
  for (const char* key : {"path", "cluster", "username", "@type", "pass", "auth", ""}) {
    INFO(key);
    CHECK_FALSE(isSecretKey(key));
  }
}

TEST_CASE("a minimal config dumps with every default written out", "[config][dump]") {
  const std::string dump = roundTrip(loadWithCluster(""));
  INFO(dump);
  for (const char* line : {
           "socket_address: {address: 127.0.0.1, port_value: 9901}",
           "concurrency: 1",
           "drain_timeout: 30s",
           "network_change_timeout: 5s",
           "max_request_headers_kb: 64",
           "max_request_headers_count: 100",
           "direct_connect_timeout: 10s",
           "tunnel_half_close_timeout: 1s",
           "request_headers_timeout: 10s",
           "idle_timeout: 60s",
           "tunnel_idle_timeout: 3600s",
           "connect_response_timeout: 60s",
           "stream_idle_timeout: 300s",
           "max_connections: 4096",
           "connect_timeout: 5s",
           "cluster_name: c",
           "max_concurrent_streams: 100",
           "initial_stream_window_size: 1048576",
           "initial_connection_window_size: 16777216",
           "max_connections: 8",
           "max_requests: 4096",
           "common_http_protocol_options: {idle_timeout: 50s}",
       }) {
    CHECK(contains(dump, line));
  }
  // Plain TCP to the proxy, no credentials: nothing invented. Keepalive is
  // on by default, so it is written out.
  CHECK_FALSE(contains(dump, "transport_socket"));
  CHECK(contains(dump, "connection_keepalive: {interval: 30s, timeout: 5s}"));
  CHECK_FALSE(contains(dump, "proxy_credentials"));

  const YAML::Node root = YAML::Load(dump);
  CHECK(root["static_resources"]["clusters"][0]["circuit_breakers"]["thresholds"][0]
            ["max_connections"]
                .as<int>() == 8);
  CHECK(root["h2gate"]["drain_timeout"].as<std::string>() == "30s");
}

TEST_CASE("durations with fractions round-trip", "[config][dump]") {
  const LoadResult r = loadYaml(R"(h2gate: {drain_timeout: 1m, network_change_timeout: 250ms}
static_resources:
  listeners:
  - name: l
    address: {socket_address: {address: 127.0.0.1, port_value: 3128}}
    direct_connect_timeout: 1500us
    tunnel_half_close_timeout: 0.000000007s
    request_headers_timeout: 2.5s
    idle_timeout: 90s
    tunnel_idle_timeout: 2h
    connect_response_timeout: 1500ms
    stream_idle_timeout: 2m
    max_connections: 7
    filter_chains:
    - filters:
      - name: h2gate.filters.forward_proxy
  clusters:
  - name: a
    connect_timeout: 0.25s
    load_assignment:
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: p.example, port_value: 443}}}
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        common_http_protocol_options: {idle_timeout: 1.5s}
        auto_config:
          http2_protocol_options:
            connection_keepalive: {interval: 2.5s, timeout: {seconds: 1, nanos: 5}}
  - name: b
    connect_timeout: 250ms
    circuit_breakers: {thresholds: [{max_requests: 3}]}
    load_assignment:
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: p.example, port_value: 443}}}
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        common_http_protocol_options: {idle_timeout: 0s}
)");
  INFO(allProblems(r.problems));
  REQUIRE(r.ok());
  const Bootstrap& b = r.bootstrap;
  CHECK(b.clusters.at(0).connect_timeout == milliseconds(250));
  CHECK(b.clusters.at(1).connect_timeout == milliseconds(250));
  const std::string dump = roundTrip(b);
  INFO(dump);
  CHECK(contains(dump, "drain_timeout: 60s"));
  CHECK(contains(dump, "network_change_timeout: 0.250s"));
  CHECK(contains(dump, "direct_connect_timeout: 0.001500s"));
  CHECK(contains(dump, "tunnel_half_close_timeout: 0.000000007s"));
  CHECK(contains(dump, "request_headers_timeout: 2.500s"));
  CHECK(contains(dump, "idle_timeout: 90s"));
  CHECK(contains(dump, "tunnel_idle_timeout: 7200s"));
  CHECK(contains(dump, "connect_response_timeout: 1.500s"));
  CHECK(contains(dump, "stream_idle_timeout: 120s"));
  CHECK(contains(dump, "max_connections: 7"));
  CHECK(contains(dump, "connection_keepalive: {interval: 2.500s, timeout: 1.000000005s}"));
  const YAML::Node clusters = YAML::Load(dump)["static_resources"]["clusters"];
  CHECK(clusters[0]["connect_timeout"].as<std::string>() == "0.250s");
  CHECK(clusters[1]["connect_timeout"].as<std::string>() == "0.250s");
  const char* const options = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";
  CHECK(clusters[0]["typed_extension_protocol_options"][options]["common_http_protocol_options"]
                ["idle_timeout"]
                    .as<std::string>() == "1.500s");
  CHECK(clusters[1]["typed_extension_protocol_options"][options]["common_http_protocol_options"]
                ["idle_timeout"]
                    .as<std::string>() == "0s");
  CHECK(clusters[0]["circuit_breakers"]["thresholds"][0]["max_requests"].as<int>() == 4096);
  CHECK(clusters[1]["circuit_breakers"]["thresholds"][0]["max_requests"].as<int>() == 3);
}

TEST_CASE("formatDuration writes Envoy's form", "[config][dump]") {
  using std::chrono::microseconds;
  using std::chrono::nanoseconds;
  CHECK(formatDuration(seconds(0)) == "0s");
  CHECK(formatDuration(seconds(5)) == "5s");
  CHECK(formatDuration(milliseconds(250)) == "0.250s");
  CHECK(formatDuration(milliseconds(1001)) == "1.001s");
  CHECK(formatDuration(microseconds(1500)) == "0.001500s");
  CHECK(formatDuration(nanoseconds(1)) == "0.000000001s");
  CHECK(formatDuration(std::chrono::hours(2)) == "7200s");
  CHECK(formatDuration(nanoseconds(-5)) == "0s");
  for (const Duration d : {Duration(milliseconds(250)), Duration(nanoseconds(999999999)),
                           Duration(microseconds(123456)), Duration(seconds(86400))}) {
    CHECK(parseDuration(formatDuration(d)) == d);
  }
}

TEST_CASE("TLS, IPv6 and awkward strings round-trip", "[config][dump]") {
  // The loader wants readable files; any file will do.
  const std::string file = kExampleDir + "/default.yaml";
  const LoadResult r = loadYaml(R"(admin:
  address: {socket_address: {address: "::1", port_value: 9902}}
h2gate: {concurrency: 3}
static_resources:
  listeners:
  - name: "null"
    address: {socket_address: {address: "::1", port_value: 0}}
    additional_addresses:
    - address: {socket_address: {address: 127.0.0.2, port_value: 3130}}
    filter_chains:
    - filters:
      - name: h2gate.filters.access_log
        typed_config: {"@type": type.googleapis.com/h2gate.filters.access_log.v1.Config, path: "/tmp/a: b.log"}
      - name: h2gate.filters.forward_proxy
        typed_config: {cluster: "true"}
  clusters:
  - name: "true"
    proxy_credentials: {username: "yes", password: ""}
    circuit_breakers: {thresholds: [{max_connections: 42}]}
    load_assignment:
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: "2001:db8::1", port_value: 8443}}}
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: p2.example, port_value: 443}}}
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        sni: proxy.example.net
        common_tls_context:
          alpn_protocols: [http/1.1]
          tls_params: {tls_minimum_protocol_version: TLSv1_3, tls_maximum_protocol_version: TLSv1_3}
          validation_context:
            trusted_ca: {filename: )" +
                                file + R"(}
            trust_chain_verification: ACCEPT_UNTRUSTED
          tls_certificates:
          - certificate_chain: {filename: )" +
                                file + R"(}
            private_key: {filename: )" +
                                file + R"(}
)");
  INFO(allProblems(r.problems));
  REQUIRE(r.ok());
  const std::string dump = roundTrip(r.bootstrap);
  INFO(dump);
  CHECK(contains(dump, "private_key: {filename: " + file + "}"));  // a path, not key material
  CHECK(contains(dump, "trust_chain_verification: ACCEPT_UNTRUSTED"));
  CHECK(contains(dump, "tls_maximum_protocol_version: TLSv1_3"));
}

TEST_CASE("the source comment stays on one line", "[config][dump]") {
  Bootstrap b = defaultBootstrap();
  b.source = "evil\nadmin: {}";
  const std::string dump = dumpYaml(b);
  CHECK(dump.rfind("# h2gate effective configuration (secrets redacted) from evil admin: {}\n",
                   0) == 0);
  const LoadResult again = h2gate::loadConfigString(dump, "x");
  INFO(allProblems(again.problems));
  CHECK(again.ok());
}

TEST_CASE("dropFilterYaml keeps the redacted text only, and the dump the same", "[config][dump]") {
  LoadResult r = h2gate::loadConfigString(
      std::string(h2gate::testing::kMinimalConfig) +
          "    deny_own_addresses: false\n"
          "admin:\n"
          "  address: {socket_address: {address: 127.0.0.1, port_value: 1}}\n"
          "  allowed_hosts: [h2gate.example, \"mon.example:9901\"]\n",
      "cfg.yaml");
  INFO(allProblems(r.problems));
  REQUIRE(r.ok());
  const std::string before = roundTrip(r.bootstrap);
  CHECK(contains(before, "deny_own_addresses: false"));
  CHECK(contains(before, "allowed_hosts: [h2gate.example, mon.example:9901]"));

  // A filter with a secret: the tree goes, the redacted text stays.
  Bootstrap b = r.bootstrap;
  FilterConfig& f = b.listeners[0].filters[0];
  f.typed_config.reset(YAML::Load("{routes: [], nested: {api_token: s3cret}}"));
  const YAML::Node shared = f.typed_config;  // another copy of the Bootstrap would share it
  dropFilterYaml(b);
  CHECK(f.typed_config.IsNull());
  CHECK_FALSE(contains(f.redacted_yaml, "s3cret"));
  CHECK(contains(f.redacted_yaml, "api_token: \"[redacted]\""));
  CHECK(shared["nested"]["api_token"].as<std::string>() == "s3cret");  // untouched
  CHECK(contains(dumpYaml(b), "api_token: \"[redacted]\""));
}
