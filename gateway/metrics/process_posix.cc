// The process_* metrics on POSIX systems other than Linux (process.h): none.
// Linux reads /proc (process_linux.cc), Windows asks the process API
// (process_win.cc); the BSDs and macOS would need sysctl or libproc, which
// nothing here uses yet.
#include "gateway/metrics/process.h"

namespace h2gate::metrics {

void appendProcessFamilies(std::vector<prometheus::MetricFamily>&) {}

}  // namespace h2gate::metrics
