// Bootstrap → YAML, in the loader's shapes (config/loader.cc,
// config/cluster_loader.cc): Envoy v3 field names, every default written out.
#include "config/dump.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "config/loader_internal.h"
#include "gateway/base/ascii.h"

namespace h2gate::config {
namespace {

// typed_config is user YAML; a loaded config cannot nest deeper than a few
// levels, but a Bootstrap built in code could hold anything.
constexpr int kMaxTypedConfigDepth = 64;

// Writes `node` with the value of every secret-named key replaced by
// kRedacted, straight from the loaded tree (no copy: a big acl list would
// double the memory). Scalars keep their text; collections keep their
// style (flow or block). Tags are dropped: the loader does not read them.
void emitRedacted(YAML::Emitter& out, const YAML::Node& node, int depth) {
  if (!node.IsDefined() || node.IsNull()) {
    out << YAML::Null;
    return;
  }
  if (depth > kMaxTypedConfigDepth) {
    out << "[truncated]";
    return;
  }
  if (node.IsScalar()) {
    out << node.Scalar();
    return;
  }
  if (node.Style() == YAML::EmitterStyle::Flow) out << YAML::Flow;
  if (node.Style() == YAML::EmitterStyle::Block) out << YAML::Block;
  if (node.IsSequence()) {
    out << YAML::BeginSeq;
    for (const YAML::Node& item : node) emitRedacted(out, item, depth + 1);
    out << YAML::EndSeq;
    return;
  }
  // An Envoy HeaderValue ({key: NAME, value: V}, e.g. upstream_headers'
  // request_headers_to_add): the value may be any credential or identity
  // token, whatever the header is called, so it is always redacted.
  const bool header_value = node["key"].IsDefined() && node["key"].IsScalar() &&
                            node["value"].IsDefined() && node.size() == 2;
  out << YAML::BeginMap;
  // Every entry, duplicate keys too, as the loaded node had them.
  for (auto it = node.begin(); it != node.end(); ++it) {
    out << YAML::Key;
    emitRedacted(out, it->first, depth + 1);
    out << YAML::Value;
    const bool secret = it->first.IsScalar() && (isSecretKey(it->first.Scalar()) ||
                                                 (header_value && it->first.Scalar() == "value"));
    if (secret)
      out << kRedacted;
    else
      emitRedacted(out, it->second, depth + 1);
  }
  out << YAML::EndMap;
}

// One line of a comment: no line breaks or other control characters.
std::string commentText(std::string text) {
  std::replace_if(
      text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }, ' ');
  return text;
}

class Writer {
 public:
  explicit Writer(YAML::Emitter& out) : out_(out) {}

  void bootstrap(const Bootstrap& b) {
    out_ << YAML::BeginMap;
    out_ << YAML::Key << "admin" << YAML::Value << YAML::BeginMap;
    address(b.admin.address);
    if (!b.admin.allowed_hosts.empty()) {
      out_ << YAML::Key << "allowed_hosts" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (const std::string& h : b.admin.allowed_hosts) out_ << h;
      out_ << YAML::EndSeq;
    }
    out_ << YAML::EndMap;

    out_ << YAML::Key << "h2gate" << YAML::Value << YAML::BeginMap;
    field("concurrency", b.concurrency);
    field("drain_timeout", formatDuration(b.drain_timeout));
    field("network_change_timeout", formatDuration(b.network_change_timeout));
    out_ << YAML::EndMap;

    out_ << YAML::Key << "static_resources" << YAML::Value << YAML::BeginMap;
    out_ << YAML::Key << "listeners" << YAML::Value;
    if (b.listeners.empty()) out_ << YAML::Flow;
    out_ << YAML::BeginSeq;
    for (const Listener& l : b.listeners) listener(l);
    out_ << YAML::EndSeq;
    out_ << YAML::Key << "clusters" << YAML::Value;
    if (b.clusters.empty()) out_ << YAML::Flow;
    out_ << YAML::BeginSeq;
    for (const Cluster& c : b.clusters) cluster(c);
    out_ << YAML::EndSeq;
    out_ << YAML::EndMap;

    out_ << YAML::EndMap;
  }

 private:
  template <typename T>
  void field(const char* key, const T& value) {
    out_ << YAML::Key << key << YAML::Value << value;
  }
  void field(const char* key, uint32_t value) {
    out_ << YAML::Key << key << YAML::Value << static_cast<unsigned long>(value);
  }

