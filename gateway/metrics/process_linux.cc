// The process_* metrics on Linux, from /proc (process.h).
#include "gateway/metrics/process.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "gateway/metrics/registry.h"

namespace h2gate::metrics {
namespace {

// Seconds since the epoch at which the machine booted (/proc/stat btime).
double bootTime() {
  std::ifstream in("/proc/stat");
  std::string key;
  while (in >> key) {
    if (key == "btime") {
      double t = 0;
      in >> t;
      return t;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

}  // namespace

void appendProcessFamilies(std::vector<prometheus::MetricFamily>& out) {
  std::ifstream in("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command name, which is in parentheses and may hold
  // spaces: state is field 3, utime 14, stime 15, starttime 22, rss 24.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return;
  std::istringstream fields(stat.substr(close + 2));
  std::vector<std::string> f;
  for (std::string x; fields >> x;) f.push_back(x);
  if (f.size() < 22) return;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  const double utime = std::stod(f[11]), stime = std::stod(f[12]);
  const double start = std::stod(f[19]), rss = std::stod(f[21]);

  prometheus::MetricFamily cpu =
      gaugeFamily("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.");
  cpu.type = prometheus::MetricType::Counter;
  addGauge(cpu, (utime + stime) / ticks);
  out.push_back(std::move(cpu));

  prometheus::MetricFamily mem =
      gaugeFamily("process_resident_memory_bytes", "Resident memory size in bytes.");
  addGauge(mem, rss * page);
  out.push_back(std::move(mem));

  size_t fds = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++fds;
  prometheus::MetricFamily open =
      gaugeFamily("process_open_fds", "Number of open file descriptors.");
  addGauge(open, static_cast<double>(fds));
  out.push_back(std::move(open));

  prometheus::MetricFamily started = gaugeFamily(
      "process_start_time_seconds", "Start time of the process since unix epoch in seconds.");
  addGauge(started, bootTime() + start / ticks);
  out.push_back(std::move(started));
}

}  // namespace h2gate::metrics
