// The line reading of `h2gate credentials set` (gateway/server/terminal.h):
// readLine() over scripted input, as both platforms' readSecretLine feed it.
// (The terminal itself, with its prompt and echo off, needs a real terminal:
// tests/integration/keyring_test.cc runs the command with a pipe.)
#include "gateway/server/terminal.h"

#include <string>

#include <catch2/catch.hpp>

using h2gate::terminal::ByteRead;
using h2gate::terminal::readLine;

namespace {

// Input of `bytes`, then the end (or a read error when `error_at_end`);
// counts the bytes taken.
struct Script {
  std::string bytes;
  bool error_at_end = false;
  size_t taken = 0;

  bool read(std::string* line) {
    return readLine(
        [this](char* c) {
          if (taken == bytes.size()) return error_at_end ? ByteRead::Error : ByteRead::End;
          *c = bytes[taken++];
          return ByteRead::Byte;
        },
        line);
  }
};

}  // namespace

TEST_CASE("terminal: one line, nothing beyond it taken", "[terminal]") {
  Script in{"s3cret\nnext line\n"};
  std::string line = "old";
  REQUIRE(in.read(&line));
  CHECK(line == "s3cret");
  CHECK(in.taken == 7);  // the second line stays for whoever reads next
  REQUIRE(in.read(&line));
  CHECK(line == "next line");
}

TEST_CASE("terminal: CRLF, a last line without a break, spaces kept", "[terminal]") {
  std::string line;
  Script crlf{"pa ss\r\n"};
  REQUIRE(crlf.read(&line));
  CHECK(line == "pa ss");
  Script last{" no break "};
  REQUIRE(last.read(&line));
  CHECK(line == " no break ");
  Script empty_line{"\n"};
  REQUIRE(empty_line.read(&line));
  CHECK(line.empty());  // an empty password is the caller's to refuse
}

TEST_CASE("terminal: no input, a read error, a line over 64 KiB: false and nothing kept",
          "[terminal]") {
  std::string line = "old";
  Script none{""};
  CHECK_FALSE(none.read(&line));
  CHECK(line.empty());

  Script broken{"half a pass", /*error_at_end=*/true};
  CHECK_FALSE(broken.read(&line));
  CHECK(line.empty());

  Script longest{std::string(64 * 1024, 'x') + "\n"};
  REQUIRE(longest.read(&line));
  CHECK(line.size() == 64 * 1024);
  Script too_long{std::string(64 * 1024 + 1, 'x') + "\n"};
  CHECK_FALSE(too_long.read(&line));
  CHECK(line.empty());
  CHECK(too_long.taken == 64 * 1024 + 1);  // stopped there, not at the end
}
