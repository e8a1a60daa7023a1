// Standard input on POSIX systems (gateway/server/terminal.h): termios's
// ECHO flag off while a terminal's line is typed.
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include <openssl/crypto.h>

#include "gateway/server/terminal.h"

namespace h2gate::terminal {
namespace {

constexpr std::size_t kMaxLine = 64 * 1024;

}  // namespace

bool stdinIsTerminal() {
  return ::isatty(STDIN_FILENO) == 1;
}

bool readSecretLine(const std::string& prompt, std::string* out) {
  const bool tty = stdinIsTerminal();
  termios saved{};
  bool restore = false;
  if (tty) {
    std::fputs(prompt.c_str(), stderr);
    std::fflush(stderr);
    if (::tcgetattr(STDIN_FILENO, &saved) == 0) {
      termios quiet = saved;
      quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
      quiet.c_lflag |= ECHONL;
      restore = ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) == 0;
    }
  }
  std::string& line = *out;
  line.clear();
  line.reserve(kMaxLine + 1);  // no reallocation: no stray copies of the secret
  bool failed = false;
  // One byte at a time: nothing beyond the line is taken from the input.
  for (;;) {
    char c = 0;
    const ssize_t n = ::read(STDIN_FILENO, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failed = n < 0 || line.empty();  // end of input: a last line without '\n' counts
      break;
    }
    if (c == '\n') break;
    if (line.size() == kMaxLine) {
      failed = true;
      break;
    }
    line.push_back(c);
  }
  if (restore) ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
  if (failed) {
    OPENSSL_cleanse(line.data(), line.capacity());
    line.clear();
    return false;
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

}  // namespace h2gate::terminal
