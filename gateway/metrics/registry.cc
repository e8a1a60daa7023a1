#include "gateway/metrics/registry.h"

#include <map>

#include <prometheus/text_serializer.h>

namespace h2gate::metrics {
namespace {

std::string keyOf(Family f, Labels labels) {
  std::string key(1, static_cast<char>(f));
  for (std::string_view l : labels) {
    key += '\x1f';
    key += l;
  }
  return key;
}

struct Merged {
  double value = 0;
  bool present = false;
  std::array<uint64_t, Histogram::kBounds.size() + 1> buckets{};
  double sum = 0;
};

}  // namespace

template <class T>
T& Shard::find(std::deque<Cell<T>>& cells, Family f, Labels labels) {
  std::string key = keyOf(f, labels);
  if (auto it = index_.find(key); it != index_.end()) return *static_cast<T*>(it->second);
  std::lock_guard lock(mu_);
  Cell<T>& cell = cells.emplace_back();
  cell.family = f;
  cell.labels.assign(labels.begin(), labels.end());
  index_.emplace(std::move(key), &cell.value);
  return cell.value;
}

Counter& Shard::counter(Family f, Labels labels) {
  return find(counters_, f, labels);
}
Gauge& Shard::gauge(Family f, Labels labels) {
  return find(gauges_, f, labels);
}
Histogram& Shard::histogram(Family f, Labels labels) {
  return find(histograms_, f, labels);
}

void Shard::visit(const std::function<void(const CellView&)>& fn) const {
  std::lock_guard lock(mu_);
  for (const auto& c : counters_) fn({c.family, c.labels, &c.value, nullptr, nullptr});
  for (const auto& c : gauges_) fn({c.family, c.labels, nullptr, &c.value, nullptr});
  for (const auto& c : histograms_) fn({c.family, c.labels, nullptr, nullptr, &c.value});
}

Registry& Registry::global() {
  static Registry* r = new Registry;  // never destroyed: threads may outlive statics
  return *r;
}

Shard& Registry::newShard() {
  std::lock_guard lock(mu_);
  return *shards_.emplace_back(std::make_unique<Shard>());
}

size_t Registry::addSource(Source source) {
  std::lock_guard lock(mu_);
  sources_.emplace_back(next_source_, std::move(source));
  return next_source_++;
}

void Registry::removeSource(size_t id) {
  std::lock_guard lock(mu_);
  std::erase_if(sources_, [id](const auto& s) { return s.first == id; });
}

std::vector<prometheus::MetricFamily> Registry::Collect() const {
  // Per family: label values → merged value, sorted for a stable output.
  std::array<std::map<std::vector<std::string>, Merged>, kFamilyCount> merged;
  std::vector<std::pair<size_t, Source>> sources;
  {
    std::lock_guard lock(mu_);
    for (const auto& shard : shards_)
      shard->visit([&](const Shard::CellView& c) {
        Merged& m = merged[static_cast<size_t>(c.family)][c.labels];
        if (c.counter) {
          m.value += static_cast<double>(c.counter->value());
          m.present = true;
        } else if (c.gauge) {
          if (c.gauge->present()) {
            m.value += static_cast<double>(c.gauge->value());
            m.present = true;
          }
        } else {
          for (size_t i = 0; i < m.buckets.size(); ++i) m.buckets[i] += c.histogram->bucket(i);
          m.sum += c.histogram->sumSeconds();
          m.present = true;
        }
      });
    sources = sources_;
  }

  std::vector<prometheus::MetricFamily> out;
  for (size_t f = 0; f < kFamilyCount; ++f) {
    const FamilyDef& def = definition(static_cast<Family>(f));
    prometheus::MetricFamily fam;
    fam.name = std::string(def.name);
    fam.help = std::string(def.help);
    fam.type = def.type == Type::Counter ? prometheus::MetricType::Counter
               : def.type == Type::Gauge ? prometheus::MetricType::Gauge
                                         : prometheus::MetricType::Histogram;
    for (const auto& [labels, m] : merged[f]) {
      if (!m.present) continue;
      prometheus::ClientMetric cm;
      size_t i = 0;
      for (std::string_view name : def.labels)
        cm.label.push_back({std::string(name), i < labels.size() ? labels[i++] : std::string()});
      if (def.type == Type::Counter) {
        cm.counter.value = m.value * def.scale;
      } else if (def.type == Type::Gauge) {
        cm.gauge.value = m.value * def.scale;
      } else {
        uint64_t cumulative = 0;
        for (size_t b = 0; b < m.buckets.size(); ++b) {
          cumulative += m.buckets[b];
          cm.histogram.bucket.push_back(
              {cumulative, b < Histogram::kBounds.size()
                               ? Histogram::kBounds[b]
                               : std::numeric_limits<double>::infinity()});
        }
        cm.histogram.sample_count = cumulative;
        cm.histogram.sample_sum = m.sum;
      }
      fam.metric.push_back(std::move(cm));
    }
    out.push_back(std::move(fam));
  }
  for (const auto& [id, source] : sources) source(out);
  return out;
}

std::string Registry::scrape() const {
  return prometheus::TextSerializer().Serialize(Collect());
}

prometheus::MetricFamily gaugeFamily(std::string name, std::string help) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = prometheus::MetricType::Gauge;
  return f;
}

void addGauge(prometheus::MetricFamily& family, double value,
              std::vector<prometheus::ClientMetric::Label> labels) {
  prometheus::ClientMetric cm;
  cm.label = std::move(labels);
  if (family.type == prometheus::MetricType::Counter)
    cm.counter.value = value;
  else
    cm.gauge.value = value;
  family.metric.push_back(std::move(cm));
}

}  // namespace h2gate::metrics
