#include "gateway/server/load_config.h"

#include <utility>

#include "filters/chain.h"

namespace h2gate {
namespace {

// Builds b's filter chains, adding their problems to `problems` in file order.
void addChainProblems(config::Bootstrap& b, std::vector<config::Problem>& problems) {
  for (config::Problem& p : filters::buildChains(b)) problems.push_back(std::move(p));
  config::sortByPosition(problems);
}

}  // namespace

config::LoadResult loadConfigFile(const std::string& path, uint64_t max_bytes) {
  config::LoadResult r = config::loadFile(path, max_bytes);
  addChainProblems(r.bootstrap, r.problems);
  return r;
}

config::LoadResult loadConfigString(const std::string& yaml, const std::string& source_name) {
  config::LoadResult r = config::loadString(yaml, source_name);
  addChainProblems(r.bootstrap, r.problems);
  return r;
}

std::vector<config::Problem> checkConfig(config::Bootstrap& b) {
  std::vector<config::Problem> problems = config::validate(b);
  addChainProblems(b, problems);
  return problems;
}

}  // namespace h2gate
