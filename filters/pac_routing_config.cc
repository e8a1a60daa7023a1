#include "filters/pac_routing_config.h"

#include <algorithm>

#include "config/loader.h"
#include "filters/forward_proxy.h"
#include "gateway/net/host_name.h"
#include "gateway/pac_engine/fetch.h"
#include "gateway/upstream/router.h"

namespace h2gate::filters {
namespace {

std::string_view withoutBrackets(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    return host.substr(1, host.size() - 2);
  return host;
}

// `host` (no brackets) as h2gate compares it: an IP address in canonical
// form (*ip set), or a name in normal form. nullopt when it is neither.
std::optional<std::string> comparable(std::string_view host, bool* ip) {
  std::string why;
  *ip = host.find(':') != std::string_view::npos || net::endsInNumber(host);
  if (*ip) return net::canonicalRequestHost(host, host.find(':') != std::string_view::npos, &why);
  return net::normalizeHostName(host, &why);
}

}  // namespace

std::string AuthenticateTo::add(std::string_view entry) {
  const std::string quoted = "'" + std::string(entry) + "'";
  if (entry == "*") {
    every_ = true;
    shown_.emplace_back("*");
    return {};
  }
  if (entry.empty()) return "an empty entry (for none at all, write authenticate_to: [])";
  if (entry.front() == '.') {
    std::string why;
    std::optional<std::string> domain = net::normalizeHostName(entry.substr(1), &why);
    if (!domain || domain->empty() || entry.find('*') != std::string_view::npos)
      return quoted + " is not a .domain (" + (why.empty() ? "expected .example.com" : why) + ")";
    if (net::endsInNumber(*domain))
      return quoted + " is not a .domain: it ends in a number (list IP addresses one by one)";
    suffixes_.push_back(*domain);
    shown_.push_back("." + *domain);
    return {};
  }
  if (entry.find('*') != std::string_view::npos)
    return quoted +
           ": only \"*\" alone is a wildcard; for a domain and every host under it "
           "write .example.com";
  const std::string_view host = withoutBrackets(entry);
  const bool bracketed = host.size() != entry.size();
  if (!bracketed && host.find(':') != std::string_view::npos && !config::isIpLiteral(host))
    return quoted + " is not a host: write the host without a port";
  bool ip = false;
  std::optional<std::string> value = comparable(host, &ip);
  if (!value) return quoted + " is not a host name or an IP address";
  exact_.push_back(*value);
  shown_.push_back(*value);
  return {};
}

AuthenticateTo AuthenticateTo::everyProxy() {
  AuthenticateTo out;
  out.add("*");
  return out;
}

AuthenticateTo AuthenticateTo::domainOf(std::string_view host_in) {
  AuthenticateTo out;
  const std::string_view host = withoutBrackets(host_in);
  bool ip = false;
  std::optional<std::string> value = comparable(host, &ip);
  if (!value || value->empty()) return out;
  const std::size_t labels = ip ? 1 : std::count(value->begin(), value->end(), '.') + 1;
  if (labels >= 3) {
    const std::string domain = value->substr(value->find('.') + 1);
    out.suffixes_.push_back(domain);
    out.shown_.push_back("." + domain);
  } else {
    out.exact_.push_back(*value);
    out.shown_.push_back(*value);
  }
  return out;
}

bool AuthenticateTo::allows(std::string_view host_in) const {
  if (every_) return true;
  bool ip = false;
  std::optional<std::string> host = comparable(withoutBrackets(host_in), &ip);
  if (!host || host->empty()) return false;
  if (std::find(exact_.begin(), exact_.end(), *host) != exact_.end()) return true;
  if (ip) return false;
  return std::any_of(suffixes_.begin(), suffixes_.end(), [&](const std::string& d) {
    return *host == d || (host->size() > d.size() && host->ends_with(d) &&
                          (*host)[host->size() - d.size() - 1] == '.');
  });
}

std::string AuthenticateTo::str() const {
  std::string out = "[";
  for (const std::string& e : shown_) out += (out.size() > 1 ? ", " : "") + e;
  return out + "]";
}

AuthenticateTo defaultAuthenticateTo(const pac::PacSourceConfig& source,
                                     const pac::PacScript* script, std::string* from) {
  using Kind = pac::PacSourceConfig::Kind;
  auto domainOfUrl = [&](const std::string& url) {
    *from = "the domain of " + url;
    pac::FetchUrl parsed;
    if (!pac::parseFetchUrl(url, &parsed).empty()) return AuthenticateTo{};
    return AuthenticateTo::domainOf(parsed.host);
  };
  switch (source.kind) {
    case Kind::File:
      *from = "every proxy: the PAC file is on h2gate's own disk";
      return AuthenticateTo::everyProxy();
    case Kind::Url:
      return domainOfUrl(source.location);
    case Kind::Wpad:
    case Kind::System:
      break;
  }
  if (!script) {
    *from = "no PAC file yet";
    return {};
  }
  if (!script->url.empty()) return domainOfUrl(script->url);
  AuthenticateTo out;
  for (const std::string& entry : script->manual_proxies) {
    bool tls = false;
    std::string host;
    uint16_t port = 0;
    if (upstream::parseProxyRoute(entry, &tls, &host, &port)) out.add(host);
  }
  *from = script->manual_proxies.empty() ? "the PAC file " + script->origin + " names no proxy"
                                         : "the proxies of the system's manual settings";
  return out;
}

namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

// A duration at `key` into `out` (milliseconds), within [min, max].
void durationAt(config::NodeReader& r, const char* key, milliseconds min, milliseconds max,
                milliseconds& out) {
  std::optional<config::Duration> d = r.duration(key);
  if (!d) return;
  const milliseconds ms = duration_cast<milliseconds>(*d);
  if (ms < min || ms > max) {
    r.errorAt(key, "must be between " + std::to_string(min.count()) + " ms and " +
                       std::to_string(max.count() / 1000) + " s");
    return;
  }
  out = ms;
}

void parseEvaluation(config::NodeReader& e, PacRouteConfig& out) {
  if (e.isNull() || !e.expectMap()) return;
  e.allowOnly({"timeout", "dns_timeout", "memory_limit", "threads", "cache_entries", "cache_bytes",
               "cache_ttl"});
  durationAt(e, "timeout", milliseconds(10), milliseconds(60000), out.evaluation.timeout);
  durationAt(e, "dns_timeout", milliseconds(10), milliseconds(60000), out.dns_timeout);
  if (auto v = e.uint("memory_limit", 1u << 20, uint64_t(4) << 30))
    out.memory_limit = static_cast<std::size_t>(*v);
  if (auto v = e.uint("threads", 1, 64)) out.evaluation.threads = static_cast<unsigned>(*v);
  if (auto v = e.uint("cache_entries", 0, 10'000'000))
    out.evaluation.cache_entries = static_cast<std::size_t>(*v);
  if (auto v = e.uint("cache_bytes", 64u << 10, uint64_t(4) << 30))
    out.evaluation.cache_bytes = static_cast<std::size_t>(*v);
  durationAt(e, "cache_ttl", milliseconds(0), milliseconds(24 * 3600 * 1000),
             out.evaluation.cache_ttl);
  // Not given: at most the evaluation's timeout.
  if (!e.has("dns_timeout") && out.dns_timeout > out.evaluation.timeout)
    out.dns_timeout = out.evaluation.timeout;
  if (out.dns_timeout > out.evaluation.timeout)
    e.errorAt("dns_timeout", "is longer than timeout (" +
                                 std::to_string(out.evaluation.timeout.count()) +
                                 " ms), which bounds every evaluation with its DNS calls");
}

void parseFallback(config::NodeReader& f, const FactoryContext& ctx, PacRouteConfig& out) {
  if (f.isNull() || !f.expectMap()) return;
  f.allowOnly({"direct", "cluster", "reject"});
  const int n = int(f.has("direct")) + int(f.has("cluster")) + int(f.has("reject"));
  if (n != 1) {
    f.error(n == 0 ? "needs one of direct: true, cluster: NAME or reject: STATUS"
                   : "takes only one of direct, cluster and reject");
    return;
  }
  if (f.has("direct")) {
    if (auto d = f.boolean("direct"); d && !*d)
      f.errorAt("direct", "takes only true (otherwise name a cluster or reject)");
    out.fallback.kind = PacRouteConfig::Fallback::Kind::Direct;
  } else if (f.has("cluster")) {
    if (auto c = f.string("cluster")) {
      if (std::string err = unknownCluster(*c, ctx); !err.empty()) f.errorAt("cluster", err);
      out.fallback.kind = PacRouteConfig::Fallback::Kind::Cluster;
      out.fallback.cluster = *c;
    }
  } else {
    if (auto s = f.uint("reject", 400, 599)) out.fallback.status = static_cast<int>(*s);
    out.fallback.kind = PacRouteConfig::Fallback::Kind::Reject;
  }
}

void parseProxies(config::NodeReader& p, PacRouteConfig& out) {
  if (p.isNull() || !p.expectMap()) return;
  p.allowOnly({"connect_timeout", "trusted_ca", "max_connections", "max_proxies", "idle_timeout",
               "proxy_authentication", "authenticate_to"});
  milliseconds connect = duration_cast<milliseconds>(out.proxies.cluster.connect_timeout);
  durationAt(p, "connect_timeout", milliseconds(10), milliseconds(300000), connect);
  out.proxies.cluster.connect_timeout = connect;
  if (auto ca = p.string("trusted_ca")) {
    if (ca->empty()) p.errorAt("trusted_ca", "expected a file");
    out.proxies.cluster.tls->trusted_ca = *ca;
  }
  if (auto v = p.uint("max_connections", 1, 1024))
    out.proxies.cluster.max_connections = static_cast<uint32_t>(*v);
  if (auto v = p.uint("max_proxies", 1, 4096)) out.proxies.max_proxies = *v;
  durationAt(p, "idle_timeout", milliseconds(1000), milliseconds(24 * 3600 * 1000),
             out.proxies.idle_timeout);
  // As a cluster's (config/README.md); which proxies get it: authenticate_to.
  config::NodeReader auth = p.child("proxy_authentication");
  out.proxies.cluster.authentication = config::parseProxyAuthentication(auth, out.proxies.cluster);
  if (p.has("authenticate_to")) {
    AuthenticateTo to;
    for (config::NodeReader& entry : p.list("authenticate_to")) {
      if (!entry.node().IsScalar())
        entry.error("expected a host name, .domain, an IP address or \"*\"");
      else if (std::string why = to.add(entry.node().Scalar()); !why.empty())
        entry.error(why);
    }
    out.proxies.authenticate_to = std::move(to);
    if (!p.has("proxy_authentication"))
      p.errorAt("authenticate_to",
                "says which proxies get proxy_authentication's credentials, but there is no "
                "proxy_authentication");
  }
}

}  // namespace

