// The process_* metrics (gateway/metrics/process.h) through their interface,
// on each platform: Linux reads /proc (process_linux.cc), Windows the process
// API (process_win.cc); other POSIX systems export none (process_posix.cc).
// What a dashboard plots must be the process's own figures, in the units the
// Prometheus conventions name.
#include "gateway/metrics/process.h"

#include <prometheus/metric_family.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/support/temp_dir.h"

#ifdef _WIN32
#include <windows.h>
#endif

using namespace h2gate;

namespace {

// The single value of family `name`; -1 when it is absent.
double value(const std::string& name) {
  std::vector<prometheus::MetricFamily> all;
  metrics::appendProcessFamilies(all);
  for (const auto& f : all) {
    if (f.name != name) continue;
    REQUIRE(f.metric.size() == 1);
    return f.type == prometheus::MetricType::Counter ? f.metric[0].counter.value
                                                     : f.metric[0].gauge.value;
  }
  return -1;
}

}  // namespace

#if defined(__linux__) || defined(_WIN32)

TEST_CASE("process metrics: the process's own figures", "[metrics][process]") {
  std::vector<prometheus::MetricFamily> all;
  metrics::appendProcessFamilies(all);
  std::vector<std::string> names;
  for (const auto& f : all) names.push_back(f.name);
  CHECK(names == std::vector<std::string>{"process_cpu_seconds_total",
                                          "process_resident_memory_bytes", "process_open_fds",
                                          "process_start_time_seconds"});
  // A test binary holds megabytes, not bytes or terabytes.
  const double rss = value("process_resident_memory_bytes");
  CHECK(rss > 1e6);
  CHECK(rss < 1e11);
  // Started before now, and not before the machine booted a year ago.
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const double start = value("process_start_time_seconds");
  CHECK(start <= now + 1);
  CHECK(start > now - 365 * 86400.0);
}

TEST_CASE("process metrics: CPU time grows with work, open files with files",
          "[metrics][process]") {
  const double cpu_before = value("process_cpu_seconds_total");
  CHECK(cpu_before >= 0);
  // Work until the figure moves (a tick is 10 ms of CPU; on a loaded
  // machine the thread gets a share of each second), at most 10 s.
  volatile double x = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  double cpu = cpu_before;
  while (cpu <= cpu_before && std::chrono::steady_clock::now() < until) {
    for (int i = 0; i < 1000000; ++i) x = x + 1;
    cpu = value("process_cpu_seconds_total");
  }
  CHECK(cpu > cpu_before);

  test::TempDir dir("process-metrics");
  const double fds_before = value("process_open_fds");
#ifdef _WIN32
  // wine answers GetProcessHandleCount with no count: nothing to compare.
  if (const HMODULE ntdll = ::GetModuleHandleW(L"ntdll.dll");
      fds_before == 0 && ntdll && ::GetProcAddress(ntdll, "wine_get_version")) {
    WARN("under wine: no handle count (process_open_fds 0)");
    return;
  }
#endif
  std::vector<std::FILE*> files;
  for (int i = 0; i < 20; ++i)
    files.push_back(std::fopen((dir.path() / ("f" + std::to_string(i))).string().c_str(), "w"));
  const double fds_during = value("process_open_fds");
  for (std::FILE* f : files)
    if (f) std::fclose(f);
  CHECK(fds_during >= fds_before + 20);
  CHECK(value("process_open_fds") < fds_during);
}

#else

TEST_CASE("process metrics: none on this system", "[metrics][process]") {
  std::vector<prometheus::MetricFamily> all;
  metrics::appendProcessFamilies(all);
  CHECK(all.empty());
}

#endif
