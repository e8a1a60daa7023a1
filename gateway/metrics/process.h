// Standard process_* metrics (CPU, resident memory, open files, start
// time), read from /proc at scrape time. Other platforms export none.
#pragma once

#include <vector>

#include <prometheus/metric_family.h>

namespace h2gate::metrics {

void appendProcessFamilies(std::vector<prometheus::MetricFamily>& out);

}  // namespace h2gate::metrics
