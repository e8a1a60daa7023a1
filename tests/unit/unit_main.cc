// main() of the unit tests (Linux and the Windows cross build alike):
// Catch2's, except when the evaluator tests start this binary again as a
// PAC worker process (gateway/pac_engine/worker.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "gateway/pac_engine/worker.h"
#include "gateway/upstream/phase.h"

int main(int argc, char** argv) {
  if (h2gate::pac::isPacWorker(argc, argv)) return h2gate::pac::runPacWorker();
  // An illegal phase transition (its error line is out already) stops the
  // tests in the release build too, where h2gate itself only logs it.
  h2gate::upstream::setIllegalPhaseHandler([](const std::string&) { std::abort(); });
  return Catch::Session().run(argc, argv);
}
