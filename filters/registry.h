// Filters by name. Each filter file registers a factory that parses its
// typed_config with a NodeReader (recording problems with file:line:column)
// and returns the filter, or nullptr when the config is invalid.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/node_reader.h"
#include "filters/filter.h"

namespace h2gate::filters {

// What a factory may look at besides its own typed_config.
struct FactoryContext {
  const config::Bootstrap& bootstrap;  // to check cluster references
  const config::Listener& listener;
};

using Factory = std::function<FilterPtr(config::NodeReader& typed_config, const FactoryContext&)>;

// Returns nullptr and records "unknown filter" when the name is not
// registered; otherwise whatever the factory returns.
FilterPtr create(const std::string& name, config::NodeReader& typed_config,
                 const FactoryContext& ctx);
bool known(const std::string& name);
std::vector<std::string> names();

// Names as they appear in configs.
inline constexpr const char* kForwardProxy = "h2gate.filters.forward_proxy";
inline constexpr const char* kAccessLog = "h2gate.filters.access_log";
inline constexpr const char* kAcl = "h2gate.filters.acl";
inline constexpr const char* kUpstreamHeaders = "h2gate.filters.upstream_headers";
inline constexpr const char* kProxyAuth = "h2gate.filters.proxy_auth";

}  // namespace h2gate::filters
