// Checks run on a config's text before yaml-cpp parses it, so that hostile
// or broken input gets a precise error instead of costing gigabytes.
//
// yaml-cpp 0.7 queues every token of a flow collection until it knows
// whether the collection is a mapping key, so "[[[[…" (8 MiB of '[') costs
// about 1.9 GB and 8 s before its depth guard answers "bad file" at the end
// of the file. checkFlowNesting() finds such nesting in one pass over the
// bytes, allocating nothing.
#pragma once

#include <optional>
#include <string_view>

namespace h2gate::config {

struct NestingError {
  int depth = 0;   // the depth reached at the bracket (max_depth + 1)
  int line = 0;    // of that bracket, 1-based
  int column = 0;  // 1-based, in bytes
};

// The first '[' or '{' that opens a flow collection more than `max_depth`
// levels deep, or nullopt. A lexer for just enough of YAML to tell flow
// indicators from text: quoted scalars, comments, block scalars (| and >)
// and brackets inside plain scalars are skipped, so a bracket in a string
// never counts. It may miss nesting that the real parser sees (block
// collections, or unusual spellings): the loader checks the parsed depth
// too. A plain scalar continued on the next line with a '[' at that line's
// start is taken for a flow collection: it takes more than `max_depth`
// such unbalanced brackets to report nesting that is not there.
std::optional<NestingError> checkFlowNesting(std::string_view yaml, int max_depth);

}  // namespace h2gate::config
