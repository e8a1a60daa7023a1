#include "config/loader.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "filters/registry.h"
#include "tests/support/config_util.h"

using namespace h2gate::config;
using h2gate::testing::allProblems;
using h2gate::testing::hasProblem;
using h2gate::testing::kEndpoint;
using h2gate::testing::ScopedEnv;
using h2gate::testing::withCluster;
using std::chrono::seconds;

namespace {

// Every section of the Envoy-shaped config at once: the admin endpoint, a
// listener with a filter chain, a cluster with an Envoy TLS transport socket
// and HTTP/2 protocol options.
const char* kFullConfig = R"(admin:
  address: {socket_address: {address: 127.0.0.1, port_value: 9901}}
static_resources:
  listeners:
  - name: local_proxy
    address: {socket_address: {address: 127.0.0.1, port_value: 3128}}
    filter_chains:
    - filters:
      - name: h2gate.filters.access_log
      - name: h2gate.filters.forward_proxy      # terminal: routes to a cluster or DIRECT
        typed_config: {cluster: corp_proxy}
  clusters:
  - name: corp_proxy
    connect_timeout: 5s
    load_assignment:
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: proxy.example.net, port_value: 443}}}
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        sni: proxy.example.net
        common_tls_context:
          alpn_protocols: [h2, http/1.1]
          tls_params: {tls_minimum_protocol_version: TLSv1_2}
          validation_context:
            trusted_ca: {filename: /etc/ssl/certs/ca-certificates.crt}
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        auto_config:
          http2_protocol_options:
            max_concurrent_streams: 100
            initial_stream_window_size: 1048576
            initial_connection_window_size: 16777216
            connection_keepalive: {interval: 30s, timeout: 5s}
)";

using h2gate::testing::kMinimalConfig;
using h2gate::testing::loadYaml;

// A listener with a fixed send buffer and tcp_notsent_lowat, then a cluster
// c (whose fields follow, indented 4).
std::string sendBufferBase() {
  return std::string(kMinimalConfig) +
         "    send_buffer: {mode: fixed, bytes: 65536}\n"
         "    tcp_notsent_lowat: 16384\n"
         "  clusters:\n"
         "  - name: c\n"
         "    load_assignment:\n"
         "      endpoints: [{lb_endpoints: [{endpoint: {address: "
         "{socket_address: {address: proxy.test, port_value: 443}}}}]}]\n";
}

// Configs that are wrong, and every problem h2gate reports for each: the
// whole text a user sees (file:line:column: field: message), in the order
// reported. One row a case; a failure names its row.
struct BadConfig {
  std::string name;
  std::string yaml;
  std::vector<std::string> problems;
};

