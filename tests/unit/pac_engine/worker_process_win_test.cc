// What only the Windows twin of the PAC worker process
// (gateway/pac_engine/worker_process_win.cc) decides: a worker has no console,
// so no conhost.exe runs beside it. A console per worker is a process per
// worker for nothing, and under wine 8 a console host whose worker was killed
// early could outlive it and h2gate: the wine session, and every pipe of the
// program that started h2gate.exe, stayed open (tests/windows/run.sh's unit
// tests hung after "All tests passed" until ctest's timeout). Built only by
// the mingw-w64 cross build (tests/windows/) and run under wine; the Linux
// build compiles this file to nothing.
#ifdef _WIN32
#include <windows.h>

#include <tlhelp32.h>

#include <catch2/catch.hpp>

#include <cwchar>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gateway/pac_engine/worker_process.h"

using namespace h2gate::pac;

namespace {

struct ProcessEntry {
  DWORD pid;
  DWORD parent;
  std::wstring exe;
};

std::vector<ProcessEntry> processes() {
  std::vector<ProcessEntry> all;
  HANDLE snap = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
  REQUIRE(snap != INVALID_HANDLE_VALUE);
  PROCESSENTRY32W e{};
  e.dwSize = sizeof e;
  for (BOOL ok = Process32FirstW(snap, &e); ok; ok = Process32NextW(snap, &e))
    all.push_back({e.th32ProcessID, e.th32ParentProcessID, e.szExeFile});
  CloseHandle(snap);
  return all;
}

// The console hosts started by one of `pids`.
int consoleHostsOf(const std::set<DWORD>& pids) {
  int n = 0;
  for (const ProcessEntry& p : processes())
    if (_wcsicmp(p.exe.c_str(), L"conhost.exe") == 0 && pids.count(p.parent)) ++n;
  return n;
}

}  // namespace

TEST_CASE("worker process (Windows): a worker has no console, so no conhost.exe runs for it",
          "[pac][worker_process]") {
  std::vector<std::unique_ptr<WorkerProcess>> workers;
  std::set<DWORD> pids;
  for (int i = 0; i < 4; ++i) {
    std::string error;
    workers.push_back(WorkerProcess::start("worker_process_win_test", &error));
    INFO(error);
    REQUIRE(workers.back());
    pids.insert(static_cast<DWORD>(workers.back()->pid()));
  }
  // A worker's Hello is written after its C runtime (and any console) is set up.
  for (auto& w : workers) {
    char b[1];
    REQUIRE(w->read(b, sizeof b) == 1);
  }
  CHECK(consoleHostsOf(pids) == 0);
  for (auto& w : workers) w->kill();
  workers.clear();
  CHECK(consoleHostsOf(pids) == 0);
}

#endif  // _WIN32
