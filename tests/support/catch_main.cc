// main() of the test programs, and the listener that prints the peers' logs.
// Catch2 v3 (Debian 13) has the session and the listener base in headers of
// their own; Catch2 v2 (Debian 12) defines main() in its single header on request.
#if __has_include(<catch2/catch_session.hpp>)
#define H2GATE_CATCH2_V3 1
#include <catch2/catch_session.hpp>
#include <catch2/reporters/catch_reporter_event_listener.hpp>
#include <catch2/reporters/catch_reporter_registrars.hpp>

int main(int argc, char* argv[]) {
  return Catch::Session().run(argc, argv);
}
#else
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#endif

#include <iostream>
#include <string>

#include "tests/support/peer_logs.h"

namespace {

#if H2GATE_CATCH2_V3
using ListenerBase = Catch::EventListenerBase;
#else
using ListenerBase = Catch::TestEventListenerBase;
#endif

// At a test case's first failed check, the tail of every peer's log
// (tests/support/peer_logs.h), so a failed CI run says what each one saw.
struct PeerLogListener : ListenerBase {
  using ListenerBase::ListenerBase;

  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    printed_ = false;
    ListenerBase::testCaseStarting(info);
  }

  // v3's assertionEnded returns nothing, v2's whether to go on printing.
#if H2GATE_CATCH2_V3
  void assertionEnded(const Catch::AssertionStats& stats) override {
    printTailsOnce(stats);
  }
#else
  bool assertionEnded(const Catch::AssertionStats& stats) override {
    printTailsOnce(stats);
    return true;
  }
#endif

 private:
  void printTailsOnce(const Catch::AssertionStats& stats) {
    if (stats.assertionResult.isOk() || printed_) return;
    printed_ = true;
    const std::string tails = h2gate::test::peerLogTails();
    if (!tails.empty())
      std::cout << "\n----- the peers' logs at the first failed check ("
                << stats.assertionResult.getSourceInfo() << ") -----\n"
                << tails << "----- end of the peers' logs -----\n"
                << std::flush;
  }

  bool printed_ = false;
};

}  // namespace

CATCH_REGISTER_LISTENER(PeerLogListener)