std::vector<BadConfig> badConfigs() {
  const std::string k = kMinimalConfig;
  const std::string nested =
      ": YAML nested more than 64 levels deep (sequences and mappings inside each other): gave "
      "up at this one, level 65 (an h2gate config needs about ten)";
  const std::string h2 =
      "static_resources.clusters[0].typed_extension_protocol_options[\"envoy.extensions.upstreams."
      "http.v3.HttpProtocolOptions\"].auto_config.http2_protocol_options.";
  const std::string common =
      "static_resources.clusters[0].typed_extension_protocol_options[\"envoy.extensions."
      "upstreams.http.v3.HttpProtocolOptions\"].common_http_protocol_options.";
  const std::string options_key =
      "    typed_extension_protocol_options:\n"
      "      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:\n";
  const std::string tc = "static_resources.clusters[0].transport_socket.typed_config.";
  const std::string l0 = "static_resources.listeners[0].";
  const std::string send_buffer_base = sendBufferBase();
  const std::string bad_duration = k +
                                   "  clusters:\n"
                                   "  - name: c\n"
                                   "    connect_timeout: 5x\n" +
                                   kEndpoint;
  std::string flow_mappings = "a: 1\nb: ";
  for (int i = 0; i < 100000; ++i) flow_mappings += "{k: ";
  std::string block_mappings;
  for (int i = 0; i < 100; ++i) {
    block_mappings += std::string(static_cast<size_t>(i) * 2, ' ') + "k:\n";
  }
  std::string block_sequences;
  for (int i = 0; i < 100; ++i) block_sequences += "- ";
  block_sequences += "x\n";

  return {
      {"a bad duration, at the value (line 10, column 22: the \"5x\")",
       bad_duration,
       {"cfg.yaml:10:22: static_resources.clusters[0].connect_timeout: expected a duration like "
        "5s"}},
      {"a bad duration two lines further down",
       "\n\n" + bad_duration,
       {"cfg.yaml:12:22: static_resources.clusters[0].connect_timeout: expected a duration like "
        "5s"}},
      {"unknown keys, at the key",
       k + "    per_connection_buffer_limit_bytes: 1024\n"
           "nodes: {}\n",
       {"cfg.yaml:8:5: static_resources.listeners[0].per_connection_buffer_limit_bytes: "
        "unknown field (expected one of: name, address, additional_addresses, "
        "filter_chains, max_request_headers_kb, max_request_headers_count, "
        "direct_connect_timeout, tunnel_half_close_timeout, request_headers_timeout, "
        "idle_timeout, tunnel_idle_timeout, connect_response_timeout, "
        "stream_idle_timeout, max_connections, send_buffer, tcp_notsent_lowat, "
        "deny_own_addresses)",
        "cfg.yaml:9:1: nodes: unknown field (expected one of: admin, static_resources, h2gate)"}},
      {"wrong types, at the value",
       R"(admin: [1, 2]
h2gate: {concurrency: two}
static_resources:
  listeners:
  - name: {a: 1}
    address: {socket_address: {address: 127.0.0.1, port_value: "x"}}
    filter_chains: {filters: []}
)",
       {"cfg.yaml:1:8: admin: expected a mapping",
        "cfg.yaml:2:23: h2gate.concurrency: expected an integer in 1..1024",
        "cfg.yaml:5:5: static_resources.listeners[0].filter_chains: a listener needs one filter "
        "chain ending in h2gate.filters.forward_proxy",
        "cfg.yaml:5:11: static_resources.listeners[0].name: expected a string",
        "cfg.yaml:6:64: static_resources.listeners[0].address.socket_address.port_value: "
        "expected an integer in 0..65535",
        "cfg.yaml:7:20: static_resources.listeners[0].filter_chains: expected a list"}},
      {"out-of-range values",
       k + R"(  - name: l2
    address: {socket_address: {address: 127.0.0.1, port_value: 65536}}
    max_request_headers_kb: 0
    max_request_headers_count: 1001
    filter_chains: [{filters: [{name: h2gate.filters.forward_proxy}]}]
  clusters:
  - name: c
    connect_timeout: 0s
)" + kEndpoint +
           R"(    circuit_breakers: {thresholds: [{max_connections: 0}]}
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        auto_config:
          http2_protocol_options:
            max_concurrent_streams: 0
            initial_stream_window_size: 65534
            initial_connection_window_size: 2147483648
            connection_keepalive: {timeout: 0s}
)",
       {"cfg.yaml:9:64: static_resources.listeners[1].address.socket_address.port_value: must be "
        "in 0..65535, got 65536",
        "cfg.yaml:10:29: static_resources.listeners[1].max_request_headers_kb: must be in 1..1024, "
        "got 0",
        "cfg.yaml:11:32: static_resources.listeners[1].max_request_headers_count: must be in "
        "1..1000, got 1001",
        "cfg.yaml:15:22: static_resources.clusters[0].connect_timeout: must be greater than 0",
        "cfg.yaml:20:55: static_resources.clusters[0].circuit_breakers.thresholds[0]."
        "max_connections: must be in 1..10000, got 0",
        "cfg.yaml:25:37: " + h2 + "max_concurrent_streams: must be in 1..2147483647, got 0",
        "cfg.yaml:26:41: " + h2 +
            "initial_stream_window_size: must be in 65535..2147483647, got "
            "65534",
        "cfg.yaml:27:45: " + h2 +
            "initial_connection_window_size: must be in 65535..2147483647, got 2147483648",
        "cfg.yaml:28:45: " + h2 + "connection_keepalive.timeout: must be greater than 0"}},
      {"an endpoint port 0",
       withCluster("    load_assignment:\n"
                   "      endpoints:\n"
                   "      - lb_endpoints:\n"
                   "        - endpoint: {address: {socket_address: {address: p.example, "
                   "port_value: 0}}}\n"),
       {"cfg.yaml:13:81: static_resources.clusters[0].load_assignment.endpoints[0].lb_endpoints[0]."
        "endpoint.address.socket_address.port_value: must be in 1..65535, got 0"}},
      {"a dangling cluster reference, at the cluster key",
       k +
           "        typed_config: {cluster: nope}\n"
           "  clusters:\n"
           "  - name: c\n" +
           kEndpoint,
       {"cfg.yaml:8:33: static_resources.listeners[0].filter_chains[0].filters[0].typed_config."
        "cluster: unknown cluster 'nope' (known: c)"}},
      {"a cluster reference with no clusters defined",
       k + "        typed_config: {cluster: x}\n",
       {"cfg.yaml:8:33: static_resources.listeners[0].filter_chains[0].filters[0].typed_config."
        "cluster: unknown cluster 'x' (no clusters are defined)"}},
      {"duplicate listener and cluster names",
       k + R"(  - name: l
    address: {socket_address: {address: 127.0.0.1, port_value: 3129}}
    filter_chains: [{filters: [{name: h2gate.filters.forward_proxy}]}]
  clusters:
  - name: c
)" + kEndpoint +
           "  - name: c\n" + kEndpoint,
       {"cfg.yaml:8:5: static_resources.listeners[1].name: duplicate listener name 'l' (also "
        "static_resources.listeners[0])",
        "cfg.yaml:17:5: static_resources.clusters[1].name: duplicate cluster name 'c' (also "
        "static_resources.clusters[0])"}},
      {"two listeners on one address",
       k + R"(  - name: l2
    address: {socket_address: {address: 127.0.0.1, port_value: 3128}}
    filter_chains: [{filters: [{name: h2gate.filters.forward_proxy}]}]
)",
       {"cfg.yaml:8:5: static_resources.listeners[1].address: address 127.0.0.1:3128 is already "
        "used by listener 'l'"}},
      {"a listener on the admin interface's address",
       "admin: {address: {socket_address: {address: 127.0.0.1, port_value: 3128}}}\n" + k,
       {"cfg.yaml:4:5: static_resources.listeners[0].address: address 127.0.0.1:3128 is already "
        "used by the admin interface"}},
      {"every problem is reported, in file order",
       R"(static_resources:
  listeners:
  - name: l
    address: {socket_address: {address: localhost, port_value: 3128}}
    filter_chains:
    - filters:
      - name: h2gate.filters.nope
      - name: h2gate.filters.forward_proxy
        typed_config: {cluster: missing}
    - filters: []
  clusters:
  - name: c
    connect_timeout: soon
    load_assignment: {endpoints: []}
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
        common_tls_context:
          alpn_protocols: [h3]
          tls_params: {tls_minimum_protocol_version: TLSv1_1}
          validation_context:
            trusted_ca: {filename: /nonexistent/ca.pem}
            trust_chain_verification: MAYBE
)",
       {"cfg.yaml:4:41: static_resources.listeners[0].address.socket_address.address: expected "
        "an IP address such as 127.0.0.1 or ::1 (listeners do not resolve host names), got "
        "'localhost'",
        "cfg.yaml:7:15: static_resources.listeners[0].filter_chains[0].filters[0].name: unknown "
        "filter 'h2gate.filters.nope' (known: h2gate.filters.access_log, h2gate.filters.acl, "
        "h2gate.filters.forward_proxy, h2gate.filters.proxy_auth, "
        "h2gate.filters.upstream_headers)",
        "cfg.yaml:9:33: static_resources.listeners[0].filter_chains[0].filters[1].typed_config."
        "cluster: unknown cluster 'missing' (known: c)",
        "cfg.yaml:10:7: static_resources.listeners[0].filter_chains[1]: only one filter chain is "
        "supported",
        "cfg.yaml:12:5: static_resources.clusters[0].load_assignment: a cluster needs at least "
        "one endpoint",
        "cfg.yaml:13:22: static_resources.clusters[0].connect_timeout: expected a duration like "
        "5s",
        "cfg.yaml:18:18: " + tc +
            "@type: expected type.googleapis.com/envoy.extensions.transport_sockets.tls.v3."
            "UpstreamTlsContext, got 'type.googleapis.com/envoy.extensions.transport_sockets.tls."
            "v3.DownstreamTlsContext'",
        "cfg.yaml:20:27: " + tc +
            "common_tls_context.alpn_protocols: unsupported protocol 'h3' (expected h2, "
            "http/1.1)",
        "cfg.yaml:21:54: " + tc +
            "common_tls_context.tls_params.tls_minimum_protocol_version: TLS versions below "
            "TLSv1_2 are not supported",
        "cfg.yaml:23:36: " + tc +
            "common_tls_context.validation_context.trusted_ca.filename: cannot read "
            "'/nonexistent/ca.pem': No such file or directory",
        "cfg.yaml:24:39: " + tc +
            "common_tls_context.validation_context.trust_chain_verification: expected one of "
            "VERIFY_TRUST_CHAIN, ACCEPT_UNTRUSTED, got 'MAYBE'"}},
      {"missing required fields, at the parent",
       R"(static_resources:
  listeners:
  - address: {socket_address: {port_value: 3128}}
    filter_chains: [{filters: [{name: h2gate.filters.forward_proxy}]}]
  clusters:
  - name: c
    transport_socket: {typed_config: {}}
    proxy_credentials: {username: u}
)",
       {"cfg.yaml:3:5: static_resources.listeners[0].name: missing required field",
        "cfg.yaml:3:31: static_resources.listeners[0].address.socket_address.address: missing "
        "required field",
        "cfg.yaml:6:5: static_resources.clusters[0].load_assignment: a cluster needs at least one "
        "endpoint",
        "cfg.yaml:7:23: static_resources.clusters[0].transport_socket.name: missing required "
        "field",
        "cfg.yaml:8:24: static_resources.clusters[0].proxy_credentials.password: missing "
        "required field"}},
      {"a listener address that is not an IP literal, an endpoint that is no host name",
       R"(static_resources:
  listeners:
  - name: l
    address: {socket_address: {address: 127.0.0.1, port_value: 3128}}
    additional_addresses: [{address: {socket_address: {address: "[::1]", port_value: 3129}}}]
    filter_chains: [{filters: [{name: h2gate.filters.forward_proxy}]}]
  clusters:
  - name: c
    load_assignment:
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: "bad host", port_value: 443}}}
)",
       {"cfg.yaml:5:65: static_resources.listeners[0].additional_addresses[0].address."
        "socket_address.address: expected an IP address such as 127.0.0.1 or ::1 (listeners do "
        "not resolve host names), got '[::1]'",
        "cfg.yaml:12:58: static_resources.clusters[0].load_assignment.endpoints[0]."
        "lb_endpoints[0].endpoint.address.socket_address.address: expected a host name or IP "
        "address, got 'bad host'"}},
      {"TLS odds and ends",
       withCluster(std::string(kEndpoint) + R"(    transport_socket:
      name: envoy.transport_sockets.raw_buffer
      typed_config:
        common_tls_context:
          alpn_protocols: []
          tls_params: {tls_minimum_protocol_version: TLSv1_3, tls_maximum_protocol_version: TLSv1_2}
          tls_certificates:
          - certificate_chain: {filename: /nonexistent/cert.pem}
          - certificate_chain: {filename: /nonexistent/cert.pem}
)"),
       {"cfg.yaml:15:13: static_resources.clusters[0].transport_socket.name: expected one of "
        "envoy.transport_sockets.tls, got 'envoy.transport_sockets.raw_buffer'",
        "cfg.yaml:18:27: " + tc +
            "common_tls_context.alpn_protocols: must list at least one of h2, http/1.1",
        "cfg.yaml:19:93: " + tc +
            "common_tls_context.tls_params.tls_maximum_protocol_version: is below "
            "tls_minimum_protocol_version TLSv1_3",
        "cfg.yaml:21:13: " + tc +
            "common_tls_context.tls_certificates[0].private_key: missing required field",
        "cfg.yaml:21:43: " + tc +
            "common_tls_context.tls_certificates[0].certificate_chain.filename: cannot read "
            "'/nonexistent/cert.pem': No such file or directory",
        "cfg.yaml:22:13: " + tc +
            "common_tls_context.tls_certificates[1]: only one client certificate is supported"}},
      {"more than one YAML document",
       k + "---\nadmin: {}\n",
       {"cfg.yaml:8:1: expected one YAML document, found more ('---' starts another)"}},
      {"\",\" (it hangs yaml-cpp's LoadAll)",
       ",",
       {"cfg.yaml:1:1: YAML syntax error: unexpected character"}},
      {"an empty config",
       "",
       {"cfg.yaml: static_resources.listeners: at least one listener is required"}},
      {"listener limits, each at its value",
       k + "    request_headers_timeout: 0s\n"
           "    idle_timeout: -1s\n"
           "    tunnel_idle_timeout: soon\n"
           "    connect_response_timeout: 0ms\n"
           "    max_connections: 0\n"
           "    stream_idle_timeout: 0s\n",
       {"cfg.yaml:8:30: " + l0 + "request_headers_timeout: must be greater than 0s",
        "cfg.yaml:9:19: " + l0 + "idle_timeout: expected a duration like 5s",
        "cfg.yaml:10:26: " + l0 + "tunnel_idle_timeout: expected a duration like 5s",
        "cfg.yaml:11:31: " + l0 + "connect_response_timeout: must be greater than 0s",
        "cfg.yaml:12:22: " + l0 + "max_connections: must be in 1..1000000, got 0",
        "cfg.yaml:13:26: " + l0 + "stream_idle_timeout: must be greater than 0s"}},
      {"send_buffer mode fixed without bytes",
       send_buffer_base + "    send_buffer: {mode: fixed}\n",
       {"cfg.yaml:14:18: static_resources.clusters[0].send_buffer.bytes: missing required "
        "field"}},
      {"send_buffer bytes without mode fixed",
       send_buffer_base + "    send_buffer: {bytes: 65536}\n",
       {"cfg.yaml:14:26: static_resources.clusters[0].send_buffer.bytes: applies only to mode: "
        "fixed"}},
      {"send_buffer mode unknown",
       send_buffer_base + "    send_buffer: {mode: huge}\n",
       {"cfg.yaml:14:25: static_resources.clusters[0].send_buffer.mode: expected one of auto, "
        "fixed, ideal_backlog, got 'huge'"}},
      {"send_buffer bytes too few",
       send_buffer_base + "    send_buffer: {mode: fixed, bytes: 100}\n",
       {"cfg.yaml:14:39: static_resources.clusters[0].send_buffer.bytes: must be in "
        "4096..16777216, got 100"}},
      {"tcp_notsent_lowat too large",
       send_buffer_base + "    tcp_notsent_lowat: 99999999\n",
       {"cfg.yaml:14:24: static_resources.clusters[0].tcp_notsent_lowat: must be in "
        "0..16777216, got 99999999"}},
      {"network_change_timeout not a duration",
       "h2gate:\n  network_change_timeout: soon\n" + k,
       {"cfg.yaml:2:27: h2gate.network_change_timeout: expected a duration like 5s"}},
      {"network_change_timeout misspelt",
       "h2gate: {network_changed_timeout: 5s}\n" + k,
       {"cfg.yaml:1:10: h2gate.network_changed_timeout: unknown field (expected one of: "
        "concurrency, drain_timeout, network_change_timeout)"}},
      {"cluster max_requests and idle_timeout, each at its value",
       withCluster(std::string(kEndpoint) +
                   "    circuit_breakers: {thresholds: [{max_requests: 0}]}\n" + options_key +
                   "        common_http_protocol_options: {idle_timeout: -1s, max_headers_count: "
                   "5}\n"),
       {"cfg.yaml:14:52: static_resources.clusters[0].circuit_breakers.thresholds[0]."
        "max_requests: must be in 1..1000000, got 0",
        "cfg.yaml:17:54: " + common + "idle_timeout: expected a duration like 5s",
        "cfg.yaml:17:59: " + common +
            "max_headers_count: unknown field (expected one of: idle_timeout)"}},
      {"cluster max_requests above the range",
       withCluster(std::string(kEndpoint) + "    circuit_breakers:\n"
                                            "      thresholds:\n"
                                            "      - max_requests: 1000001\n"),
       {"cfg.yaml:16:23: static_resources.clusters[0].circuit_breakers.thresholds[0]."
        "max_requests: must be in 1..1000000, got 1000001"}},
      {"admin.allowed_hosts: each bad entry",
       k + "admin:\n"
           "  address: {socket_address: {address: 127.0.0.1, port_value: 9901}}\n"
           "  allowed_hosts: [\"a b\", \"x:99999\", \"fd00::1\"]\n",
       {"cfg.yaml:10:18: admin.allowed_hosts: entry 0: expected a host name, an IP address or "
        "either with :PORT, got 'a b'",
        "cfg.yaml:10:18: admin.allowed_hosts: entry 1: invalid port in 'x:99999' (expected "
        "0-65535)",
        "cfg.yaml:10:18: admin.allowed_hosts: entry 2: put IPv6 addresses in brackets, e.g. "
        "[fd00::1]:9901 (got 'fd00::1')"}},
      {"nesting: 100,000 '[' (yaml-cpp alone: 'bad file' at the end, after 1.9 GB for 8 MiB)",
       std::string(100000, '['),
       {"cfg.yaml:1:65" + nested}},
      {"nesting: flow mappings on a later line",
       flow_mappings,
       {"cfg.yaml:2:" + std::to_string(4 + 64 * 4) + nested}},
      {"nesting: block mappings, one level per line", block_mappings, {"cfg.yaml:65:129" + nested}},
      {"nesting: block sequences on one line", block_sequences, {"cfg.yaml:1:129" + nested}},
  };
}

}  // namespace

