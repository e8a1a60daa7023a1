// The filters' part of a configuration: each listener's filter chain.
//
// config/ reads the chain as names and typed_config YAML and checks that a
// listener has one (config::validate); what the chain holds is checked here,
// by building it: every name is a known filter, every typed_config parses
// (its factory's checks, filters/registry.h), and the terminal filter
// (forward_proxy) is last and only last. h2gate runs both checks through one
// entry point (gateway/server/load_config.h).
#pragma once

#include <vector>

#include "config/config.h"
#include "config/node_reader.h"

namespace h2gate::filters {

// Builds every filter of every listener of `b` and keeps it in its
// FilterConfig::filter (not init()ed); a filter already there is used
// instead of being built again from typed_config (reset `filter` after
// changing typed_config). Returns the problems found, each with file, line,
// column and field path (static_resources.listeners[i].filter_chains[0]
// .filters[j]...), sorted by position. A filter whose name is missing or
// unknown, or whose typed_config is invalid, keeps a null `filter`. A
// listener without filters is config's problem (config::validate) and is
// skipped here.
std::vector<config::Problem> buildChains(config::Bootstrap& b);

}  // namespace h2gate::filters
