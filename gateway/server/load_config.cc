#include "gateway/server/load_config.h"

#include <utility>

#include <asio/ip/address.hpp>

#include "filters/chain.h"
#include "gateway/net/address.h"
#include "gateway/net/source_ranges.h"

namespace h2gate {
namespace {

std::string rangesPath(std::size_t listener) {
  return "static_resources.listeners[" + std::to_string(listener) +
         "].filter_chains[0].filter_chain_match.source_prefix_ranges";
}

// Builds b's filter chains and checks its listeners' source_prefix_ranges,
// adding their problems to `problems` in file order.
void addChainProblems(config::Bootstrap& b, std::vector<config::Problem>& problems) {
  for (config::Problem& p : filters::buildChains(b)) problems.push_back(std::move(p));
  for (std::size_t i = 0; i < b.listeners.size(); ++i) {
    const std::vector<config::SourcePrefixRange>& ranges = b.listeners[i].source_prefix_ranges;
    for (std::size_t j = 0; j < ranges.size(); ++j) {
      std::string why;
      if (!net::sourceRange(ranges[j], &why))
        problems.push_back({ranges[j].mark, rangesPath(i) + "[" + std::to_string(j) + "]", why});
    }
  }
  config::sortByPosition(problems);
}

// A listener that others can reach needs a list of the clients that may use
// it (config/README.md, "Who may use a listener"): without one, it would be
// an open proxy for whoever reaches the address.
void addOpenListenerProblems(const config::Bootstrap& b, std::vector<config::Problem>& problems) {
  config::Diagnostics diag(b.source);  // names the source when the mark has no file (flags)
  for (std::size_t i = 0; i < b.listeners.size(); ++i) {
    const config::Listener& l = b.listeners[i];
    if (!l.source_prefix_ranges.empty()) continue;
    std::vector<config::SocketAddress> addresses{l.address};
    addresses.insert(addresses.end(), l.additional_addresses.begin(), l.additional_addresses.end());
    for (const config::SocketAddress& a : addresses) {
      asio::error_code ec;
      const asio::ip::address ip = asio::ip::make_address(a.address, ec);
      if (!ec && ip.is_loopback()) continue;
      const std::string where =
          ec ? a.address : net::endpointText(asio::ip::tcp::endpoint(ip, a.port_value));
      diag.error(l.mark, rangesPath(i),
                 "listener '" + l.name + "' listens on " + where +
                     " without source_prefix_ranges (--allow): anyone who can reach it could use "
                     "the proxy; list the clients' ranges, or 0.0.0.0/0 (and ::/0) to allow "
                     "everyone on purpose");
      break;
    }
  }
  problems.insert(problems.end(), diag.problems().begin(), diag.problems().end());
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
  addOpenListenerProblems(b, problems);
  addChainProblems(b, problems);
  return problems;
}

}  // namespace h2gate
