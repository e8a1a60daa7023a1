// Loading a configuration as h2gate runs it: config/ parses it and checks
// its own part (config/loader.h), the filters check and build each
// listener's chain (filters/chain.h). The one way in for the server, the
// command line (and --validate), reload and the config fuzzer, so that all
// of them see the same problems.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/loader.h"
#include "config/node_reader.h"

namespace h2gate {

// config::loadFile / loadString, then filters::buildChains and the check of
// every source_prefix_ranges entry (net::sourceRange) on what was read:
// every problem of these, each with file, line, column and field,
// sorted by position in the file. The filters built are kept in their
// FilterConfig::filter. A file that could not be parsed at all (unreadable,
// YAML syntax) has no listeners, so only its own problem is reported.
config::LoadResult loadConfigFile(const std::string& path,
                                  uint64_t max_bytes = config::kDefaultMaxConfigBytes);
config::LoadResult loadConfigString(const std::string& yaml, const std::string& source_name);

// config::validate and filters::buildChains on an assembled Bootstrap (one
// made from flags, or changed by them, or made in code), sorted by
// position. Filters already built are kept; reset FilterConfig::filter after
// changing a typed_config. Also the rule for the assembled listeners (after
// --listen and --allow): a listener with an address that is not loopback
// needs source_prefix_ranges (config/README.md, "Who may use a listener").
std::vector<config::Problem> checkConfig(config::Bootstrap& b);

}  // namespace h2gate
