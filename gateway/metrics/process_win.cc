#include <windows.h>
// psapi.h after windows.h: PROCESS_MEMORY_COUNTERS.
#include <psapi.h>

#include "gateway/metrics/process.h"
#include "gateway/metrics/registry.h"

namespace h2gate::metrics {
namespace {

// FILETIME: 100 ns units.
double seconds(const FILETIME& t) {
  const ULONGLONG v = (static_cast<ULONGLONG>(t.dwHighDateTime) << 32) | t.dwLowDateTime;
  return static_cast<double>(v) / 1e7;
}

// Seconds between 1601-01-01 (FILETIME's epoch) and 1970-01-01.
constexpr double kEpochDelta = 11644473600.0;

}  // namespace

void appendProcessFamilies(std::vector<prometheus::MetricFamily>& out) {
  HANDLE self = ::GetCurrentProcess();
  FILETIME created{}, exited{}, kernel{}, user{};
  if (::GetProcessTimes(self, &created, &exited, &kernel, &user)) {
    prometheus::MetricFamily cpu = gaugeFamily("process_cpu_seconds_total",
                                               "Total user and system CPU time spent in seconds.");
    cpu.type = prometheus::MetricType::Counter;
    addGauge(cpu, seconds(kernel) + seconds(user));
    out.push_back(std::move(cpu));
  }
  PROCESS_MEMORY_COUNTERS mem_counters{};
  if (::K32GetProcessMemoryInfo(self, &mem_counters, sizeof mem_counters)) {
    prometheus::MetricFamily mem =
        gaugeFamily("process_resident_memory_bytes", "Resident memory size in bytes.");
    addGauge(mem, static_cast<double>(mem_counters.WorkingSetSize));
    out.push_back(std::move(mem));
  }
  DWORD handles = 0;
  if (::GetProcessHandleCount(self, &handles)) {
    prometheus::MetricFamily open =
        gaugeFamily("process_open_fds", "Number of open file descriptors (Windows: handles).");
    addGauge(open, static_cast<double>(handles));
    out.push_back(std::move(open));
  }
  if (created.dwHighDateTime != 0 || created.dwLowDateTime != 0) {
    prometheus::MetricFamily started = gaugeFamily(
        "process_start_time_seconds", "Start time of the process since unix epoch in seconds.");
    addGauge(started, seconds(created) - kEpochDelta);
    out.push_back(std::move(started));
  }
}

}  // namespace h2gate::metrics
