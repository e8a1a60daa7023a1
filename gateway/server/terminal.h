// Reading a secret from standard input, for `h2gate credentials set`
// (gateway/server/credentials_command.h): from a terminal without echo,
// else (a pipe, a file) one line as it comes. terminal_posix.cc: termios;
// terminal_win.cc: the console mode.
#pragma once

#include <string>

namespace h2gate::terminal {

// Whether standard input is a terminal (on Windows: a console).
bool stdinIsTerminal();

// One line of standard input without its line break, at most 64 KiB, into
// *out. On a terminal `prompt` is written to standard error first and the
// typed characters are not echoed. false at the end of input, on a read
// error or a longer line. The caller wipes what it gets.
bool readSecretLine(const std::string& prompt, std::string* out);

}  // namespace h2gate::terminal
