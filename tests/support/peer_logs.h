// The logs of the real peers a test started (nginx, squid, nghttpx, the
// test proxies and servers, the KDC, h2gate itself), so that a failed
// check shows what every one of them saw: each fixture registers its log
// files for as long as it lives (PeerLog), and the test runner's listener
// (tests/support/catch_main.cc) prints the tail of each at the first failed
// check of a test case.
#pragma once

#include <cstddef>
#include <string>

namespace h2gate::test {

// Registers one log file under a name for this object's lifetime.
class PeerLog {
 public:
  PeerLog(std::string name, std::string path);
  ~PeerLog();
  PeerLog(const PeerLog&) = delete;
  PeerLog& operator=(const PeerLog&) = delete;

 private:
  unsigned long id_;
};

// The last `lines` lines of every registered log, each under a heading
// with its name and path; "" when none is registered.
std::string peerLogTails(size_t lines = 30);

}  // namespace h2gate::test