TEST_CASE("an Envoy-shaped config loads with every field", "[config][loader]") {
  const LoadResult r = loadYaml(kFullConfig);
  INFO(allProblems(r.problems));
  REQUIRE(r.ok());
  const Bootstrap& b = r.bootstrap;
  CHECK(b.source == "cfg.yaml");
  CHECK(b.admin.address.address == "127.0.0.1");
  CHECK(b.admin.address.port_value == 9901);
  REQUIRE(b.listeners.size() == 1);
  const Listener& l = b.listeners[0];
  CHECK(l.name == "local_proxy");
  CHECK(l.address.address == "127.0.0.1");
  CHECK(l.address.port_value == 3128);
  CHECK(l.additional_addresses.empty());
  REQUIRE(l.filters.size() == 2);
  CHECK(l.filters[0].name == h2gate::filters::kAccessLog);
  CHECK(l.filters[1].name == h2gate::filters::kForwardProxy);
  CHECK(l.filters[1].typed_config["cluster"].as<std::string>() == "corp_proxy");
  CHECK(l.filters[1].mark.line == 10);
  CHECK(l.filters[1].mark.column == 15);
  CHECK(l.max_request_headers_kb == 64);
  CHECK(l.max_request_headers_count == 100);

  REQUIRE(b.clusters.size() == 1);
  const Cluster& c = b.clusters[0];
  CHECK(c.name == "corp_proxy");
  CHECK(c.connect_timeout == seconds(5));
  REQUIRE(c.endpoints.size() == 1);
  CHECK(c.endpoints[0].address == "proxy.example.net");
  CHECK(c.endpoints[0].port_value == 443);
  REQUIRE(c.tls.has_value());
  CHECK(c.tls->sni == "proxy.example.net");
  CHECK(c.tls->alpn_protocols == std::vector<std::string>{"h2", "http/1.1"});
  CHECK(c.tls->tls_minimum_protocol_version == "TLSv1_2");
  CHECK(c.tls->tls_maximum_protocol_version.empty());
  CHECK(c.tls->trusted_ca == "/etc/ssl/certs/ca-certificates.crt");
  CHECK_FALSE(c.tls->insecure_skip_verify);
  CHECK(c.http2.max_concurrent_streams == 100);
  CHECK(c.http2.initial_stream_window_size == 1048576);
  CHECK(c.http2.initial_connection_window_size == 16777216);
  REQUIRE(c.http2.connection_keepalive.has_value());
  CHECK(c.http2.connection_keepalive->interval == seconds(30));
  CHECK(c.http2.connection_keepalive->timeout == seconds(5));
  CHECK_FALSE(c.credentials.has_value());
  CHECK(c.max_connections == 8);
  CHECK(b.findCluster("corp_proxy") == &c);
}

