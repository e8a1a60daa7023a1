// Console control events reaching the Server as stops (server_signals_win.cc),
// in the process itself: the test gives itself a console of its own (so no
// other process sharing the runner's console gets the event) and raises the
// event with GenerateConsoleCtrlEvent. Built only by the mingw-w64 cross
// build (tests/windows/, unit_windows) and run under wine; the Linux build
// compiles this file to nothing (SIGTERM/SIGINT are tested through the
// daemon by the integration tests).
//
// Wine 8 delivers CTRL_C_EVENT this way, but refuses CTRL_BREAK_EVENT
// (GenerateConsoleCtrlEvent fails with ERROR_INVALID_HANDLE under its
// headless console): that case says so and checks nothing under wine; on
// Windows it runs in full. A console close (CTRL_CLOSE_EVENT) cannot be
// raised by a program at all; it takes the same handler
// (deploy/windows/README.md).
#ifdef _WIN32
#include <windows.h>

#include <chrono>
#include <string>

#include <asio.hpp>
#include <catch2/catch.hpp>

#include "gateway/server/server_signals.h"

using namespace h2gate;
using namespace std::chrono_literals;

namespace {

// A console of the test's own for the lifetime of the object.
struct OwnConsole {
  OwnConsole() {
    ::FreeConsole();
    ok = ::AllocConsole() != 0;
    // A process started in a new process group ignores Ctrl+C until told.
    ::SetConsoleCtrlHandler(nullptr, FALSE);
  }
  ~OwnConsole() { ::FreeConsole(); }
  bool ok = false;
};

// Raises `event` and runs `io` until the ServerSignals' handler has run (or
// 5 s); what the handler was told, or "" when it was not called. *raised
// gets GenerateConsoleCtrlEvent's result, *error its error code.
std::string raiseAndWait(asio::io_context& io, ServerSignals& signals, DWORD event, bool* raised,
                         DWORD* error) {
  std::string name;
  bool stop = false;
  signals.asyncWait([&](ServerSignals::Kind kind, const std::string& n) {
    stop = kind == ServerSignals::Kind::Stop;
    name = n;
  });
  *raised = ::GenerateConsoleCtrlEvent(event, 0) != 0;
  *error = *raised ? 0 : ::GetLastError();
  if (!*raised) {
    signals.cancel();
    return "";
  }
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (name.empty() && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_for(50ms);
  }
  CHECK(stop);
  return name;
}

}  // namespace

TEST_CASE("ServerSignals (Windows): Ctrl+C and Ctrl+Break in the console are stops",
          "[server_signals]") {
  OwnConsole console;
  REQUIRE(console.ok);
  asio::io_context io;
  ServerSignals signals(io);
  bool raised = false;
  DWORD error = 0;

  SECTION("Ctrl+C") {
    CHECK(raiseAndWait(io, signals, CTRL_C_EVENT, &raised, &error) == "Ctrl+C");
    INFO("GenerateConsoleCtrlEvent error " << error);
    CHECK(raised);
  }
  SECTION("Ctrl+Break") {
    const std::string name = raiseAndWait(io, signals, CTRL_BREAK_EVENT, &raised, &error);
    if (!raised && ::GetModuleHandleW(L"ntdll.dll") &&
        ::GetProcAddress(::GetModuleHandleW(L"ntdll.dll"), "wine_get_version")) {
      WARN("wine cannot raise CTRL_BREAK_EVENT (GenerateConsoleCtrlEvent error "
           << error << "): the Ctrl+Break case is left to Windows");
      return;
    }
    CHECK(raised);
    CHECK(name == "Ctrl+Break");
  }
}
#endif  // _WIN32