  // address: {socket_address: {address: ..., port_value: ...}}, as a key of
  // the current mapping.
  void address(const SocketAddress& a) {
    out_ << YAML::Key << "address" << YAML::Value << YAML::BeginMap;
    out_ << YAML::Key << "socket_address" << YAML::Value << YAML::Flow << YAML::BeginMap;
    field("address", a.address);
    field("port_value", static_cast<uint32_t>(a.port_value));
    out_ << YAML::EndMap << YAML::EndMap;
  }

  void listener(const Listener& l) {
    out_ << YAML::BeginMap;
    field("name", l.name);
    address(l.address);
    if (!l.additional_addresses.empty()) {
      out_ << YAML::Key << "additional_addresses" << YAML::Value << YAML::BeginSeq;
      for (const SocketAddress& a : l.additional_addresses) {
        out_ << YAML::BeginMap;
        address(a);
        out_ << YAML::EndMap;
      }
      out_ << YAML::EndSeq;
    }
    field("max_request_headers_kb", l.max_request_headers_kb);
    field("max_request_headers_count", l.max_request_headers_count);
    field("direct_connect_timeout", formatDuration(l.direct_connect_timeout));
    field("tunnel_half_close_timeout", formatDuration(l.tunnel_half_close_timeout));
    field("request_headers_timeout", formatDuration(l.request_headers_timeout));
    field("idle_timeout", formatDuration(l.idle_timeout));
    field("tunnel_idle_timeout", formatDuration(l.tunnel_idle_timeout));
    field("connect_response_timeout", formatDuration(l.connect_response_timeout));
    field("stream_idle_timeout", formatDuration(l.stream_idle_timeout));
    field("max_connections", l.max_connections);
    field("deny_own_addresses", l.deny_own_addresses);
    socketTuning(l.send_buffer, l.tcp_notsent_lowat);

    out_ << YAML::Key << "filter_chains" << YAML::Value;
    if (l.filters.empty()) {
      out_ << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
    } else {
      out_ << YAML::BeginSeq << YAML::BeginMap;
      if (!l.source_prefix_ranges.empty()) {
        out_ << YAML::Key << "filter_chain_match" << YAML::Value << YAML::BeginMap;
        out_ << YAML::Key << "source_prefix_ranges" << YAML::Value << YAML::BeginSeq;
        for (const SourcePrefixRange& r : l.source_prefix_ranges) {
          out_ << YAML::Flow << YAML::BeginMap;
          field("address_prefix", r.address_prefix);
          field("prefix_len", r.prefix_len);
          out_ << YAML::EndMap;
        }
        out_ << YAML::EndSeq << YAML::EndMap;
      }
      out_ << YAML::Key << "filters" << YAML::Value << YAML::BeginSeq;
      for (const FilterConfig& f : l.filters) {
        out_ << YAML::BeginMap;
        field("name", f.name);
        if (f.typed_config.IsDefined() && !f.typed_config.IsNull()) {
          out_ << YAML::Key << "typed_config" << YAML::Value;
          emitRedacted(out_, f.typed_config, 0);
        } else if (!f.redacted_yaml.empty()) {
          out_ << YAML::Key << "typed_config" << YAML::Value << YAML::Load(f.redacted_yaml);
        }
        out_ << YAML::EndMap;
      }
      out_ << YAML::EndSeq;
      out_ << YAML::EndMap << YAML::EndSeq;
    }
    out_ << YAML::EndMap;
  }

