#include "gateway/upstream/phase.h"

#include <atomic>
#include <cstdlib>

namespace h2gate::upstream {
namespace {

void stopIfChecking(const std::string&) {
  if constexpr (kPhaseChecksStop) std::abort();
}

std::atomic<IllegalPhaseHandler> g_handler{&stopIfChecking};

}  // namespace

IllegalPhaseHandler setIllegalPhaseHandler(IllegalPhaseHandler handler) {
  return g_handler.exchange(handler ? handler : &stopIfChecking);
}

void reportIllegalPhase(const char* machine, const char* from, const char* to, uint64_t conn_id,
                        uint64_t stream_id) {
  std::string line = std::string("illegal phase transition in ") + machine + ": " + from;
  if (to) line += std::string(" -> ") + to;
  log::write(log::Level::Error, conn_id, stream_id, line);
  g_handler.load()(line);
}

}  // namespace h2gate::upstream
