// The metric families: names, types and labels as Prometheus wants them.
#include "gateway/metrics/families.h"

#include <regex>
#include <set>
#include <string>

#include <catch2/catch.hpp>

using namespace h2gate::metrics;

TEST_CASE("metric families follow Prometheus naming conventions", "[metrics]") {
  const std::set<std::string_view> allowed_labels{"listener",   "cluster",  "endpoint", "protocol",
                                                  "direction",  "kind",     "result",   "status",
                                                  "connection", "fallback", "scheme",   "reason"};
  std::set<std::string_view> names;
  for (size_t i = 0; i < kFamilyCount; ++i) {
    const FamilyDef& d = definition(static_cast<Family>(i));
    INFO(d.name);
    CHECK(names.insert(d.name).second);
    CHECK(d.name.starts_with("h2gate_"));
    CHECK(!d.help.empty());
    CHECK(std::regex_match(std::string(d.name), std::regex("[a-z_][a-z0-9_]*")));
    if (d.type == Type::Counter) CHECK(d.name.ends_with("_total"));
    if (d.type != Type::Counter) CHECK(!d.name.ends_with("_total"));
    if (d.type == Type::Histogram) CHECK(d.name.ends_with("_seconds"));
    // Base units: anything scaled from nanoseconds is exported in seconds.
    if (d.scale != 1) CHECK(d.name.find("_seconds") != std::string_view::npos);
    for (std::string_view l : d.labels) CHECK(allowed_labels.count(l) == 1);
  }
  CHECK(definition(Family::RelayedBytes).name == "h2gate_relayed_bytes_total");
  CHECK(definition(Family::UpstreamConnectionSendBuffer).name ==
        "h2gate_upstream_connection_send_buffer_bytes");
}
