#include "filters/chain.h"

#include <string>
#include <string_view>
#include <utility>

#include "config/loader.h"
#include "filters/registry.h"

namespace h2gate::filters {

// config/ names these two itself (the default chain, the "a listener needs
// one filter chain" problem); the names are the filters'.
static_assert(std::string_view(config::kAccessLogFilterName) == kAccessLog);
static_assert(std::string_view(config::kTerminalFilterName) == kForwardProxy);

namespace {

std::string knownNames() {
  std::string out;
  for (const std::string& n : names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

std::vector<config::Problem> buildChains(config::Bootstrap& b) {
  config::Diagnostics diag(b.source);
  for (std::size_t i = 0; i < b.listeners.size(); ++i) {
    config::Listener& l = b.listeners[i];
    const std::string path = "static_resources.listeners[" + std::to_string(i) + "]";
    const FactoryContext ctx{b, l};
    for (std::size_t j = 0; j < l.filters.size(); ++j) {
      config::FilterConfig& fc = l.filters[j];
      const std::string fpath = path + ".filter_chains[0].filters[" + std::to_string(j) + "]";
      if (fc.name.empty()) continue;  // the loader reported the missing name
      if (!known(fc.name)) {
        diag.error(fc.mark, fpath + ".name",
                   "unknown filter '" + fc.name + "' (known: " + knownNames() + ")");
        continue;
      }
      FilterPtr f = fc.filter;
      if (!f) {
        config::NodeReader typed(fc.typed_config, fpath + ".typed_config", diag, fc.mark);
        f = create(fc.name, typed, ctx);
      }
      const bool terminal = f ? f->terminal() : fc.name == kForwardProxy;
      const bool last = j + 1 == l.filters.size();
      if (terminal && !last) {
        diag.error(fc.mark, fpath + ".name",
                   "'" + fc.name + "' is terminal and must be the last filter of the chain");
      } else if (!terminal && last) {
        diag.error(fc.mark, fpath + ".name",
                   std::string("the last filter must be ") + kForwardProxy +
                       " (it routes the request), got '" + fc.name + "'");
      }
      fc.filter = std::move(f);
    }
  }
  std::vector<config::Problem> problems = diag.problems();
  config::sortByPosition(problems);
  return problems;
}

}  // namespace h2gate::filters
