// h2gate's PAC engine against pacparser, an independent one (QuickJS with
// Mozilla's PAC functions): the five PAC files of tests/integration/pac/
// for every URL of its queries.txt, at fixed times, with two "own
// addresses", in a mount namespace whose /etc/hosts is pac/hosts and whose
// resolver (a nameserver on 127.0.0.1 nobody runs) knows nothing else, so
// DNS answers the same for both. pacparser runs under faketime; h2gate's
// engine (tests/tools/pac_probe.cc) gets the same instant as its clock.
//
// Every answer must be equal, except where the engines differ on purpose:
// the table kDifferences below says where and why, and each of its rows
// must account for at least one answer (so a difference that goes away is
// noticed too). [pac][pac_compare]
#include <catch2/catch.hpp>

#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/h2gate.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

const std::string kPython = "/opt/h2gate-test/venv/bin/python";
const std::string kPacDir = std::string(H2GATE_SOURCE_DIR) + "/tests/integration/pac";

struct Run {
  std::string label;
  std::string pac;
  std::string my_ip;
  std::string tz;
  std::string when;  // local time in tz, for faketime
  long long epoch_ms;
};

const std::vector<Run> kRuns = {
    {"by_domain", "by_domain.pac", "10.20.4.50", "UTC", "2024-03-15 10:30:00", 1710498600000},
    {"by_subnet, in a branch office", "by_subnet.pac", "10.20.4.50", "UTC", "2024-03-15 10:30:00",
     1710498600000},
    {"by_subnet, elsewhere", "by_subnet.pac", "172.31.0.9", "UTC", "2024-03-15 10:30:00",
     1710498600000},
    {"failover", "failover.pac", "10.20.4.50", "UTC", "2024-03-15 10:30:00", 1710498600000},
    {"ipv6_ex, in a branch office", "ipv6_ex.pac", "10.20.4.50", "UTC", "2024-03-15 10:30:00",
     1710498600000},
    {"ipv6_ex, elsewhere", "ipv6_ex.pac", "192.0.2.200", "UTC", "2024-03-15 10:30:00",
     1710498600000},
    {"by_time, Friday office hours", "by_time.pac", "10.20.4.50", "UTC", "2024-03-15 10:30:00",
     1710498600000},
    {"by_time, Saturday night", "by_time.pac", "10.20.4.50", "UTC", "2024-03-16 03:00:00",
     1710558000000},
    {"by_time, Christmas evening", "by_time.pac", "10.20.4.50", "UTC", "2024-12-25 19:45:00",
     1735155900000},
    {"by_time, Saturday afternoon in April", "by_time.pac", "10.20.4.50", "UTC",
     "2024-04-13 14:00:00", 1713016800000},
    {"by_time, Sunday morning", "by_time.pac", "10.20.4.50", "UTC", "2024-06-16 07:00:00",
     1718521200000},
    {"by_time, Monday lunch", "by_time.pac", "10.20.4.50", "UTC", "2024-07-01 12:30:00",
     1719837000000},
    {"by_time, Friday evening in Tokyo (same day in UTC)", "by_time.pac", "10.20.4.50",
     "Asia/Tokyo", "2024-03-15 19:30:00", 1710498600000},
    {"by_time, Saturday dawn in Tokyo (Friday evening UTC)", "by_time.pac", "10.20.4.50",
     "Asia/Tokyo", "2024-12-21 05:30:00", 1734726600000},
};

bool isIpv6Literal(const std::string& host) {
  return host.find(':') != std::string::npos;
}

// Where the answers differ on purpose.
struct Difference {
  std::string runs;  // a substring of the run labels it applies to
  std::function<bool(const std::string& host)> host;
  std::string pacparser;  // its answer; "*" any
  std::string h2gate;     // ours; "*" any (but different)
  std::string why;
};

