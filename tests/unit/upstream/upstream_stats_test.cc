// An endpoint's metric cells: per-connection gauges.
#include "gateway/upstream/upstream_stats.h"

#include <prometheus/metric_family.h>

#include <memory>
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "gateway/metrics/registry.h"

using namespace h2gate;
using namespace h2gate::metrics;

namespace {

const prometheus::MetricFamily* family(const std::vector<prometheus::MetricFamily>& all,
                                       std::string_view name) {
  for (const auto& f : all)
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace

TEST_CASE("per-connection gauges take the lowest free slot", "[upstream][metrics]") {
  Registry r;
  Shard& s = r.newShard();
  auto stats = upstream::makeEndpointStats(s, "up", "p:443", 2);
  auto labels = [&] {
    std::set<std::string> out;
    const auto all = r.Collect();
    for (const auto& m : family(all, "h2gate_upstream_connection_send_buffer_bytes")->metric)
      out.insert(m.label[2].value);
    return out;
  };
  {
    upstream::EndpointStats::ConnectionGauges c0(*stats);
    auto c1 = std::make_unique<upstream::EndpointStats::ConnectionGauges>(*stats);
    c0.sendBuffer(1000);
    c1->sendBuffer(2000);
    CHECK(labels() == std::set<std::string>{"w2c0", "w2c1"});
    c1.reset();
    CHECK(labels() == std::set<std::string>{"w2c0"});
    upstream::EndpointStats::ConnectionGauges c2(*stats);
    c2.sendBuffer(3000);
    CHECK(labels() == std::set<std::string>{"w2c0", "w2c1"});
  }
  CHECK(labels().empty());
}
