#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <iostream>

#include "tests/support/peer_logs.h"

namespace {

// At a test case's first failed check, the tail of every peer's log
// (tests/support/peer_logs.h), so a failed CI run says what each one saw.
struct PeerLogListener : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;

  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    printed_ = false;
    TestEventListenerBase::testCaseStarting(info);
  }

  bool assertionEnded(const Catch::AssertionStats& stats) override {
    if (!stats.assertionResult.isOk() && !printed_) {
      printed_ = true;
      const std::string tails = h2gate::test::peerLogTails();
      if (!tails.empty())
        std::cout << "\n----- the peers' logs at the first failed check ("
                  << stats.assertionResult.getSourceInfo() << ") -----\n"
                  << tails << "----- end of the peers' logs -----\n"
                  << std::flush;
    }
    return true;
  }

 private:
  bool printed_ = false;
};

}  // namespace

CATCH_REGISTER_LISTENER(PeerLogListener)
