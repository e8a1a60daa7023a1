// The table of filters by name. Explicit on purpose: self-registering statics
// in a static library are dropped by the linker when nothing references them.
#include "filters/registry.h"

#include <algorithm>
#include <utility>

#include "filters/access_log.h"
#include "filters/acl.h"
#include "filters/forward_proxy.h"
#include "filters/proxy_auth.h"
#include "filters/upstream_headers.h"

namespace h2gate::filters {
namespace {

using FactoryFn = FilterPtr (*)(config::NodeReader&, const FactoryContext&);

// Sorted by name, so names() and the "known:" list read alphabetically.
constexpr std::pair<const char*, FactoryFn> kFactories[] = {
    {kAccessLog, &createAccessLog},
    {kAcl, &createAcl},
    {kForwardProxy, &createForwardProxy},
    {kProxyAuth, &createProxyAuth},
    {kUpstreamHeaders, &createUpstreamHeaders},
};

FactoryFn find(const std::string& name) {
  for (const auto& [n, f] : kFactories) {
    if (name == n) return f;
  }
  return nullptr;
}

}  // namespace

FilterPtr create(const std::string& name, config::NodeReader& typed_config,
                 const FactoryContext& ctx) {
  const FactoryFn factory = find(name);
  if (factory == nullptr) {
    std::string known;
    for (const std::string& n : names()) known += (known.empty() ? "" : ", ") + n;
    typed_config.error("unknown filter '" + name + "' (known: " + known + ")");
    return nullptr;
  }
  return factory(typed_config, ctx);
}

bool known(const std::string& name) {
  return find(name) != nullptr;
}

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const auto& entry : kFactories) out.emplace_back(entry.first);
  return out;
}

}  // namespace h2gate::filters