  void cluster(const Cluster& c) {
    out_ << YAML::BeginMap;
    field("name", c.name);
    field("connect_timeout", formatDuration(c.connect_timeout));

    out_ << YAML::Key << "load_assignment" << YAML::Value << YAML::BeginMap;
    field("cluster_name", c.name);
    out_ << YAML::Key << "endpoints" << YAML::Value;
    if (c.endpoints.empty()) {
      out_ << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
    } else {
      // One locality holding every endpoint: the loader flattens them anyway.
      out_ << YAML::BeginSeq << YAML::BeginMap;
      out_ << YAML::Key << "lb_endpoints" << YAML::Value << YAML::BeginSeq;
      for (const SocketAddress& e : c.endpoints) {
        out_ << YAML::BeginMap << YAML::Key << "endpoint" << YAML::Value << YAML::BeginMap;
        address(e);
        out_ << YAML::EndMap << YAML::EndMap;
      }
      out_ << YAML::EndSeq;
      out_ << YAML::EndMap << YAML::EndSeq;
    }
    out_ << YAML::EndMap;

    if (c.tls) tls(*c.tls);
    protocolOptions(c);

    // The credentials go where the loader reads them back from: inside
    // proxy_authentication when there is one, else proxy_credentials.
    if (c.authentication) {
      const ProxyAuthentication& a = *c.authentication;
      out_ << YAML::Key << "proxy_authentication" << YAML::Value << YAML::BeginMap;
      field("scheme", std::string(schemeName(a.scheme)));
      if (!a.spn.empty()) field("spn", a.spn);
      if (!a.client_keytab.empty()) file("client_keytab", a.client_keytab);
      if (!a.principal.empty()) field("principal", a.principal);
      if (c.credentials) credentials("credentials", *c.credentials);
      out_ << YAML::EndMap;
    } else if (c.credentials) {
      credentials("proxy_credentials", *c.credentials);
    }

    out_ << YAML::Key << "circuit_breakers" << YAML::Value << YAML::BeginMap;
    out_ << YAML::Key << "thresholds" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
    field("max_connections", c.max_connections);
    field("max_requests", c.max_requests);
    out_ << YAML::EndMap << YAML::EndSeq << YAML::EndMap;
    socketTuning(c.send_buffer, c.tcp_notsent_lowat);

    out_ << YAML::EndMap;
  }

  void socketTuning(const SendBuffer& sb, uint32_t notsent_lowat) {
    out_ << YAML::Key << "send_buffer" << YAML::Value << YAML::Flow << YAML::BeginMap;
    field("mode", sb.mode == SendBuffer::Mode::Fixed          ? "fixed"
                  : sb.mode == SendBuffer::Mode::IdealBacklog ? "ideal_backlog"
                                                              : "auto");
    if (sb.mode == SendBuffer::Mode::Fixed) field("bytes", sb.bytes);
    out_ << YAML::EndMap;
    field("tcp_notsent_lowat", notsent_lowat);
  }

  // {username, password: [redacted]}, {username, password_file: {filename}}
  // or {username, keyring: NAME}.
  void credentials(const char* key, const ProxyCredentials& c) {
    out_ << YAML::Key << key << YAML::Value << YAML::BeginMap;
    field("username", c.username);
    if (!c.keyring.empty())
      field("keyring", c.keyring);
    else if (c.password_file.empty())
      field("password", kRedacted);
    else
      file("password_file", c.password_file);
    out_ << YAML::EndMap;
  }

  // A DataSource: {filename: PATH}.
  void file(const char* key, const std::string& path) {
    out_ << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginMap;
    field("filename", path);
    out_ << YAML::EndMap;
  }

  void tls(const TlsContext& t) {
    out_ << YAML::Key << "transport_socket" << YAML::Value << YAML::BeginMap;
    field("name", detail::kTlsTransportSocket);
    out_ << YAML::Key << "typed_config" << YAML::Value << YAML::BeginMap;
    field("@type", detail::kUpstreamTlsContextType);
    // No sni: each endpoint's host name is sent.
    if (!t.sni.empty()) field("sni", t.sni);
    out_ << YAML::Key << "common_tls_context" << YAML::Value << YAML::BeginMap;
    out_ << YAML::Key << "alpn_protocols" << YAML::Value << YAML::Flow << t.alpn_protocols;
    out_ << YAML::Key << "tls_params" << YAML::Value << YAML::BeginMap;
    field("tls_minimum_protocol_version", t.tls_minimum_protocol_version);
    field("tls_maximum_protocol_version", t.tls_maximum_protocol_version.empty()
                                              ? std::string("TLS_AUTO")
                                              : t.tls_maximum_protocol_version);
    out_ << YAML::EndMap;
    out_ << YAML::Key << "validation_context" << YAML::Value << YAML::BeginMap;
    // No trusted_ca: the system's CA store.
    if (!t.trusted_ca.empty()) file("trusted_ca", t.trusted_ca);
    field("trust_chain_verification",
          t.insecure_skip_verify ? "ACCEPT_UNTRUSTED" : "VERIFY_TRUST_CHAIN");
    out_ << YAML::EndMap;
    if (!t.certificate_chain.empty() || !t.private_key.empty()) {
      // File names only: the key material itself is never read here.
      out_ << YAML::Key << "tls_certificates" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
      if (!t.certificate_chain.empty()) file("certificate_chain", t.certificate_chain);
      if (!t.private_key.empty()) file("private_key", t.private_key);
      out_ << YAML::EndMap << YAML::EndSeq;
    }
    out_ << YAML::EndMap;                  // common_tls_context
    out_ << YAML::EndMap << YAML::EndMap;  // typed_config, transport_socket
  }

