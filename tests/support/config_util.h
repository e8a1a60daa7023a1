// Helpers shared by the unit tests that load configs: problems as text,
// scoped environment variables, small YAML configs, loadYaml.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "config/loader.h"
#include "gateway/server/load_config.h"

namespace h2gate::testing {

inline std::string allProblems(const std::vector<config::Problem>& problems) {
  std::string out;
  for (const auto& p : problems) out += p.str() + "\n";
  return out;
}

inline bool hasProblem(const std::vector<config::Problem>& problems, const std::string& text) {
  return std::any_of(problems.begin(), problems.end(),
                     [&](const config::Problem& p) { return p.str() == text; });
}

// The test process's environment: POSIX setenv/unsetenv; the Windows C
// runtime's _putenv_s (an empty value removes the variable).
inline void setEnv(const char* name, const char* value) {
#ifdef _WIN32
  ::_putenv_s(name, value);
#else
  ::setenv(name, value, 1);
#endif
}
inline void unsetEnv(const char* name) {
#ifdef _WIN32
  ::_putenv_s(name, "");
#else
  ::unsetenv(name);
#endif
}

// Sets (or unsets, with nullopt) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setEnv(name, value->c_str());
    } else {
      unsetEnv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setEnv(name_.c_str(), old_->c_str());
    } else {
      unsetEnv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// A small valid config: tests append or substitute pieces.
inline constexpr const char* kMinimalConfig = R"(static_resources:
  listeners:
  - name: l
    address: {socket_address: {address: 127.0.0.1, port_value: 3128}}
    filter_chains:
    - filters:
      - name: h2gate.filters.forward_proxy
)";

// kMinimalConfig plus one cluster named c whose body (indented 4) follows
// `name: c`.
inline std::string withCluster(const std::string& body) {
  return std::string(kMinimalConfig) +
         "  clusters:\n"
         "  - name: c\n" +
         body;
}

// A cluster's load_assignment (indented 4): one endpoint, p.example:443.
inline constexpr const char* kEndpoint =
    "    load_assignment:\n"
    "      endpoints:\n"
    "      - lb_endpoints:\n"
    "        - endpoint: {address: {socket_address: {address: p.example, port_value: 443}}}\n";

// As h2gate loads it: config's checks and the filter chains
// (gateway/server/load_config.h).
inline config::LoadResult loadYaml(const std::string& yaml) {
  return loadConfigString(yaml, "cfg.yaml");
}

}  // namespace h2gate::testing