TEST_CASE("h2gate's extra fields load", "[config][loader]") {
  ScopedEnv pw("H2GATE_TEST_PROXY_PASSWORD", "pa:ss");
  const std::string yaml = std::string(R"(h2gate: {concurrency: 4, drain_timeout: 0.5s}
static_resources:
  listeners:
  - name: l
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    additional_addresses:
    - address: {socket_address: {address: "::1", port_value: 3128}}
    max_request_headers_kb: 96
    max_request_headers_count: 200
    filter_chains:
    - filters:
      - name: h2gate.filters.access_log
        typed_config: {"@type": type.googleapis.com/h2gate.filters.access_log.v1.Config, path: /dev/stderr}
      - name: h2gate.filters.forward_proxy
        typed_config:
          "@type": type.googleapis.com/h2gate.filters.forward_proxy.v1.Config
          cluster: c
  clusters:
  - name: c
    connect_timeout: 250ms
    proxy_credentials: {username: me, password: "${H2GATE_TEST_PROXY_PASSWORD}"}
    circuit_breakers: {thresholds: [{max_connections: 3}]}
)") + kEndpoint +
                           R"(    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        common_tls_context:
          alpn_protocols: [http/1.1]
          tls_params: {tls_minimum_protocol_version: TLS_AUTO, tls_maximum_protocol_version: TLSv1_3}
          validation_context: {trust_chain_verification: ACCEPT_UNTRUSTED}
          tls_certificates:
          - certificate_chain: {filename: /etc/ssl/certs/ca-certificates.crt}
            private_key: {filename: /etc/ssl/certs/ca-certificates.crt}
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        auto_config:
          http2_protocol_options: {max_concurrent_streams: 2147483647, initial_stream_window_size: 65535}
)";
  const LoadResult r = loadYaml(yaml);
  INFO(allProblems(r.problems));
  REQUIRE(r.ok());
  const Bootstrap& b = r.bootstrap;
  CHECK(b.concurrency == 4);
  CHECK(b.drain_timeout == std::chrono::milliseconds(500));
  CHECK(b.admin.address.address == "127.0.0.1");  // default when absent
  CHECK(b.admin.address.port_value == 9901);
  const Listener& l = b.listeners.at(0);
  CHECK(l.address.port_value == 0);
  REQUIRE(l.additional_addresses.size() == 1);
  CHECK(l.additional_addresses[0].address == "::1");
  CHECK(l.max_request_headers_kb == 96);
  CHECK(l.max_request_headers_count == 200);
  const Cluster& c = b.clusters.at(0);
  CHECK(c.connect_timeout == std::chrono::milliseconds(250));
  REQUIRE(c.credentials.has_value());
  CHECK(c.credentials->username == "me");
  CHECK(c.credentials->password == "pa:ss");
  CHECK(c.max_connections == 3);
  REQUIRE(c.tls.has_value());
  CHECK(c.tls->sni.empty());
  CHECK(c.tls->alpn_protocols == std::vector<std::string>{"http/1.1"});
  CHECK(c.tls->tls_minimum_protocol_version == "TLSv1_2");
  CHECK(c.tls->tls_maximum_protocol_version == "TLSv1_3");
  CHECK(c.tls->insecure_skip_verify);
  CHECK(c.tls->trusted_ca.empty());
  CHECK(c.tls->certificate_chain == "/etc/ssl/certs/ca-certificates.crt");
  CHECK(c.tls->private_key == "/etc/ssl/certs/ca-certificates.crt");
  CHECK(c.http2.max_concurrent_streams == 2147483647u);
  CHECK(c.http2.initial_stream_window_size == 65535);
  CHECK(c.http2.initial_connection_window_size == 16u << 20);  // default kept
  // Not in the YAML: the default keepalive is on.
  REQUIRE(c.http2.connection_keepalive.has_value());
  CHECK(c.http2.connection_keepalive->interval == std::chrono::seconds(30));
}

