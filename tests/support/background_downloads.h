// Parallel HTTPS downloads through h2gate that are still running when a
// test stops h2gate: startDownloads() returns once h2gate counts them all
// as active requests, so the stop lands mid-transfer; checkDownloads()
// then asserts that every one completed, byte for byte. Used by the drain
// tests (tests/integration/failover_test.cc, windows_exe_test.cc).
// Header-only, like h2_env.h.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/h2_env.h"
#include "tests/support/scrape.h"

namespace h2gate::test {

struct BackgroundDownloads {
  int count = 10;
  // Files out/<prefix>0 .. out/<prefix><count-1>, each URL with
  // ?<prefix><i>; the name of curl's log files is <prefix><count>.
  std::string prefix;
  std::string path;    // on nginx over HTTPS (a CONNECT each); the file must exist
  std::string sha256;  // of that file
  // Added to curl's -sS -x -cacert --parallel --parallel-max <count>
  // --parallel-immediate --limit-rate 4M (e.g. "--http1.1").
  std::vector<std::string> curl_flags;
  std::chrono::milliseconds open_timeout{10000};  // for h2gate to count them all
  std::chrono::milliseconds poll{100};            // how often its metrics are read meanwhile
  std::chrono::milliseconds timeout{60000};       // for curl to finish (checkDownloads)
};

// Starts `d` through `proxy` (h2gate) and returns once h2gate's admin on
// `admin` counts d.count active requests, or after d.open_timeout.
inline std::unique_ptr<Process> startDownloads(H2Env& env, const std::string& proxy, uint16_t admin,
                                               const BackgroundDownloads& d) {
  std::vector<std::string> args{"-sS",
                                "-x",
                                proxy,
                                "--cacert",
                                env.ca.caCertPath(),
                                "--parallel",
                                "--parallel-max",
                                str(d.count),
                                "--parallel-immediate",
                                "--limit-rate",
                                "4M"};
  args.insert(args.end(), d.curl_flags.begin(), d.curl_flags.end());
  for (int i = 0; i < d.count; ++i)
    args.insert(args.end(), {"-o", env.out.file(d.prefix + str(i)),
                             env.nginx.httpsUrl(d.path + "?" + d.prefix + str(i))});
  auto transfers = startCurl(args, env.out.path().string(), d.prefix + str(d.count));
  const auto deadline = Clock::now() + d.open_timeout;
  while (Clock::now() < deadline && scrapeMetrics(admin).sum("h2gate_requests_active") < d.count)
    std::this_thread::sleep_for(d.poll);
  return transfers;
}

// The downloads of startDownloads all complete: curl exits 0 within
// d.timeout and every file is the one at d.path, byte for byte.
inline void checkDownloads(H2Env& env, Process& transfers, const BackgroundDownloads& d) {
  const auto st = transfers.wait(d.timeout);
  REQUIRE(st);
  CHECK(st->exited);
  CHECK(st->code == 0);
  for (int i = 0; i < d.count; ++i) CHECK(sha256File(env.out.file(d.prefix + str(i))) == d.sha256);
}

}  // namespace h2gate::test
