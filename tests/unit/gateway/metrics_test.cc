#include <prometheus/metric_family.h>

#include <atomic>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "gateway/metrics/families.h"
#include "gateway/metrics/registry.h"
#include "gateway/upstream/health.h"
#include "gateway/upstream/upstream_stats.h"

using namespace h2gate;
using namespace h2gate::metrics;
using namespace std::chrono_literals;

namespace {

const prometheus::MetricFamily* family(const std::vector<prometheus::MetricFamily>& all,
                                       std::string_view name) {
  for (const auto& f : all)
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace

TEST_CASE("metric families follow Prometheus naming conventions", "[metrics]") {
  const std::set<std::string_view> allowed_labels{"listener",   "cluster",  "endpoint", "protocol",
                                                  "direction",  "kind",     "result",   "status",
                                                  "connection", "fallback", "scheme"};
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

TEST_CASE("a scrape adds up every shard's cells with the same labels", "[metrics]") {
  Registry r;
  Shard& a = r.newShard();
  Shard& b = r.newShard();
  a.counter(Family::RelayedBytes, {"proxy", "up", "h2", "downstream"}).add(1000);
  b.counter(Family::RelayedBytes, {"proxy", "up", "h2", "downstream"}).add(24);
  b.counter(Family::RelayedBytes, {"proxy", "up", "h2", "upstream"}).add(7);
  a.gauge(Family::RequestsActive, {"proxy", "connect"}).add(3);
  b.gauge(Family::RequestsActive, {"proxy", "connect"}).sub(1);

  const auto all = r.Collect();
  const auto* bytes = family(all, "h2gate_relayed_bytes_total");
  REQUIRE(bytes);
  REQUIRE(bytes->metric.size() == 2);
  // Sorted by label values: downstream before upstream.
  CHECK(bytes->metric[0].counter.value == 1024);
  CHECK(bytes->metric[0].label.size() == 4);
  CHECK(bytes->metric[0].label[3].name == "direction");
  CHECK(bytes->metric[0].label[3].value == "downstream");
  CHECK(bytes->metric[1].counter.value == 7);
  const auto* active = family(all, "h2gate_requests_active");
  REQUIRE(active);
  REQUIRE(active->metric.size() == 1);
  CHECK(active->metric[0].gauge.value == 2);
  // Families with nothing yet still have HELP and TYPE.
  const auto* goaways = family(all, "h2gate_upstream_goaways_total");
  REQUIRE(goaways);
  CHECK(goaways->metric.empty());
  CHECK(!goaways->help.empty());
}

TEST_CASE("the same labels give the same cell; references stay valid", "[metrics]") {
  Registry r;
  Shard& s = r.newShard();
  Counter& c = s.counter(Family::UpstreamGoaways, {"up", "p:443"});
  for (int i = 0; i < 1000; ++i) s.counter(Family::UpstreamGoaways, {"up", std::to_string(i)});
  CHECK(&s.counter(Family::UpstreamGoaways, {"up", "p:443"}) == &c);
  // Label values are kept apart, not concatenated.
  CHECK(&s.counter(Family::UpstreamGoaways, {"u", "pp:443"}) != &c);
}

TEST_CASE("histograms: bucket edges, cumulative counts, seconds", "[metrics]") {
  Registry r;
  Shard& s = r.newShard();
  Histogram& h = s.histogram(Family::UpstreamConnectDuration, {"up", "p:443"});
  h.observe(100us);  // le 0.0001 (upper bounds are inclusive)
  h.observe(101us);  // le 0.00025
  h.observe(2s);     // le 2.5
  h.observe(31s);    // +Inf
  h.observe(-5ms);   // clock oddities count as 0
  const auto all = r.Collect();
  const auto* f = family(all, "h2gate_upstream_connect_duration_seconds");
  REQUIRE(f);
  REQUIRE(f->metric.size() == 1);
  const auto& hist = f->metric[0].histogram;
  CHECK(hist.sample_count == 5);
  CHECK(hist.sample_sum == Approx(33.000201));
  REQUIRE(hist.bucket.size() == Histogram::kBounds.size() + 1);
  CHECK(hist.bucket[0].upper_bound == 0.0001);
  CHECK(hist.bucket[0].cumulative_count == 2);
  CHECK(hist.bucket[1].cumulative_count == 3);
  CHECK(hist.bucket[13].upper_bound == 2.5);
  CHECK(hist.bucket[13].cumulative_count == 4);
  CHECK(hist.bucket[16].cumulative_count == 4);  // le 30
  CHECK(std::isinf(hist.bucket.back().upper_bound));
  CHECK(hist.bucket.back().cumulative_count == 5);
}

TEST_CASE("a cleared gauge leaves the exposition; nanosecond cells export seconds", "[metrics]") {
  Registry r;
  Shard& s = r.newShard();
  Gauge& rtt = s.gauge(Family::UpstreamConnectionPingRtt, {"up", "p:443", "w0c0"});
  rtt.set(1'500'000);  // 1.5 ms
  auto all = r.Collect();
  const auto* f = family(all, "h2gate_upstream_connection_ping_rtt_seconds");
  REQUIRE(f);
  REQUIRE(f->metric.size() == 1);
  CHECK(f->metric[0].gauge.value == Approx(0.0015));
  rtt.clear();
  all = r.Collect();
  CHECK(family(all, "h2gate_upstream_connection_ping_rtt_seconds")->metric.empty());
}

TEST_CASE("scrapes while a worker writes see a monotonic counter and the final value",
          "[metrics]") {
  Registry r;
  Shard& s = r.newShard();
  Counter& c = s.counter(Family::RelayedBytes, {"proxy", "up", "h2", "upstream"});
  constexpr uint64_t kAdds = 2'000'000;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (uint64_t i = 0; i < kAdds; ++i) {
      c.add(3);
      if (i % 100000 == 0)  // new cells appear while scrapes walk the shard
        s.counter(Family::RelayedBytes, {"proxy", "up", std::to_string(i), "upstream"}).add();
    }
    done = true;
  });
  double last = 0;
  bool monotonic = true;
  int scrapes = 0;
  while (!done) {
    const auto all = r.Collect();
    for (const auto& m : family(all, "h2gate_relayed_bytes_total")->metric)
      if (m.label[2].value == "h2") {
        monotonic = monotonic && m.counter.value >= last;
        last = m.counter.value;
      }
    ++scrapes;
  }
  writer.join();
  CHECK(monotonic);
  CHECK(scrapes > 0);
  CHECK(c.value() == 3 * kAdds);
}

TEST_CASE("the text exposition has HELP, TYPE and samples; sources are appended", "[metrics]") {
  Registry r;
  Shard& s = r.newShard();
  s.counter(Family::DownstreamErrors, {"proxy", "502"}).add(2);
  const size_t id = r.addSource([](std::vector<prometheus::MetricFamily>& out) {
    auto f = gaugeFamily("h2gate_build_info", "version");
    addGauge(f, 1, {{"version", "9.9"}});
    out.push_back(std::move(f));
  });
  std::string text = r.scrape();
  CHECK(text.find("# HELP h2gate_downstream_errors_total ") != std::string::npos);
  CHECK(text.find("# TYPE h2gate_downstream_errors_total counter") != std::string::npos);
  CHECK(text.find("h2gate_downstream_errors_total{listener=\"proxy\",status=\"502\"} 2") !=
        std::string::npos);
  CHECK(text.find("h2gate_build_info{version=\"9.9\"} 1") != std::string::npos);
  r.removeSource(id);
  CHECK(r.scrape().find("h2gate_build_info") == std::string::npos);
}

TEST_CASE("per-connection gauges take the lowest free slot", "[metrics][upstream]") {
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

TEST_CASE("cluster health: up, down, lost", "[metrics][upstream]") {
  upstream::ClusterHealth h("up", {"a:443", "b:443"});
  CHECK(!h.usable());
  h.failed(0, "connection refused");
  CHECK(!h.usable());
  h.connected(1, "h2");
  CHECK(h.usable());
  auto snap = h.snapshot();
  CHECK(snap[0].state == upstream::ClusterHealth::State::Down);
  CHECK(snap[0].last_error == "connection refused");
  CHECK(snap[1].state == upstream::ClusterHealth::State::Up);
  CHECK(snap[1].alpn == "h2");
  // A lost connection is remembered but does not make the endpoint down.
  h.lost(1, "proxy closed the connection");
  CHECK(h.usable());
  CHECK(h.snapshot()[1].last_error == "proxy closed the connection");
  h.failed(1, "timed out");
  CHECK(!h.usable());
  h.connected(0, "");
  CHECK(h.snapshot()[0].alpn == "http/1.1");
  CHECK(h.usable());
}