TEST_CASE("a cluster without TLS is plain TCP to the proxy", "[config][loader]") {
  const LoadResult r = loadYaml(withCluster(kEndpoint));
  INFO(allProblems(r.problems));
  REQUIRE(r.ok());
  CHECK_FALSE(r.bootstrap.clusters.at(0).tls.has_value());
}

TEST_CASE("YAML syntax errors name the position", "[config][loader][errors]") {
  const LoadResult r = loadYaml("static_resources:\n  listeners: [\n    {name: a\n  clusters: }\n");
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].mark.file == "cfg.yaml");
  CHECK(r.problems[0].mark.line == 4);
  CHECK(r.problems[0].mark.column == 11);
  CHECK(r.problems[0].str().rfind("cfg.yaml:4:11: YAML syntax error: ", 0) == 0);

  const LoadResult tab = loadYaml("admin:\n\taddress: 1\n");
  REQUIRE(tab.problems.size() == 1);
  CHECK(tab.problems[0].str().rfind("cfg.yaml:2:", 0) == 0);
}

TEST_CASE("unreadable files are errors naming the path", "[config][loader][errors]") {
  const LoadResult r = loadFile("/nonexistent/h2gate.yaml");
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].str() == "cannot read '/nonexistent/h2gate.yaml': No such file or directory");
  const LoadResult dir = loadFile("/tmp");
  REQUIRE(dir.problems.size() == 1);
  CHECK(dir.problems[0].str() == "cannot read '/tmp': is a directory");
}

TEST_CASE("loadFile reads a file and names it in problems", "[config][loader]") {
  const std::string path = "/tmp/h2gate_loader_test_" + std::to_string(::getpid()) + ".yaml";
  {
    std::ofstream out(path);
    out << kMinimalConfig << "    bogus: 1\n";
  }
  const LoadResult r = loadFile(path);
  std::remove(path.c_str());
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].mark.file == path);
  CHECK(r.problems[0].mark.line == 8);
  CHECK(r.bootstrap.source == path);
}

