// Standard input on POSIX systems (gateway/server/terminal.h): termios's
// ECHO flag off while a terminal's line is typed.
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "gateway/server/terminal.h"

namespace h2gate::terminal {

bool stdinIsTerminal() {
  return ::isatty(STDIN_FILENO) == 1;
}

bool readSecretLine(const std::string& prompt, std::string* out) {
  const bool tty = stdinIsTerminal();
  termios saved{};
  bool restore = false;
  if (tty) {
    // Echo off before the prompt shows (as glibc's getpass): what is typed
    // once the prompt is there is never echoed, nor thrown away by the
    // TCSAFLUSH, which drops only what was typed ahead of it.
    if (::tcgetattr(STDIN_FILENO, &saved) == 0) {
      termios quiet = saved;
      quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
      quiet.c_lflag |= ECHONL;
      restore = ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) == 0;
    }
    std::fputs(prompt.c_str(), stderr);
    std::fflush(stderr);
  }
  const bool ok = readLine(
      [](char* c) {
        for (;;) {
          const ssize_t n = ::read(STDIN_FILENO, c, 1);
          if (n == 1) return ByteRead::Byte;
          if (n == 0) return ByteRead::End;
          if (errno != EINTR) return ByteRead::Error;
        }
      },
      out);
  if (restore) ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
  return ok;
}

}  // namespace h2gate::terminal
