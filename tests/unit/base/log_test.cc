#include "gateway/base/log.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "../../support/temp_dir.h"

using namespace h2gate;
namespace fs = std::filesystem;

namespace {

// Lines of a file (without their newlines).
std::vector<std::string> linesOf(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The number a line written by writeNumbered() carries, or -1.
long numberIn(const std::string& line) {
  const auto at = line.find("line #");
  if (at == std::string::npos) return -1;
  return std::stol(line.substr(at + 6));
}

// Lines "line #first" ... "line #last-1", each padded to about 100 bytes.
void writeNumbered(long first, long last) {
  for (long i = first; i < last; ++i)
    log::write(log::Level::Info, 7, 0, "line #" + std::to_string(i) + " " + std::string(60, 'x'));
}

// Back to stderr when a test ends, whatever happened.
struct RestoreStderr {
  ~RestoreStderr() { log::setOutput(nullptr); }
};

}  // namespace

TEST_CASE("log file: rotated at the size limit, keep old files, no line lost or split", "[log]") {
  test::TempDir dir("log");
  const std::string path = dir.file("h2gate.log");
  RestoreStderr restore;
  std::string error;
  REQUIRE(log::setOutputFile(path, {.max_bytes = 4096, .keep = 2}, &error));
  writeNumbered(0, 300);  // ~33 KB: eight rotations
  log::setOutput(nullptr);

  // The current file and two old ones; the older ones are gone.
  CHECK(fs::exists(path + ".1"));
  CHECK(fs::exists(path + ".2"));
  CHECK_FALSE(fs::exists(path + ".3"));
  for (const std::string& f : {path, path + ".1", path + ".2"}) {
    INFO(f);
    // At most one line beyond the limit.
    CHECK(fs::file_size(f) < 4096 + 200);
  }
  CHECK(fs::file_size(path + ".1") >= 4096);
  CHECK(fs::file_size(path + ".2") >= 4096);

  // Oldest to newest, the kept lines are whole and consecutive, ending with
  // the last one written.
  std::vector<std::string> lines;
  for (const std::string& f : {path + ".2", path + ".1", path}) {
    for (auto& l : linesOf(f)) lines.push_back(std::move(l));
  }
  REQUIRE(lines.size() > 80);
  long expected = numberIn(lines.front());
  REQUIRE(expected > 0);  // the first lines were rotated away
  for (const auto& l : lines) {
    INFO(l);
    CHECK(l.find(" info  [C7] line #") != std::string::npos);
    CHECK(l.size() > 80);
    CHECK(numberIn(l) == expected);
    ++expected;
  }
  CHECK(expected == 300);
}

TEST_CASE("log file: appended to; already over the limit it rotates at once; 0 never rotates",
          "[log]") {
  test::TempDir dir("log");
  const std::string path = dir.file("h2gate.log");
  RestoreStderr restore;
  dir.write("h2gate.log", std::string(5000, 'o') + "\n");
  std::string error;

  SECTION("over the limit from an earlier run") {
    REQUIRE(log::setOutputFile(path, {.max_bytes = 4096, .keep = 5}, &error));
    writeNumbered(0, 2);
    log::setOutput(nullptr);
    // The old content moved to .1 with the first new line; the second is new.
    const auto old = linesOf(path + ".1");
    REQUIRE(old.size() == 2);
    CHECK(old[0] == std::string(5000, 'o'));
    CHECK(numberIn(old[1]) == 0);
    const auto now = linesOf(path);
    REQUIRE(now.size() == 1);
    CHECK(numberIn(now[0]) == 1);
  }
  SECTION("max 0: one file, however long") {
    REQUIRE(log::setOutputFile(path, {.max_bytes = 0, .keep = 5}, &error));
    writeNumbered(0, 200);
    log::setOutput(nullptr);
    CHECK_FALSE(fs::exists(path + ".1"));
    const auto lines = linesOf(path);
    REQUIRE(lines.size() == 201);
    CHECK(lines[0] == std::string(5000, 'o'));
    CHECK(numberIn(lines[200]) == 199);
  }
  SECTION("keep 0: the full file is dropped") {
    REQUIRE(log::setOutputFile(path, {.max_bytes = 4096, .keep = 0}, &error));
    writeNumbered(0, 3);
    log::setOutput(nullptr);
    CHECK_FALSE(fs::exists(path + ".1"));
    const auto lines = linesOf(path);
    REQUIRE(lines.size() == 2);
    CHECK(numberIn(lines[0]) == 1);
  }
}

TEST_CASE("log file: when it cannot be rotated, h2gate says so and goes on appending", "[log]") {
  test::TempDir dir("log");
  const std::string path = dir.file("h2gate.log");
  RestoreStderr restore;
  // path.1 is a directory that is not empty: neither removed nor replaced by
  // a rename, on POSIX and Windows alike (as a file another program holds
  // open without sharing deletion is, on Windows).
  fs::create_directory(path + ".1");
  dir.write("h2gate.log.1/keep", "x");
  std::string error;
  REQUIRE(log::setOutputFile(path, {.max_bytes = 4096, .keep = 1}, &error));
  writeNumbered(0, 60);  // ~6 KB: one failed rotation
  std::vector<std::string> lines = linesOf(path);
  REQUIRE(lines.size() == 61);
  long warnings = 0;
  long expected = 0;
  for (const auto& l : lines) {
    if (l.find(" warn  log file " + path + " could not be renamed to " + path + ".1") !=
        std::string::npos) {
      ++warnings;
      continue;
    }
    CHECK(numberIn(l) == expected++);
  }
  CHECK(warnings == 1);
  CHECK(expected == 60);

  // Once the obstacle is gone, the next attempt (after another 4096 bytes) works.
  fs::remove_all(path + ".1");
  writeNumbered(60, 100);
  log::setOutput(nullptr);
  REQUIRE(fs::is_regular_file(path + ".1"));
  CHECK(linesOf(path + ".1").size() > 61);
  CHECK(numberIn(linesOf(path).back()) == 99);
}

TEST_CASE("log file: a path that cannot be opened is an error naming it", "[log]") {
  test::TempDir dir("log");
  const std::string path = dir.file("no-such-dir/h2gate.log");
  std::string error;
  CHECK_FALSE(log::setOutputFile(path, {}, &error));
  CHECK(error.find(path + ": cannot open for appending: ") == 0);
  CHECK(error.size() > path.size() + 30);
}