TEST_CASE("a listener needs a filter chain", "[config][loader][errors]") {
  // config's own check (config::validate): what the chain holds is the
  // filters' (tests/unit/filters/chain_test.cc).
  const LoadResult r = loadString(R"(static_resources:
  listeners:
  - name: l
    address: {socket_address: {address: 127.0.0.1, port_value: 3128}}
)",
                                  "cfg.yaml");
  CHECK(allProblems(r.problems) ==
        "cfg.yaml:3:5: static_resources.listeners[0].filter_chains: a listener needs one filter "
        "chain ending in h2gate.filters.forward_proxy\n");
}

TEST_CASE("env expansion in config values", "[config][loader][env]") {
  const std::string yaml = withCluster(std::string(kEndpoint) +
                                       "    proxy_credentials:\n"
                                       "      username: \"${H2GATE_TEST_USER}\"\n"
                                       "      password: \"${H2GATE_TEST_PASS}\"\n");
  SECTION("set") {
    ScopedEnv u("H2GATE_TEST_USER", "alice");
    ScopedEnv p("H2GATE_TEST_PASS", "hunter2");
    const LoadResult r = loadYaml(yaml);
    INFO(allProblems(r.problems));
    REQUIRE(r.ok());
    CHECK(r.bootstrap.clusters[0].credentials->username == "alice");
    CHECK(r.bootstrap.clusters[0].credentials->password == "hunter2");
  }
  SECTION("unset: the error names the variable and leaks no other value") {
    ScopedEnv u("H2GATE_TEST_USER", "alice");
    ScopedEnv p("H2GATE_TEST_PASS", std::nullopt);
    const LoadResult r = loadYaml(yaml);
    CHECK(allProblems(r.problems) ==
          "cfg.yaml:16:17: static_resources.clusters[0].proxy_credentials.password: environment "
          "variable H2GATE_TEST_PASS is not set\n");
  }
}

TEST_CASE("listener addresses must be IP literals, endpoints may be names", "[config][loader]") {
  const LoadResult ok = loadYaml(R"(static_resources:
  listeners:
  - name: l
    address: {socket_address: {address: "::", port_value: 3128}}
    additional_addresses: [{address: {socket_address: {address: 0.0.0.0, port_value: 3129}}}]
    filter_chains: [{filters: [{name: h2gate.filters.forward_proxy}]}]
)");
  INFO(allProblems(ok.problems));
  CHECK(ok.ok());
}

TEST_CASE("inputs that hang yaml-cpp's LoadAll are syntax errors", "[config][loader][errors]") {
  // jbeder/yaml-cpp#1040: "," makes LoadAll loop forever.
  for (const char* yaml : {",", ",[[[[", "  ,\n", "a: 1\n---\n,", "{:", "[:]"}) {
    INFO(yaml);
    const LoadResult r = loadYaml(yaml);
    CHECK_FALSE(r.ok());
  }
}

TEST_CASE("defaultBootstrap is the documented default and valid", "[config][loader]") {
  const Bootstrap b = defaultBootstrap();
  CHECK(validate(b).empty());
  CHECK(b.admin.address.address == "127.0.0.1");
  CHECK(b.admin.address.port_value == 9901);
  CHECK(b.clusters.empty());
  REQUIRE(b.listeners.size() == 1);
  const Listener& l = b.listeners[0];
  CHECK(l.name == "local_proxy");
  CHECK(l.address.address == "127.0.0.1");
  CHECK(l.address.port_value == 3128);
  REQUIRE(l.additional_addresses.size() == 1);
  CHECK(l.additional_addresses[0].address == "::1");
  CHECK(l.additional_addresses[0].port_value == 3128);
  REQUIRE(l.filters.size() == 2);
  CHECK(l.filters[0].name == h2gate::filters::kAccessLog);
  CHECK(l.filters[1].name == h2gate::filters::kForwardProxy);
  CHECK(l.filters[1].typed_config.IsNull());
}

TEST_CASE("helpers", "[config]") {
  CHECK(isIpLiteral("127.0.0.1"));
  CHECK(isIpLiteral("::1"));
  CHECK(isIpLiteral("fe80::1"));
  CHECK_FALSE(isIpLiteral("[::1]"));
  CHECK_FALSE(isIpLiteral("localhost"));
  CHECK_FALSE(isIpLiteral("1.2.3"));
  CHECK_FALSE(isIpLiteral(""));
  CHECK(isHostName("proxy.example.net"));
  CHECK(isHostName("a_b-c"));
  CHECK_FALSE(isHostName(""));
  CHECK_FALSE(isHostName("a b"));
  CHECK_FALSE(isHostName("-a"));
  CHECK_FALSE(isHostName("a/b"));
  CHECK(checkReadableFile("/etc/ssl/certs/ca-certificates.crt").empty());
  CHECK(checkReadableFile("/nonexistent") ==
        "cannot read '/nonexistent': No such file or directory");
}

TEST_CASE("listener timeouts: durations, positive") {
  const std::string yaml =
      "static_resources:\n"
      "  listeners:\n"
      "  - name: l\n"
      "    address: {socket_address: {address: 127.0.0.1, port_value: 0}}\n"
      "    direct_connect_timeout: 250ms\n"
      "    tunnel_half_close_timeout: 3s\n"
      "    filter_chains:\n"
      "    - filters:\n"
      "      - name: h2gate.filters.forward_proxy\n";
  auto ok = h2gate::config::loadString(yaml, "cfg.yaml");
  REQUIRE(ok.ok());
  CHECK(ok.bootstrap.listeners[0].direct_connect_timeout == std::chrono::milliseconds(250));
  CHECK(ok.bootstrap.listeners[0].tunnel_half_close_timeout == std::chrono::seconds(3));

  std::string bad = yaml;
  bad.replace(bad.find("3s"), 2, "0s");
  auto r = h2gate::config::loadString(bad, "cfg.yaml");
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].str() ==
        "cfg.yaml:6:32: static_resources.listeners[0].tunnel_half_close_timeout: must be "
        "greater than 0s");
}

