// Shards, cells and the registry: what a scrape sees.
#include "gateway/metrics/registry.h"

#include <prometheus/metric_family.h>

#include <atomic>
#include <cmath>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

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
  std::atomic<int> scrapes{0};
  std::thread writer([&] {
    for (uint64_t i = 0; i < kAdds; ++i) {
      // Halfway, wait for a scrape: on a loaded machine the writer could
      // otherwise finish before the scraping thread ran at all.
      if (i == kAdds / 2)
        while (scrapes.load() == 0) std::this_thread::yield();
      c.add(3);
      if (i % 100000 == 0)  // new cells appear while scrapes walk the shard
        s.counter(Family::RelayedBytes, {"proxy", "up", std::to_string(i), "upstream"}).add();
    }
    done = true;
  });
  double last = 0;
  bool monotonic = true;
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
  CHECK(scrapes.load() > 0);
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
