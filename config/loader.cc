// YAML → Bootstrap. The parser reads every field it knows with NodeReader, so
// one pass reports every structural problem; validate() then checks what
// spans several places (names, addresses, a listener's chain being there) for
// YAML and flag-made configs alike. What a filter chain holds is checked by
// the filters (filters/chain.h).
#include "config/loader.h"
#include "config/ip_text.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <openssl/crypto.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <asio/ip/address.hpp>

#include "config/loader_internal.h"
#include "config/yaml_guard.h"
#include "gateway/base/ascii.h"
#include "gateway/base/keyring.h"

namespace h2gate::config {
namespace {

// Thrown by DocumentProbe when collections nest deeper than kMaxYamlDepth.
struct TooDeep {
  YAML::Mark mark;
};

// Records where each document starts, and stops at nesting deeper than
// kMaxYamlDepth (at the collection that went too deep, while yaml-cpp's own
// guard would say "bad file" 2,000 levels later); builds nothing.
struct DocumentProbe : YAML::EventHandler {
  std::vector<YAML::Mark> starts;
  int depth = 0;
  void OnDocumentStart(const YAML::Mark& mark) override {
    starts.push_back(mark);
    depth = 0;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    enter(mark);
  }
  void OnSequenceEnd() override { --depth; }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    enter(mark);
  }
  void OnMapEnd() override { --depth; }
  void enter(const YAML::Mark& mark) {
    if (++depth > kMaxYamlDepth) throw TooDeep{mark};
  }
};

std::string tooDeepMessage() {
  return "YAML nested more than " + std::to_string(kMaxYamlDepth) +
         " levels deep (sequences and mappings inside each other): gave up at this one, level " +
         std::to_string(kMaxYamlDepth + 1) + " (an h2gate config needs about ten)";
}

// "8 MiB", "1536 KiB", "1000 bytes".
std::string sizeText(uint64_t bytes) {
  if (bytes != 0 && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes != 0 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

// Reads at most max_bytes of `path` into *out; "" or why not.
std::string readCapped(const std::string& path, uint64_t max_bytes, std::string* out) {
  const std::string too_big = " bytes, more than the " + sizeText(max_bytes) +
                              " a config file may have (h2gate --max-config-size SIZE raises "
                              "the limit)";
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    const uintmax_t size = std::filesystem::file_size(path, ec);
    if (!ec && size > max_bytes) return "'" + path + "' is " + std::to_string(size) + too_big;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return "cannot read '" + path + "': " + std::strerror(errno);
  // Not trusting the size above: a FIFO, /dev/zero, or a file that grew.
  std::string data;
  char buf[64 * 1024];
  while (in) {
    in.read(buf, sizeof buf);
    data.append(buf, static_cast<std::size_t>(in.gcount()));
    if (data.size() > max_bytes)
      return "'" + path + "' is more than " + std::to_string(max_bytes) + too_big;
  }
  if (in.bad()) return "cannot read '" + path + "': read error";
  *out = std::move(data);
  return {};
}

std::string addressKey(const SocketAddress& a) {
  return a.address.find(':') != std::string::npos
             ? "[" + a.address + "]:" + std::to_string(a.port_value)
             : a.address + ":" + std::to_string(a.port_value);
}

void parseRoot(NodeReader root, Bootstrap& b) {
  if (!root.expectMap()) return;
  root.allowOnly({"admin", "static_resources", "h2gate"});

  NodeReader admin = root.child("admin");
  if (!admin.isNull() && admin.expectMap()) {
    admin.allowOnly({"address", "allowed_hosts"});
    NodeReader addr = admin.child("address", true);
    if (auto a = detail::parseAddress(addr, detail::AddressKind::Bind)) b.admin.address = *a;
    if (auto hosts = admin.stringList("allowed_hosts")) {
      for (std::size_t i = 0; i < hosts->size(); ++i) {
        std::string why;
        std::optional<std::string> h = normalizeAllowedHost((*hosts)[i], &why);
        if (h)
          b.admin.allowed_hosts.push_back(std::move(*h));
        else
          admin.errorAt("allowed_hosts", "entry " + std::to_string(i) + ": " + why);
      }
    }
  }

  NodeReader own = root.child("h2gate");
  if (own.expectMap()) {
    own.allowOnly({"concurrency", "drain_timeout", "network_change_timeout"});
    if (auto c = own.uint("concurrency", 1, 1024)) b.concurrency = static_cast<uint32_t>(*c);
    if (auto d = own.duration("drain_timeout")) b.drain_timeout = *d;
    if (auto d = own.duration("network_change_timeout")) b.network_change_timeout = *d;
  }

  NodeReader sr = root.child("static_resources");
  if (!sr.expectMap()) return;
  sr.allowOnly({"listeners", "clusters"});
  for (NodeReader& l : sr.list("listeners")) b.listeners.push_back(detail::parseListener(l));
  for (NodeReader& c : sr.list("clusters")) b.clusters.push_back(detail::parseCluster(c));
}

}  // namespace

namespace detail {

std::optional<SocketAddress> parseAddress(NodeReader& address, AddressKind kind) {
  if (address.isNull() || !address.expectMap()) return std::nullopt;
  address.allowOnly({"socket_address"});
  NodeReader sa = address.child("socket_address", true);
  if (sa.isNull() || !sa.expectMap()) return std::nullopt;
  sa.allowOnly({"address", "port_value"});
  auto host = sa.string("address", true);
  // Port 0 asks the OS for a free port: useful for listeners in tests, never
  // for a remote proxy.
  auto port = sa.uint("port_value", kind == AddressKind::Endpoint ? 1 : 0, 65535, true);
  bool ok = host && port;
  if (host) {
    if (kind == AddressKind::Bind && !isIpLiteral(*host)) {
      sa.errorAt("address",
                 "expected an IP address such as 127.0.0.1 or ::1 (listeners do not "
                 "resolve host names), got '" +
                     *host + "'");
      ok = false;
    } else if (kind == AddressKind::Endpoint && !isIpLiteral(*host) && !isHostName(*host)) {
      sa.errorAt("address", "expected a host name or IP address, got '" + *host + "'");
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return SocketAddress{*host, static_cast<uint16_t>(*port)};
}

void parseSocketTuning(NodeReader& r, SendBuffer& out, uint32_t& notsent_lowat) {
  constexpr uint64_t kMaxBytes = 16u << 20;  // the tuner's clamp
  if (auto v = r.uint("tcp_notsent_lowat", 0, kMaxBytes)) notsent_lowat = static_cast<uint32_t>(*v);
  NodeReader sb = r.child("send_buffer");
  if (sb.isNull() || !sb.expectMap()) return;
  sb.allowOnly({"mode", "bytes"});
  if (auto m = sb.choice("mode", {"auto", "fixed", "ideal_backlog"})) {
    out.mode = *m == "fixed"           ? SendBuffer::Mode::Fixed
               : *m == "ideal_backlog" ? SendBuffer::Mode::IdealBacklog
                                       : SendBuffer::Mode::Auto;
  }
  const bool fixed = out.mode == SendBuffer::Mode::Fixed;
  if (auto b = sb.uint("bytes", 4096, kMaxBytes, fixed)) {
    if (!fixed)
      sb.errorAt("bytes", "applies only to mode: fixed");
    else
      out.bytes = static_cast<uint32_t>(*b);
  }
}

// filter_chain_match: {source_prefix_ranges: [{address_prefix, prefix_len}]}
// (Envoy's names). Whether each entry is a range is net::SourceRanges'
// check (gateway/net/source_ranges.h), made with the filter chains.
void parseSourcePrefixRanges(NodeReader& chain, Listener& l) {
  NodeReader match = chain.child("filter_chain_match");
  if (match.isNull() || !match.expectMap()) return;
  match.allowOnly({"source_prefix_ranges"});
  if (!match.has("source_prefix_ranges")) return;
  std::vector<NodeReader> ranges = match.list("source_prefix_ranges");
  if (ranges.empty() && match.child("source_prefix_ranges").node().IsSequence()) {
    match.errorAt("source_prefix_ranges",
                  "an empty list would let every client in; list the clients' ranges, or "
                  "0.0.0.0/0 and ::/0 to allow everyone on purpose");
  }
  for (NodeReader& range : ranges) {
    if (!range.expectMap()) continue;
    range.allowOnly({"address_prefix", "prefix_len"});
    SourcePrefixRange out;
    out.mark = range.mark();
    auto prefix = range.string("address_prefix", true);
    // Required, unlike Envoy's default of 0: a forgotten prefix_len would
    // turn one address into everyone.
    auto len = range.uint("prefix_len", 0, 128, true);
    if (!prefix || !len) continue;
    out.address_prefix = *prefix;
    out.prefix_len = static_cast<uint32_t>(*len);
    l.source_prefix_ranges.push_back(std::move(out));
  }
}

Listener parseListener(NodeReader& r) {
  Listener l;
  l.mark = r.mark();
  if (!r.expectMap()) return l;
  r.allowOnly({"name", "address", "additional_addresses", "filter_chains", "max_request_headers_kb",
               "max_request_headers_count", "direct_connect_timeout", "tunnel_half_close_timeout",
               "request_headers_timeout", "idle_timeout", "tunnel_idle_timeout",
               "connect_response_timeout", "stream_idle_timeout", "max_connections", "send_buffer",
               "tcp_notsent_lowat", "deny_own_addresses"});
  if (auto name = r.string("name", true)) {
    if (name->empty()) r.errorAt("name", "must not be empty");
    l.name = *name;
  }
  NodeReader addr = r.child("address", true);
  if (auto a = parseAddress(addr, AddressKind::Bind)) l.address = *a;
  for (NodeReader& extra : r.list("additional_addresses")) {
    if (!extra.expectMap()) continue;
    extra.allowOnly({"address"});
    NodeReader a = extra.child("address", true);
    if (auto sa = parseAddress(a, AddressKind::Bind)) l.additional_addresses.push_back(*sa);
  }
  if (auto kb = r.uint("max_request_headers_kb", 1, 1024)) {
    l.max_request_headers_kb = static_cast<uint32_t>(*kb);
  }
  if (auto n = r.uint("max_request_headers_count", 1, 1000)) {
    l.max_request_headers_count = static_cast<uint32_t>(*n);
  }
  if (auto d = r.duration("direct_connect_timeout")) {
    if (d->count() <= 0)
      r.errorAt("direct_connect_timeout", "must be greater than 0s");
    else
      l.direct_connect_timeout = *d;
  }
  if (auto d = r.duration("tunnel_half_close_timeout")) {
    if (d->count() <= 0)
      r.errorAt("tunnel_half_close_timeout", "must be greater than 0s");
    else
      l.tunnel_half_close_timeout = *d;
  }
  for (auto [key, field] : {std::pair{"request_headers_timeout", &l.request_headers_timeout},
                            std::pair{"idle_timeout", &l.idle_timeout},
                            std::pair{"tunnel_idle_timeout", &l.tunnel_idle_timeout},
                            std::pair{"connect_response_timeout", &l.connect_response_timeout},
                            std::pair{"stream_idle_timeout", &l.stream_idle_timeout}}) {
    if (auto d = r.duration(key)) {
      if (d->count() <= 0)
        r.errorAt(key, "must be greater than 0s");
      else
        *field = *d;
    }
  }
  if (auto n = r.uint("max_connections", 1, 1000000)) l.max_connections = static_cast<uint32_t>(*n);
  if (auto d = r.boolean("deny_own_addresses")) l.deny_own_addresses = *d;

  parseSocketTuning(r, l.send_buffer, l.tcp_notsent_lowat);

  // A missing or empty chain is reported by validate(), which also covers
  // flag-made listeners.
  std::vector<NodeReader> chains = r.list("filter_chains");
  for (std::size_t i = 1; i < chains.size(); ++i)
    chains[i].error("only one filter chain is supported");
  if (!chains.empty() && chains[0].expectMap()) {
    chains[0].allowOnly({"filter_chain_match", "filters"});
    parseSourcePrefixRanges(chains[0], l);
    for (NodeReader& f : chains[0].list("filters")) {
      if (!f.expectMap()) continue;
      f.allowOnly({"name", "typed_config"});
      FilterConfig fc;
      fc.mark = f.mark();
      if (auto name = f.string("name", true)) {
        fc.name = *name;
        fc.mark = f.child("name").mark();
      }
      fc.typed_config = f.child("typed_config").node();
      l.filters.push_back(std::move(fc));
    }
  }
  return l;
}

}  // namespace detail

std::string checkReadableFile(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec) return "cannot read '" + path + "': " + ec.message();
  if (std::filesystem::is_directory(status)) return "cannot read '" + path + "': is a directory";
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return "cannot read '" + path + "': " + std::strerror(errno);
  std::fclose(f);
  return {};
}

std::optional<std::string> readSecretFile(const std::string& path, std::string* why) {
  constexpr size_t kMax = 64 * 1024;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    *why = "cannot read '" + path + "': " + std::strerror(errno);
    return std::nullopt;
  }
  std::string out;
  out.reserve(kMax + 1);  // no reallocation: no stray copies of the secret
  char buf[4096];
  size_t n = 0;
  while (out.size() <= kMax && (n = std::fread(buf, 1, sizeof buf, f)) > 0)
    out.append(buf, std::min(n, kMax + 1 - out.size()));
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  OPENSSL_cleanse(buf, sizeof buf);
  if (failed || out.size() > kMax) {
    *why = failed ? "cannot read '" + path + "'" : "'" + path + "' is larger than 64 KiB";
    wipe(out);
    return std::nullopt;
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  if (!out.empty() && out.back() == '\r') out.pop_back();
  return out;
}

std::optional<std::string> keyringPassword(const std::string& name, const std::string& username,
                                           std::optional<std::string>* entry_user,
                                           std::string* why) {
  if (std::string bad = keyring::checkName(name); !bad.empty()) {
    *why = bad;
    return std::nullopt;
  }
  keyring::Entry entry;
  std::string error;
  switch (keyring::lookup(name, &entry, &error)) {
    case keyring::Status::Ok:
      break;
    case keyring::Status::NotFound:
      *why = "no entry '" + name + "' in " + std::string(keyring::backendName()) +
             " (h2gate credentials set " + name + " USER stores one)";
      return std::nullopt;
    case keyring::Status::Failed:
      *why = "keyring entry '" + name + "': " + error;
      return std::nullopt;
  }
  if (!username.empty() && !entry.username.empty() && username != entry.username) {
    *why = "username '" + username + "' differs from '" + entry.username +
           "', the user name keyring entry '" + name + "' holds";
    return std::nullopt;
  }
  if (username.empty() && entry.username.empty()) {
    *why = "keyring entry '" + name + "' holds no user name: give username";
    return std::nullopt;
  }
  if (entry.password.empty()) {
    *why = "keyring entry '" + name + "' holds an empty password";
    return std::nullopt;
  }
  *entry_user = entry.username.empty() ? std::optional<std::string>() : entry.username;
  std::string out;
  out.swap(entry.password);  // moved, not copied: no stray copy of the secret
  return out;
}

bool isIpLiteral(std::string_view text) {
  if (text.empty() || !ipTextIsStrict(text.substr(0, text.find('%')))) return false;
  asio::error_code ec;
  asio::ip::make_address(std::string(text), ec);
  return !ec;
}

std::optional<std::string> normalizeAllowedHost(std::string_view text, std::string* why) {
  std::string host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) {
      *why = "missing ']' after an IPv6 address in '" + std::string(text) + "'";
      return std::nullopt;
    }
    host = std::string(text.substr(1, close - 1));
    if (host.find(':') == std::string::npos || !isIpLiteral(host)) {
      *why = "'" + host + "' in brackets is not an IPv6 address";
      return std::nullopt;
    }
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        *why = "unexpected text after ']' in '" + std::string(text) + "'";
        return std::nullopt;
      }
      port = rest.substr(1);
    }
  } else {
    const std::size_t colon = text.find(':');
    if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos) {
      *why =
          "put IPv6 addresses in brackets, e.g. [fd00::1]:9901 (got '" + std::string(text) + "')";
      return std::nullopt;
    }
    host = std::string(text.substr(0, colon));
    if (colon != std::string_view::npos) port = text.substr(colon + 1);
    if (host.size() > 1 && host.back() == '.') host.pop_back();
    if (!isIpLiteral(host) && !isHostName(host)) {
      *why = "expected a host name, an IP address or either with :PORT, got '" + std::string(text) +
             "'";
      return std::nullopt;
    }
  }
  if (text.find(':') != std::string_view::npos &&
      (text.front() != '[' || text.find("]:") != std::string_view::npos)) {
    const bool digits =
        !port.empty() && port.size() <= 5 &&
        std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || std::stoul(std::string(port)) > 65535) {
      *why = "invalid port in '" + std::string(text) + "' (expected 0-65535)";
      return std::nullopt;
    }
  }
  lowerAsciiInPlace(host);
  std::string out = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (!port.empty()) out += ":" + std::string(port);
  return out;
}