const std::vector<Difference> kDifferences = {
    {"by_domain", isIpv6Literal, "DIRECT", "*",
     "isPlainHostName(IPv6 literal): Chromium says false (an address, though it has no dot), "
     "pacparser true"},
    {"by_subnet", isIpv6Literal, "DIRECT", "*", "isPlainHostName(IPv6 literal), as above"},
    {"failover", isIpv6Literal, "DIRECT", "*", "isPlainHostName(IPv6 literal), as above"},
    {"ipv6_ex", isIpv6Literal, "DIRECT", "*", "isPlainHostName(IPv6 literal), as above"},
    {"ipv6_ex",
     [](const std::string& h) { return h == "new.partner.test" || h == "chat.partner.test"; },
     "PROXY proxy.corp.test:8080", "PROXY partner-gw.corp.test:3128",
     "isResolvableEx(unresolvable name): pacparser's is dnsResolveEx(host) != null while its "
     "dnsResolveEx returns \"\" on failure, so every name is 'resolvable'; Chromium and Microsoft "
     "test for \"\""},
    {"Saturday afternoon", [](const std::string& h) { return h.starts_with("backup"); }, "DIRECT",
     "PROXY bulk.corp.test:8080",
     "weekdayRange(\"SAT\", \"SUN\"): Chromium and Mozilla wrap around the week; pacparser 1.5.3 "
     "never wraps, so there it is always false"},
    {"Sunday morning", [](const std::string& h) { return h.starts_with("backup"); },
     "PROXY proxy.corp.test:8080", "PROXY bulk.corp.test:8080",
     "weekdayRange(\"SAT\", \"SUN\") wraps, as above"},
    {"Sunday morning", [](const std::string& h) { return h.ends_with(".media.test"); },
     "PROXY proxy.corp.test:8080", "PROXY weekend-media.corp.test:8080",
     "weekdayRange(\"FRI\", \"MON\") wraps, as above"},
    {"Friday evening in Tokyo", [](const std::string& h) { return h.ends_with(".media.test"); },
     "PROXY proxy.corp.test:8080", "PROXY weekend-media.corp.test:8080",
     "weekdayRange(\"FRI\", \"MON\") on a Friday (local time) wraps, as above"},
    {"Tokyo", [](const std::string&) { return true; }, "PROXY freeze.corp.test:8080",
     "PROXY evening.corp.test:8080",
     "timeRange(18, 0, 23, 59, \"GMT\") at 20:30 UTC when it is already the next day locally: "
     "pacparser (Mozilla's code) compares the UTC time with today's *local* date, a day off, so "
     "it is false all day; h2gate compares the UTC time of day"},
};

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("pac: five PAC files x 112 URLs answer as pacparser does, except where documented",
          "[pac][pac_compare]") {
  if (!haveMountNamespaces()) FAIL("needs root for a private /etc/hosts (unshare -m)");
  if (runCommand({kPython, "-c", "import pacparser"}).exit_code != 0)
    FAIL("pacparser not installed: run deploy/install-deps.sh --test");
  if (runCommand({"faketime", "-f", "2024-01-01 00:00:00", "true"}).exit_code != 0)
    FAIL("faketime not installed: run deploy/install-deps.sh --test");

  TempDir dir("pac-compare");
  const std::string resolv =
      dir.write("resolv.conf", "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n");
  // Both engines in one namespace, one after the other.
  const std::string script = dir.write("run.sh", R"SH(#!/bin/sh
set -e
mount --bind "$HOSTS" /etc/hosts
mount --bind "$RESOLV" /etc/resolv.conf
TZ="$TZV" FAKETIME_DONT_FAKE_MONOTONIC=1 faketime -f "$WHEN" "$PY" "$EVAL" "$PAC" "$QUERIES" "$MYIP" > "$OUT_PP"
TZ="$TZV" "$PROBE" eval --pac "$PAC" --queries "$QUERIES" --my-ip "$MYIP" --now-ms "$NOW_MS" > "$OUT_H2"
)SH");
  const std::string queries_file = kPacDir + "/queries.txt";
  const std::vector<std::string> queries = lines(readFile(queries_file));
  REQUIRE(queries.size() >= 100);

  std::vector<int> used(kDifferences.size(), 0);
  std::size_t compared = 0, equal = 0;
  std::map<std::string, std::size_t> files;
  for (const Run& run : kRuns) {
    INFO("run: " << run.label);
    const std::string pp_out = dir.file("pacparser.out"), h2_out = dir.file("h2gate.out");
    const CommandResult r =
        runCommand({"env", "HOSTS=" + kPacDir + "/hosts", "RESOLV=" + resolv, "TZV=" + run.tz,
                    "WHEN=" + run.when, "PY=" + kPython,
                    "EVAL=" + std::string(H2GATE_SOURCE_DIR) + "/tests/support/pacparser_eval.py",
                    "PAC=" + kPacDir + "/" + run.pac, "QUERIES=" + queries_file,
                    "MYIP=" + run.my_ip, "PROBE=" + H2gate::pacProbePath(H2GATE_PAC_PROBE),
                    "NOW_MS=" + std::to_string(run.epoch_ms), "OUT_PP=" + pp_out,
                    "OUT_H2=" + h2_out, "unshare", "-m", "sh", script},
                   milliseconds(120000));
    INFO("exit " << r.exit_code << "; stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    const std::vector<std::string> pp = lines(readFile(pp_out));
    const std::vector<std::string> h2 = lines(readFile(h2_out));
    REQUIRE(pp.size() == queries.size());
    REQUIRE(h2.size() == queries.size());
    ++files[run.pac];
    for (std::size_t i = 0; i < queries.size(); ++i) {
      const std::string host = queries[i].substr(queries[i].find(' ') + 1);
      ++compared;
      if (pp[i] == h2[i]) {
        ++equal;
        continue;
      }
      bool explained = false;
      for (std::size_t d = 0; d < kDifferences.size() && !explained; ++d) {
        const Difference& diff = kDifferences[d];
        if (run.label.find(diff.runs) == std::string::npos || !diff.host(host)) continue;
        if ((diff.pacparser == "*" || diff.pacparser == pp[i]) &&
            (diff.h2gate == "*" || diff.h2gate == h2[i])) {
          explained = true;
          ++used[d];
        }
      }
      if (!explained)
        FAIL_CHECK("run '" << run.label << "', query '" << queries[i] << "': pacparser '" << pp[i]
                           << "', h2gate '" << h2[i] << "' (no documented reason)");
    }
  }
  for (std::size_t d = 0; d < kDifferences.size(); ++d) {
    INFO("documented difference: " << kDifferences[d].why);
    CHECK(used[d] > 0);
  }
  CHECK(files.size() == 5);
  // The figures for the report.
  std::cerr << "pac_compare: " << files.size() << " PAC files, " << queries.size() << " URLs, "
            << kRuns.size() << " runs: " << compared << " answers compared, " << equal << " equal, "
            << (compared - equal) << " documented differences\n";
  for (std::size_t d = 0; d < kDifferences.size(); ++d)
    std::cerr << "  " << used[d] << " x [" << kDifferences[d].runs << "] " << kDifferences[d].why
              << "\n";
}
