// Parallel HTTPS downloads through h2gate that are still running when a
// test stops h2gate: startDownloads() returns once h2gate counts them all
// as active requests, so the stop lands mid-transfer; checkDownloads()
// then asserts that every one completed, byte for byte; quitDuringDownloads()
// is the drain test built of both. Used by the drain tests
// (tests/integration/failover_test.cc, windows_exe_test.cc).
// Header-only, like h2_env.h.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
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

// The drain: POST /quitquitquit (curl -X POST -H 'X-H2gate-Admin: 1'
// http://127.0.0.1:ADMIN/quitquitquit) while `d` runs through `gate`. h2gate
// answers that it drains all d.count of them; `while_draining` (if any) runs
// next; then every download completes byte for byte and h2gate exits 0
// within `exit_timeout`.
inline void quitDuringDownloads(H2Env& env, H2gate& gate, const BackgroundDownloads& d,
                                std::chrono::milliseconds exit_timeout,
                                const std::function<void()>& while_draining = {}) {
  auto transfers = startDownloads(env, gate.proxyUrl(), gate.adminPort(), d);
  const AdminReply r =
      adminRequest("POST", gate.adminPort(), "/quitquitquit", {"X-H2gate-Admin: 1"});
  INFO(gate.process().logTail(20));
  CHECK(r.status == 200);
  CHECK(r.body == "draining " + str(d.count) + " connection(s)\n");
  if (while_draining) while_draining();
  checkDownloads(env, *transfers, d);
  const auto exit = gate.process().wait(exit_timeout);
  REQUIRE(exit);
  CHECK(exit->exited);
  CHECK(exit->code == 0);
}

}  // namespace h2gate::test
