// Builds filters from YAML for the filter unit tests: a Bootstrap with the
// given clusters, one listener, and the problems recorded under `file`; and
// asks a filter what it does with a request or an address.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>

#include <catch2/catch.hpp>

#include "config/node_reader.h"
#include "filters/filter.h"
#include "filters/registry.h"
#include "gateway/net/ip_address.h"

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

// The environment of the app-facing filters' tests: listener app1, clusters
// corp and partner.
struct App1Env : FilterEnv {
  App1Env() : FilterEnv("h.yaml", {"corp", "partner"}) { listener.name = "app1"; }
};

// A CONNECT to example.com:443 with `headers`.
inline RequestHead connectWith(Headers headers) {
  RequestHead h;
  h.method = "CONNECT";
  h.is_connect = true;
  h.host = "example.com";
  h.port = 443;
  h.target = "example.com:443";
  h.headers = std::move(headers);
  return h;
}

inline RequestHead requestHead(const std::string& host, uint16_t port, bool connect) {
  RequestHead h;
  h.method = connect ? "CONNECT" : "GET";
  h.is_connect = connect;
  h.host = host;
  h.port = port;
  h.target = connect ? host + ":" + std::to_string(port) : "http://" + host + "/";
  return h;
}

// Where the filter sends the request: "cluster NAME [> fallbacks]",
// "DIRECT", "continue" or "reject STATUS: reason".
inline std::string route(const filters::Filter& f, const std::string& host, uint16_t port = 443,
                         bool connect = true) {
  StreamInfo info;
  const filters::FilterStatus s = f.onRequestHead(requestHead(host, port, connect), info);
  if (info.status != 0) return "reject " + std::to_string(info.status) + ": " + info.reason;
  if (s == filters::FilterStatus::Continue) return "continue";
  std::string out = info.cluster.empty() ? "DIRECT" : "cluster " + info.cluster;
  for (const std::string& c : info.fallbacks) out += " > " + (c.empty() ? "DIRECT" : c);
  return out;
}

// What the filter says about one resolved address of `host` (direct mode):
// "ok" or "STATUS: reason".
inline std::string address(const filters::Filter& f, const std::string& host, const std::string& ip,
                           uint16_t port = 443, bool connect = true) {
  const std::optional<net::IpAddress> a = net::parseIp(ip);
  REQUIRE(a);
  const std::optional<Refusal> r =
      f.checkAddress(requestHead(host, port, connect), StreamInfo{}, *a);
  return r ? std::to_string(r->status) + ": " + r->reason : "ok";
}

}  // namespace h2gate::testing
