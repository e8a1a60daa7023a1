// Standard process_* metrics (CPU, resident memory, open files, start
// time), read at scrape time: from /proc on Linux (process_linux.cc), from
// GetProcessTimes, GetProcessMemoryInfo and the handle count on Windows
// (process_win.cc; open "fds" are the process's handles there, as
// Prometheus' own Go client reports them). Other POSIX systems export none
// (process_posix.cc).
#pragma once

#include <vector>

#include <prometheus/metric_family.h>

namespace h2gate::metrics {

void appendProcessFamilies(std::vector<prometheus::MetricFamily>& out);

}  // namespace h2gate::metrics
