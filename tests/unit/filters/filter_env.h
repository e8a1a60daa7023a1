// Builds filters from YAML for the filter unit tests: a Bootstrap with the
// given clusters, one listener, and the problems recorded under `file`.
#pragma once

#include <initializer_list>
#include <string>

#include "config/node_reader.h"
#include "filters/registry.h"

namespace h2gate::testing {

struct FilterEnv {
  FilterEnv(const char* file, std::initializer_list<const char*> clusters) : diag(file) {
    for (const char* name : clusters) {
      config::Cluster c;
      c.name = name;
      c.endpoints.push_back(config::SocketAddress{"proxy.example", 443});
      bootstrap.clusters.push_back(c);
    }
    listener.name = "l";
  }
  // The filter `name` with typed_config `yaml` (path "typed_config"), or
  // nullptr with the problems in diag.
  filters::FilterPtr make(const char* name, const std::string& yaml) {
    config::NodeReader r(YAML::Load(yaml), "typed_config", diag);
    return filters::create(name, r, filters::FactoryContext{bootstrap, listener});
  }
  config::Diagnostics diag;
  config::Bootstrap bootstrap;
  config::Listener listener;
};

}  // namespace h2gate::testing
