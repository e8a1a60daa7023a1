// main() of the unit tests (Linux and the Windows cross build alike):
// Catch2's, except when the evaluator tests start this binary again as a
// PAC worker process (gateway/pac_engine/worker.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "gateway/pac_engine/worker.h"

int main(int argc, char** argv) {
  if (h2gate::pac::isPacWorker(argc, argv)) return h2gate::pac::runPacWorker();
  return Catch::Session().run(argc, argv);
}
