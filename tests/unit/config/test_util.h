// Helpers shared by the config and filter unit tests.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "config/loader.h"

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

// Sets (or unsets, with nullopt) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace h2gate::testing