bool isHostName(std::string_view text) {
  if (text.empty() || text.size() > 253 || text.front() == '.' || text.front() == '-') {
    return false;
  }
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return isAsciiAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

LoadResult loadString(const std::string& yaml, const std::string& source_name) {
  LoadResult result;
  result.bootstrap.source = source_name;
  Diagnostics diag(source_name);
  // Before yaml-cpp sees it: deep flow nesting costs it gigabytes.
  if (std::optional<NestingError> deep = checkFlowNesting(yaml, kMaxYamlDepth)) {
    diag.error(Mark{source_name, deep->line, deep->column}, "", tooDeepMessage());
    result.problems = diag.problems();
    return result;
  }
  try {
    // Count documents with a bounded probe instead of YAML::LoadAll, which
    // loops forever (allocating) on input such as "," in yaml-cpp 0.7
    // (jbeder/yaml-cpp#1040): the parser then yields empty documents without
    // consuming anything, which the probe sees as a repeated position.
    std::istringstream in(yaml);
    YAML::Parser parser(in);
    DocumentProbe probe;
    while (probe.starts.size() < 2 && parser.HandleNextDocument(probe)) {
    }
    if (probe.starts.size() == 2) {
      const YAML::Mark& m = probe.starts[1];
      const Mark where{source_name, m.line + 1, m.column + 1};
      if (m.pos == probe.starts[0].pos) {
        diag.error(where, "", "YAML syntax error: unexpected character");
        result.problems = diag.problems();
        return result;
      }
      diag.error(where, "", "expected one YAML document, found more ('---' starts another)");
    }
    // An empty file has no document: validate() then reports the missing
    // listener.
    parseRoot(NodeReader(YAML::Load(yaml), "", diag, Mark{source_name, 1, 1}), result.bootstrap);
  } catch (const TooDeep& e) {
    diag.error(Mark{source_name, e.mark.line + 1, e.mark.column + 1}, "", tooDeepMessage());
    result.problems = diag.problems();
    return result;
  } catch (const YAML::DeepRecursion& e) {
    // Not expected after the checks above; still better than "bad file".
    diag.error(Mark{source_name, e.mark.line + 1, e.mark.column + 1}, "",
               "YAML nested too deep: yaml-cpp gave up at depth " + std::to_string(e.depth()) +
                   " near here");
    result.problems = diag.problems();
    return result;
  } catch (const YAML::ParserException& e) {
    diag.error(Mark{source_name, e.mark.line + 1, e.mark.column + 1}, "",
               "YAML syntax error: " + e.msg);
    result.problems = diag.problems();
    return result;
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws from unexpected places (odd keys, aliases); report, don't crash.
    diag.error(e.mark.line >= 0 ? Mark{source_name, e.mark.line + 1, e.mark.column + 1}
                                : Mark{source_name, 0, 0},
               "", e.msg);
  }
  result.problems = diag.problems();
  for (Problem& p : validate(result.bootstrap)) result.problems.push_back(std::move(p));
  sortByPosition(result.problems);
  return result;
}

LoadResult loadFile(const std::string& path, uint64_t max_bytes) {
  LoadResult result;
  result.bootstrap.source = path;
  std::string why = checkReadableFile(path);
  std::string content;
  if (why.empty()) why = readCapped(path, max_bytes, &content);
  if (!why.empty()) {
    result.problems.push_back(Problem{Mark{}, "", why});
    return result;
  }
  return loadString(content, path);
}

Bootstrap defaultBootstrap() {
  Bootstrap b;
  b.source = "<default>";
  Listener l;
  l.name = "local_proxy";
  l.address = SocketAddress{"127.0.0.1", 3128};
  // The runtime skips ::1 when the host has no IPv6.
  l.additional_addresses.push_back(SocketAddress{"::1", 3128});
  l.filters.push_back(FilterConfig{kAccessLogFilterName, YAML::Node(), Mark{}});
  l.filters.push_back(FilterConfig{kTerminalFilterName, YAML::Node(), Mark{}});
  b.listeners.push_back(std::move(l));
  return b;
}

std::vector<Problem> validate(const Bootstrap& b) {
  Diagnostics diag(b.source);
  if (b.listeners.empty()) {
    diag.error(Mark{}, "static_resources.listeners", "at least one listener is required");
  }

  std::map<std::string, std::size_t> cluster_names;
  for (std::size_t i = 0; i < b.clusters.size(); ++i) {
    const Cluster& c = b.clusters[i];
    const std::string path = "static_resources.clusters[" + std::to_string(i) + "]";
    if (!c.name.empty()) {
      auto [it, fresh] = cluster_names.emplace(c.name, i);
      if (!fresh) {
        diag.error(c.mark, path + ".name",
                   "duplicate cluster name '" + c.name + "' (also static_resources.clusters[" +
                       std::to_string(it->second) + "])");
      }
    }
    if (c.endpoints.empty()) {
      diag.error(c.mark, path + ".load_assignment", "a cluster needs at least one endpoint");
    }
  }

  std::map<std::string, std::string> bound;  // "ip:port" → owner, to catch double binds
  if (b.admin.enabled && b.admin.address.port_value != 0) {
    bound.emplace(addressKey(b.admin.address), "the admin interface");
  }
  std::map<std::string, std::size_t> listener_names;
  for (std::size_t i = 0; i < b.listeners.size(); ++i) {
    const Listener& l = b.listeners[i];
    const std::string path = "static_resources.listeners[" + std::to_string(i) + "]";
    if (!l.name.empty()) {
      auto [it, fresh] = listener_names.emplace(l.name, i);
      if (!fresh) {
        diag.error(l.mark, path + ".name",
                   "duplicate listener name '" + l.name + "' (also static_resources.listeners[" +
                       std::to_string(it->second) + "])");
      }
    }
    std::vector<SocketAddress> addresses{l.address};
    addresses.insert(addresses.end(), l.additional_addresses.begin(), l.additional_addresses.end());
    for (const SocketAddress& a : addresses) {
      if (a.address.empty() || a.port_value == 0) continue;  // unset, or an ephemeral port
      const std::string owner = "listener '" + l.name + "'";
      auto [it, fresh] = bound.emplace(addressKey(a), owner);
      if (!fresh) {
        diag.error(l.mark, path + ".address",
                   "address " + addressKey(a) + " is already used by " + it->second);
      }
    }

    // What the chain holds is the filters' to check (filters/chain.h).
    if (l.filters.empty()) {
      diag.error(l.mark, path + ".filter_chains",
                 std::string("a listener needs one filter chain ending in ") + kTerminalFilterName);
    }
  }

  std::vector<Problem> problems = diag.problems();
  sortByPosition(problems);
  return problems;
}

}  // namespace h2gate::config