  void protocolOptions(const Cluster& c) {
    const Http2ProtocolOptions& h2 = c.http2;
    out_ << YAML::Key << "typed_extension_protocol_options" << YAML::Value << YAML::BeginMap;
    out_ << YAML::Key << detail::kHttpProtocolOptionsKey << YAML::Value << YAML::BeginMap;
    field("@type", detail::kHttpProtocolOptionsType);
    out_ << YAML::Key << "common_http_protocol_options" << YAML::Value << YAML::Flow
         << YAML::BeginMap;
    field("idle_timeout", formatDuration(c.idle_timeout));
    out_ << YAML::EndMap;
    out_ << YAML::Key << "auto_config" << YAML::Value << YAML::BeginMap;
    out_ << YAML::Key << "http2_protocol_options" << YAML::Value << YAML::BeginMap;
    field("max_concurrent_streams", h2.max_concurrent_streams);
    field("initial_stream_window_size", h2.initial_stream_window_size);
    field("initial_connection_window_size", h2.initial_connection_window_size);
    // Off is written as interval 0s (absent means the default, which is on).
    out_ << YAML::Key << "connection_keepalive" << YAML::Value << YAML::Flow << YAML::BeginMap;
    if (h2.connection_keepalive) {
      field("interval", formatDuration(h2.connection_keepalive->interval));
      field("timeout", formatDuration(h2.connection_keepalive->timeout));
    } else {
      field("interval", "0s");
    }
    out_ << YAML::EndMap;
    out_ << YAML::EndMap << YAML::EndMap << YAML::EndMap << YAML::EndMap;
  }

  YAML::Emitter& out_;
};

}  // namespace

bool isSecretKey(std::string_view key) {
  const std::string lower = toLowerAscii(key);
  static constexpr std::array<std::string_view, 4> kWords{"password", "secret", "token",
                                                          "authorization"};
  return std::any_of(kWords.begin(), kWords.end(),
                     [&](std::string_view w) { return lower.find(w) != std::string::npos; });
}

std::string formatDuration(Duration d) {
  const int64_t ns = std::max<int64_t>(d.count(), 0);
  const int64_t whole = ns / 1000000000;
  int64_t frac = ns % 1000000000;
  std::string out = std::to_string(whole);
  if (frac != 0) {
    int digits = 9;
    while (digits > 3 && frac % 1000 == 0) {
      frac /= 1000;
      digits -= 3;
    }
    const std::string digits_text = std::to_string(frac);
    out += '.';
    out.append(static_cast<std::size_t>(digits) - digits_text.size(), '0');
    out += digits_text;
  }
  return out + "s";
}

std::string typedConfigText(const FilterConfig& f) {
  if (!f.typed_config.IsDefined() || f.typed_config.IsNull()) return f.redacted_yaml;
  YAML::Emitter out;
  out.SetIndent(2);
  emitRedacted(out, f.typed_config, 0);
  return out.good() ? std::string(out.c_str()) : std::string();
}

void dropFilterYaml(Bootstrap& b) {
  for (Listener& l : b.listeners) {
    for (FilterConfig& f : l.filters) {
      if (!f.filter) continue;  // not built: its YAML is still needed
      if (f.typed_config.IsDefined() && !f.typed_config.IsNull())
        f.redacted_yaml = typedConfigText(f);
      // reset(), not assignment: assigning to a YAML::Node writes through to
      // the node it refers to, which other copies of the Bootstrap share.
      f.typed_config.reset();
    }
  }
}

std::string dumpYaml(const Bootstrap& b) {
  std::string head = "# h2gate effective configuration (secrets redacted) from " +
                     commentText(b.source.empty() ? "<unknown>" : b.source) + "\n";
  if (!b.admin.enabled) {
    // The format has no switch for this: loading the dump enables admin again.
    head += "# admin interface disabled (the address below is not bound)\n";
  }
  YAML::Emitter out;
  out.SetIndent(2);
  Writer(out).bootstrap(b);
  if (!out.good()) {
    // yaml-cpp refuses e.g. invalid UTF-8. Its message names no value.
    return head + "# cannot write the configuration as YAML: " + commentText(out.GetLastError()) +
           "\n";
  }
  return head + out.c_str() + "\n";
}

}  // namespace h2gate::config
