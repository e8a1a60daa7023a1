// main() of the unit tests (Linux and the Windows cross build alike):
// Catch2's, except when the evaluator tests start this binary again as a
// PAC worker process (gateway/pac_engine/worker.h). Catch2 v3 (Debian 13)
// declares its session in <catch2/catch_session.hpp>; v2's single header
// (Debian 12) declares it when CATCH_CONFIG_RUNNER is defined.
#if __has_include(<catch2/catch_session.hpp>)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

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
