// Where metric cells live and how a scrape finds them.
//
// A Shard belongs to one thread (a worker; the main thread has its own): its
// cells are created and written only there, and cell references stay valid
// for the shard's life. The Registry keeps every shard ever made (counters
// must not go backwards when a thread ends) and is the prometheus-cpp
// Collectable: a scrape walks all shards, adds up the cells with the same
// labels, and appends the families computed at scrape time (build info,
// readiness, endpoint health, process figures) from registered sources.
#pragma once

#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "gateway/metrics/cells.h"
#include "gateway/metrics/families.h"

namespace h2gate::metrics {

using Labels = std::initializer_list<std::string_view>;

class Shard {
 public:
  Shard() = default;
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // The cell for these label values (as many as the family has labels, in
  // its order), created on first use. Owner thread only; the reference is
  // stable. A lookup costs a hash of the labels: resolve cells when a
  // request or connection starts, not per byte.
  Counter& counter(Family f, Labels labels);
  Gauge& gauge(Family f, Labels labels);
  Histogram& histogram(Family f, Labels labels);

  struct CellView {
    Family family;
    const std::vector<std::string>& labels;
    const Counter* counter;
    const Gauge* gauge;
    const Histogram* histogram;
  };
  // Any thread.
  void visit(const std::function<void(const CellView&)>& fn) const;

 private:
  template <class T>
  struct Cell {
    Family family;
    std::vector<std::string> labels;
    T value;
  };
  template <class T>
  T& find(std::deque<Cell<T>>& cells, Family f, Labels labels);

  mutable std::mutex mu_;  // guards the deques' structure against visit()
  std::deque<Cell<Counter>> counters_;
  std::deque<Cell<Gauge>> gauges_;
  std::deque<Cell<Histogram>> histograms_;
  std::unordered_map<std::string, void*> index_;  // owner thread only
};

class Registry : public prometheus::Collectable {
 public:
  using Source = std::function<void(std::vector<prometheus::MetricFamily>&)>;

  // The process's registry.
  static Registry& global();

  // A new shard for the calling thread (or the worker about to run).
  Shard& newShard();
  // Families computed at scrape time. Returns an id for removeSource().
  size_t addSource(Source source);
  void removeSource(size_t id);

  std::vector<prometheus::MetricFamily> Collect() const override;
  // Text exposition format 0.0.4.
  std::string scrape() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<std::pair<size_t, Source>> sources_;
  size_t next_source_ = 1;
};

// Helpers for sources.
prometheus::MetricFamily gaugeFamily(std::string name, std::string help);
void addGauge(prometheus::MetricFamily& family, double value,
              std::vector<prometheus::ClientMetric::Label> labels = {});

}  // namespace h2gate::metrics