TEST_CASE("listener limits: defaults, values", "[config][loader]") {
  SECTION("defaults") {
    const LoadResult r = loadYaml(kMinimalConfig);
    REQUIRE(r.ok());
    const Listener& l = r.bootstrap.listeners[0];
    CHECK(l.request_headers_timeout == seconds(10));
    CHECK(l.idle_timeout == seconds(60));
    CHECK(l.tunnel_idle_timeout == std::chrono::hours(1));
    CHECK(l.connect_response_timeout == seconds(60));
    CHECK(l.stream_idle_timeout == std::chrono::minutes(5));
    CHECK(l.max_connections == 4096);
    // The built-in default listener has them too.
    const Bootstrap defaults = defaultBootstrap();
    const Listener& d = defaults.listeners.at(0);
    CHECK(d.request_headers_timeout == seconds(10));
    CHECK(d.stream_idle_timeout == std::chrono::minutes(5));
    CHECK(d.max_connections == 4096);
  }
  SECTION("values") {
    const LoadResult r = loadYaml(std::string(kMinimalConfig) +
                                  "    request_headers_timeout: 2s\n"
                                  "    idle_timeout: 5m\n"
                                  "    tunnel_idle_timeout: 1500ms\n"
                                  "    connect_response_timeout: {seconds: 3}\n"
                                  "    stream_idle_timeout: 90s\n"
                                  "    max_connections: 5\n");
    INFO(allProblems(r.problems));
    REQUIRE(r.ok());
    const Listener& l = r.bootstrap.listeners[0];
    CHECK(l.request_headers_timeout == seconds(2));
    CHECK(l.idle_timeout == std::chrono::minutes(5));
    CHECK(l.tunnel_idle_timeout == std::chrono::milliseconds(1500));
    CHECK(l.connect_response_timeout == seconds(3));
    CHECK(l.stream_idle_timeout == seconds(90));
    CHECK(l.max_connections == 5);
  }
}

TEST_CASE("send_buffer and tcp_notsent_lowat on listeners and clusters", "[config][loader]") {
  const std::string base = sendBufferBase();
  SECTION("values") {
    const LoadResult r = loadYaml(base + "    send_buffer: {mode: ideal_backlog}\n");
    INFO(h2gate::testing::allProblems(r.problems));
    REQUIRE(r.ok());
    const Listener& l = r.bootstrap.listeners[0];
    CHECK(l.send_buffer.mode == SendBuffer::Mode::Fixed);
    CHECK(l.send_buffer.bytes == 65536);
    CHECK(l.tcp_notsent_lowat == 16384);
    const Cluster& c = r.bootstrap.clusters[0];
    CHECK(c.send_buffer.mode == SendBuffer::Mode::IdealBacklog);
    CHECK(c.tcp_notsent_lowat == kDefaultUpstreamNotsentLowat);
  }
  SECTION("defaults: auto everywhere, 128 KiB low-water mark upstream only") {
    const LoadResult r = loadYaml(base);
    REQUIRE(r.ok());
    CHECK(r.bootstrap.clusters[0].send_buffer.mode == SendBuffer::Mode::Auto);
    CHECK(r.bootstrap.clusters[0].tcp_notsent_lowat == 128 * 1024);
    const LoadResult m = loadYaml(kMinimalConfig);
    REQUIRE(m.ok());
    CHECK(m.bootstrap.listeners[0].send_buffer.mode == SendBuffer::Mode::Auto);
    CHECK(m.bootstrap.listeners[0].tcp_notsent_lowat == 0);
  }
}

TEST_CASE("connection_keepalive: on by default, interval 0s turns it off", "[config][loader]") {
  const std::string cluster =
      "  clusters:\n"
      "  - name: c\n"
      "    load_assignment:\n"
      "      endpoints: [{lb_endpoints: [{endpoint: {address: "
      "{socket_address: {address: proxy.test, port_value: 443}}}}]}]\n";
  const LoadResult on = loadYaml(std::string(kMinimalConfig) + cluster);
  REQUIRE(on.ok());
  REQUIRE(on.bootstrap.clusters[0].http2.connection_keepalive.has_value());
  CHECK(on.bootstrap.clusters[0].http2.connection_keepalive->interval == std::chrono::seconds(30));
  CHECK(on.bootstrap.clusters[0].http2.connection_keepalive->timeout == std::chrono::seconds(5));
  const std::string off_yaml =
      std::string(kMinimalConfig) + cluster +
      "    typed_extension_protocol_options:\n"
      "      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:\n"
      "        auto_config:\n"
      "          http2_protocol_options: {connection_keepalive: {interval: 0s}}\n";
  const LoadResult off = loadYaml(off_yaml);
  INFO(h2gate::testing::allProblems(off.problems));
  REQUIRE(off.ok());
  CHECK_FALSE(off.bootstrap.clusters[0].http2.connection_keepalive.has_value());
}

TEST_CASE("network_change_timeout: 5s by default, 0s turns the monitor off", "[config][loader]") {
  const LoadResult def = loadYaml(kMinimalConfig);
  REQUIRE(def.ok());
  CHECK(def.bootstrap.network_change_timeout == seconds(5));
  CHECK(defaultBootstrap().network_change_timeout == seconds(5));

  const LoadResult set =
      loadYaml("h2gate: {network_change_timeout: 1.5s}\n" + std::string(kMinimalConfig));
  INFO(allProblems(set.problems));
  REQUIRE(set.ok());
  CHECK(set.bootstrap.network_change_timeout == std::chrono::milliseconds(1500));

  const LoadResult off =
      loadYaml("h2gate:\n  network_change_timeout: 0s\n" + std::string(kMinimalConfig));
  REQUIRE(off.ok());
  CHECK(off.bootstrap.network_change_timeout.count() == 0);

  const LoadResult proto =
      loadYaml("h2gate: {network_change_timeout: {seconds: 2}}\n" + std::string(kMinimalConfig));
  REQUIRE(proto.ok());
  CHECK(proto.bootstrap.network_change_timeout == seconds(2));
}