std::optional<PacRouteConfig> parsePacRoute(config::NodeReader& r, const FactoryContext& ctx,
                                            const std::string& route_name) {
  const std::size_t before = r.diagnostics().problems().size();
  if (!r.expectMap()) return std::nullopt;
  r.allowOnly({"url", "file", "wpad", "system", "refresh_interval", "retry_interval",
               "fetch_timeout", "max_size", "trusted_ca", "evaluation", "fallback", "on_loop",
               "proxies"});
  PacRouteConfig out;
  out.source.name = route_name;
  out.evaluation.name = route_name;

  const int sources =
      int(r.has("url")) + int(r.has("file")) + int(r.has("wpad")) + int(r.has("system"));
  if (sources != 1) {
    r.error(sources == 0 ? "needs where the PAC file comes from: one of url, file, wpad: true "
                           "or system: true"
                         : "takes only one of url, file, wpad and system");
  } else if (r.has("url")) {
    if (auto url = r.string("url")) {
      pac::FetchUrl parsed;
      if (std::string err = pac::parseFetchUrl(*url, &parsed); !err.empty()) r.errorAt("url", err);
      out.source.kind = pac::PacSourceConfig::Kind::Url;
      out.source.location = *url;
    }
  } else if (r.has("file")) {
    if (auto file = r.string("file")) {
      if (file->empty()) r.errorAt("file", "expected a path");
      out.source.kind = pac::PacSourceConfig::Kind::File;
      out.source.location = *file;
    }
  } else {
    const char* key = r.has("wpad") ? "wpad" : "system";
    if (auto b = r.boolean(key); b && !*b)
      r.errorAt(key, "takes only true (leave it out, or choose url or file)");
    out.source.kind =
        r.has("wpad") ? pac::PacSourceConfig::Kind::Wpad : pac::PacSourceConfig::Kind::System;
  }

  durationAt(r, "refresh_interval", milliseconds(0), milliseconds(7 * 24 * 3600 * 1000),
             out.source.refresh_interval);
  if (out.source.refresh_interval.count() > 0 && out.source.refresh_interval < milliseconds(1000))
    r.errorAt("refresh_interval", "must be 0s (never) or at least 1s");
  durationAt(r, "retry_interval", milliseconds(1000), milliseconds(24 * 3600 * 1000),
             out.source.retry_interval);
  durationAt(r, "fetch_timeout", milliseconds(100), milliseconds(300000), out.source.fetch.timeout);
  if (auto v = r.uint("max_size", 1024, 256u << 20))
    out.source.fetch.max_bytes = static_cast<std::size_t>(*v);
  if (auto ca = r.string("trusted_ca")) {
    if (out.source.kind != pac::PacSourceConfig::Kind::Url ||
        out.source.location.rfind("https://", 0) != 0)
      r.errorAt("trusted_ca", "applies only to an https:// url");
    out.source.fetch.trusted_ca = *ca;
  }
  config::NodeReader evaluation = r.child("evaluation");
  parseEvaluation(evaluation, out);
  config::NodeReader fallback = r.child("fallback");
  parseFallback(fallback, ctx, out);
  if (auto loop = r.choice("on_loop", {"direct", "reject"}))
    out.on_loop =
        *loop == "reject" ? PacRouteConfig::OnLoop::Reject : PacRouteConfig::OnLoop::Direct;

  config::NodeReader proxies = r.child("proxies");
  parseProxies(proxies, out);

  if (r.diagnostics().problems().size() != before) return std::nullopt;
  return out;
}

}  // namespace h2gate::filters
