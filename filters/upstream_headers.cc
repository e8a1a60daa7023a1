#include "filters/upstream_headers.h"

#include <algorithm>

#include "filters/forward_proxy.h"
#include "gateway/base/ascii.h"

namespace h2gate::filters {
namespace {

bool validName(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), isHttpTokenChar);
}

bool validValue(const std::string& value) {
  return std::none_of(value.begin(), value.end(),
                      [](unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; });
}

// Sets `h` in `out`, replacing a header of the same name.
void put(Headers& out, Header h) {
  auto same = [&](const Header& x) { return iequals(x.name, h.name); };
  out.erase(std::remove_if(out.begin(), out.end(), same), out.end());
  out.push_back(std::move(h));
}

// request_headers_to_add and proxy_credentials at this level, into `out`.
void parseHeaderSet(config::NodeReader& r, Headers& out) {
  for (config::NodeReader& item : r.list("request_headers_to_add")) {
    if (!item.expectMap()) continue;
    item.allowOnly({"header"});
    config::NodeReader h = item.child("header", true);
    if (h.isNull() || !h.expectMap()) continue;
    h.allowOnly({"key", "value"});
    auto key = h.string("key", true);
    auto value = h.string("value", true);
    if (key && !validName(*key)) {
      h.errorAt("key", "'" + *key + "' is not a valid header name");
      continue;
    }
    // Never quote the value: it is likely a secret.
    if (value && !validValue(*value)) {
      h.errorAt("value", "control characters are not allowed in a header value");
      continue;
    }
    if (key && iequals(*key, "host"))
      h.errorAt("key", "Host is set from the request target and cannot be added");
    else if (key && value)
      put(out, Header{*key, *value});
  }
  config::NodeReader creds = r.child("proxy_credentials");
  if (!creds.isNull() && creds.expectMap()) {
    creds.allowOnly({"username", "password"});
    auto user = creds.string("username", true);
    auto pass = creds.string("password", true);
    if (user && (user->empty() || user->find(':') != std::string::npos))
      creds.errorAt("username", "must be non-empty and without ':'");
    else if (user && pass)
      put(out, Header{"Proxy-Authorization", basicCredentials(*user, *pass)});
  }
}

}  // namespace

FilterPtr createUpstreamHeaders(config::NodeReader& r, const FactoryContext& ctx) {
  if (!r.expectMap()) return nullptr;
  const std::size_t before = r.diagnostics().problems().size();
  r.allowOnly({"@type", "request_headers_to_add", "proxy_credentials", "clusters",
               "forward_proxy_authorization"});
  r.expectType(kUpstreamHeadersType);
  UpstreamHeaders headers;
  parseHeaderSet(r, headers.all);
  for (config::NodeReader& item : r.list("clusters")) {
    if (!item.expectMap()) continue;
    item.allowOnly({"cluster", "request_headers_to_add", "proxy_credentials"});
    auto name = item.string("cluster", true);
    if (name) {
      if (std::string err = unknownCluster(*name, ctx); !err.empty()) item.errorAt("cluster", err);
      for (const auto& [seen, unused] : headers.by_cluster)
        if (seen == *name) item.errorAt("cluster", "cluster '" + *name + "' is listed twice");
    }
    Headers merged = headers.all;
    parseHeaderSet(item, merged);
    if (name) headers.by_cluster.emplace_back(*name, std::move(merged));
  }
  bool forward = false;
  if (auto f = r.boolean("forward_proxy_authorization")) forward = *f;
  if (forward) {
    for (const config::FilterConfig& fc : ctx.listener.filters)
      if (fc.name == kProxyAuth)
        r.errorAt("forward_proxy_authorization",
                  "cannot be true on a listener with proxy_auth: the app's Proxy-Authorization "
                  "is h2gate's own credential there");
  }
  if (r.diagnostics().problems().size() != before) return nullptr;
  return std::make_shared<UpstreamHeadersFilter>(std::move(headers), forward);
}

}  // namespace h2gate::filters
