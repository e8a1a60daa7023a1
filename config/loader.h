// Loading and validating a Bootstrap.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "config/node_reader.h"

namespace h2gate::config {

struct LoadResult {
  Bootstrap bootstrap;
  std::vector<Problem> problems;  // empty on success
  bool ok() const { return problems.empty(); }
};

// Reads and validates a YAML file. Unreadable file, YAML syntax errors, unknown
// keys, wrong types, out-of-range values and dangling cluster references all
// end up in problems (every one, not just the first).
LoadResult loadFile(const std::string& path);
LoadResult loadString(const std::string& yaml, const std::string& source_name);

// The built-in default: listener "local_proxy" on 127.0.0.1:3128 (plus [::1]:3128
// when IPv6 is available), admin on 127.0.0.1:9901, filters access_log +
// forward_proxy with no cluster (direct mode).
Bootstrap defaultBootstrap();

// Cross-reference and semantic checks on an assembled Bootstrap (used for
// configs built from flags too): dangling cluster references, duplicate names,
// listeners without a terminal forward_proxy filter, unknown filter names.
std::vector<Problem> validate(const Bootstrap& bootstrap);

}  // namespace h2gate::config
