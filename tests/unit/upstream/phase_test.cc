// The phase machinery the data path's classes share: what a transition
// logs, and what an illegal one does.
#include "gateway/upstream/phase.h"

#if !defined(_WIN32)
#include <sys/wait.h>
#include <unistd.h>
#endif

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

using namespace h2gate;
using namespace h2gate::upstream;

namespace {

enum class Door : uint8_t { Shut, Open, Gone };
constexpr PhaseTable<Door, 3> kDoor{"door",
                                    {{
                                        {Door::Shut, "shut", nextPhases(Door::Open, Door::Gone)},
                                        {Door::Open, "open", nextPhases(Door::Shut)},
                                        {Door::Gone, "gone", nextPhases()},
                                    }}};
static_assert(kDoor.wellFormed());
// Rows out of the enum's order are refused when the table is compiled.
static_assert(!PhaseTable<Door, 3>{
    "door",
    {{
        {Door::Open, "open", nextPhases()},
        {Door::Shut, "shut", nextPhases()},
        {Door::Gone, "gone", nextPhases()},
    }}}.wellFormed());

std::vector<std::string> g_reports;
void record(const std::string& line) {
  g_reports.push_back(line);
}

// Log lines go to a temporary file at trace level while it lives; the
// illegal-transition handler records instead of stopping.
struct Capture {
  Capture() : file(std::tmpfile()), level(log::level()) {
    REQUIRE(file);
    log::setOutput(file);
    log::setLevel(log::Level::Trace);
    previous = setIllegalPhaseHandler(&record);
    g_reports.clear();
  }
  ~Capture() {
    setIllegalPhaseHandler(previous);
    log::setLevel(level);
    log::setOutput(nullptr);
    std::fclose(file);
  }
  std::string text() {
    std::fflush(file);
    std::rewind(file);
    std::string out;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, file)) > 0;) out.append(buf, n);
    return out;
  }
  std::FILE* file;
  log::Level level;
  IllegalPhaseHandler previous = nullptr;
};

}  // namespace

TEST_CASE("phase: a legal transition is traced with the connection and stream", "[phase]") {
  Capture c;
  Door d = Door::Shut;
  movePhase(kDoor, d, Door::Open, 12, 3);
  CHECK(d == Door::Open);
  movePhase(kDoor, d, Door::Open, 12, 3);  // no change: nothing to say
  const std::string text = c.text();
  CHECK(text.find("[C12][S3] door shut -> open") != std::string::npos);
  CHECK(text.find("open -> open") == std::string::npos);
  CHECK(g_reports.empty());
}

TEST_CASE(
    "phase: an illegal transition is an error line and goes to the handler (which stops "
    "the process in the debug and ASan builds)",
    "[phase]") {
  Capture c;
  Door d = Door::Gone;
  movePhase(kDoor, d, Door::Open, 12, 3);
  // The release build goes on in the phase it was sent to.
  CHECK(d == Door::Open);
  REQUIRE(g_reports.size() == 1);
  CHECK(g_reports[0] == "illegal phase transition in door: gone -> open");
  const std::string text = c.text();
  CHECK(text.find("error [C12][S3] illegal phase transition in door: gone -> open") !=
        std::string::npos);

  phaseRule(true, "door", "a rule that holds", 12, 3);
  CHECK(g_reports.size() == 1);
  phaseRule(false, "door", "opened while gone", 12, 3);
  REQUIRE(g_reports.size() == 2);
  CHECK(g_reports[1] == "illegal phase transition in door: opened while gone");
}

#if !defined(_WIN32)  // fork(): the Windows build runs the cases above
TEST_CASE(
    "phase: an illegal transition stops the process in the debug and ASan builds, not in "
    "the release build",
    "[phase]") {
  std::fflush(nullptr);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::signal(SIGABRT, SIG_DFL);  // not the test runner's report of a fatal signal
    std::FILE* null = std::fopen("/dev/null", "w");
    if (null) log::setOutput(null);
    setIllegalPhaseHandler(nullptr);  // the default
    Door d = Door::Gone;
    movePhase(kDoor, d, Door::Open, 1, 1);
    _exit(0);
  }
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 1000 && done == 0; ++i) {
    done = waitpid(child, &status, WNOHANG);
    if (done == 0) usleep(10000);
  }
  if (done == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    FAIL("the child did not end within 10 s");
  }
#if !defined(NDEBUG) || defined(H2GATE_SANITIZE)
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGABRT);
#else
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
#endif
}
#endif