TEST_CASE("cluster max_requests and HTTP/1.1 idle_timeout: defaults, values", "[config][loader]") {
  const std::string options_key =
      "    typed_extension_protocol_options:\n"
      "      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:\n";
  SECTION("defaults") {
    const LoadResult r = loadYaml(withCluster(kEndpoint));
    INFO(allProblems(r.problems));
    REQUIRE(r.ok());
    const Cluster& c = r.bootstrap.clusters.at(0);
    CHECK(c.max_requests == 4096);
    CHECK(c.idle_timeout == seconds(50));
    // A cluster made in code (from --upstream) has the same defaults.
    const Cluster made;
    CHECK(made.max_requests == 4096);
    CHECK(made.idle_timeout == seconds(50));
  }
  SECTION("values") {
    const LoadResult r =
        loadYaml(withCluster(std::string(kEndpoint) +
                             "    circuit_breakers: {thresholds: [{max_connections: "
                             "3, max_requests: 2}]}\n" +
                             options_key +
                             "        common_http_protocol_options: {idle_timeout: "
                             "1500ms}\n"));
    INFO(allProblems(r.problems));
    REQUIRE(r.ok());
    const Cluster& c = r.bootstrap.clusters.at(0);
    CHECK(c.max_connections == 3);
    CHECK(c.max_requests == 2);
    CHECK(c.idle_timeout == std::chrono::milliseconds(1500));
  }
  SECTION("idle_timeout 0s means never") {
    const LoadResult r = loadYaml(withCluster(std::string(kEndpoint) + options_key +
                                              "        common_http_protocol_options:\n"
                                              "          idle_timeout: 0s\n"));
    INFO(allProblems(r.problems));
    REQUIRE(r.ok());
    CHECK(r.bootstrap.clusters.at(0).idle_timeout == seconds(0));
  }
}

TEST_CASE("a config file above the size limit is refused before it is parsed",
          "[config][loader][errors]") {
  const std::string path = "/tmp/h2gate_loader_size_" + std::to_string(::getpid()) + ".yaml";
  {
    std::ofstream out(path);
    out << kMinimalConfig << std::string(4000, '#') << "\n";  // a comment makes it ~4.2 KiB
  }
  const auto size = std::filesystem::file_size(path);
  const LoadResult big = loadFile(path, 4096);
  REQUIRE(big.problems.size() == 1);
  CHECK(big.problems[0].str() == "'" + path + "' is " + std::to_string(size) +
                                     " bytes, more than the 4 KiB a config file may have (h2gate "
                                     "--max-config-size SIZE raises the limit)");
  CHECK(loadFile(path, 8192).ok());
  CHECK(loadFile(path).ok());  // the default: 8 MiB
  std::remove(path.c_str());
  // Not a regular file: the size is not known before reading; reading stops
  // at the limit.
  const LoadResult zero = loadFile("/dev/zero", 4096);
  REQUIRE(zero.problems.size() == 1);
  CHECK(
      zero.problems[0].str().starts_with("'/dev/zero' is more than 4096 bytes, more than the 4 "
                                         "KiB a config file may have"));
}

TEST_CASE("nesting: 64 levels are no error, brackets in strings do not count",
          "[config][loader][errors]") {
  SECTION("64 levels are fine (then the schema complains)") {
    const LoadResult r = loadYaml(std::string(64, '[') + std::string(64, ']'));
    CHECK(allProblems(r.problems).find("nested") == std::string::npos);
  }
  SECTION("brackets in strings and comments do not count") {
    const std::string many(200, '[');
    const LoadResult r = loadYaml(std::string(kMinimalConfig) + "# " + many + "\n" +
                                  "      - name: \"" + many + "\"\n");
    CHECK(allProblems(r.problems).find("nested") == std::string::npos);
  }
}

TEST_CASE("control characters from the file are escaped in problems", "[config][loader][errors]") {
  const LoadResult r =
      loadYaml(std::string(kMinimalConfig) + "    \"bo\\x1b[2Jgus\\u009b\\x07\": 1\n");
  REQUIRE(r.problems.size() == 1);
  const std::string text = r.problems[0].str();
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find('\x07') == std::string::npos);
  CHECK(text.find("\xc2\x9b") == std::string::npos);
  CHECK(
      text.starts_with("cfg.yaml:8:5: static_resources.listeners[0].bo\\x1b[2Jgus\\u009b\\x07: "
                       "unknown field"));
  // Raw bytes in a plain scalar, and a file name with a newline.
  Diagnostics diag(std::string("evil\nname.yaml"));
  diag.error(Mark{}, "k", "got '\x1b]0;owned\x07' and \xff\xfe, kept: caf\xc3\xa9");
  CHECK(diag.problems()[0].str() ==
        "evil\\nname.yaml: k: got '\\x1b]0;owned\\x07' and \\xff\\xfe, kept: caf\xc3\xa9");
}

TEST_CASE("admin.allowed_hosts and a listener's deny_own_addresses", "[config][loader]") {
  const LoadResult r =
      loadYaml(std::string(kMinimalConfig) +
               "    deny_own_addresses: false\n"
               "admin:\n"
               "  address: {socket_address: {address: 127.0.0.1, port_value: 9901}}\n"
               "  allowed_hosts: [H2gate.Example., \"mon.example:9901\", "
               "\"[fd00::1]:80\", 192.0.2.7]\n");
  INFO(allProblems(r.problems));
  REQUIRE(r.ok());
  CHECK(r.bootstrap.admin.allowed_hosts == std::vector<std::string>{"h2gate.example",
                                                                    "mon.example:9901",
                                                                    "[fd00::1]:80", "192.0.2.7"});
  CHECK_FALSE(r.bootstrap.listeners[0].deny_own_addresses);
  CHECK(loadYaml(kMinimalConfig).bootstrap.listeners[0].deny_own_addresses);  // the default
}

TEST_CASE("a wrong config: every problem, at its line and column", "[config][loader][errors]") {
  for (const BadConfig& bad : badConfigs()) {
    SECTION(bad.name) {
      std::string expected;
      for (const std::string& problem : bad.problems) expected += problem + "\n";
      const LoadResult r = loadYaml(bad.yaml);
      CHECK_FALSE(r.ok());
      CHECK(allProblems(r.problems) == expected);
    }
  }
}
