// Reading a secret from standard input, for `h2gate credentials set`
// (gateway/server/credentials_command.h): from a terminal without echo,
// else (a pipe, a file) one line as it comes. terminal_posix.cc: termios;
// terminal_win.cc: the console mode; terminal.cc: the line reading they share.
#pragma once

#include <functional>
#include <string>

namespace h2gate::terminal {

// Whether standard input is a terminal (on Windows: a console).
bool stdinIsTerminal();

// One line of standard input without its line break, at most 64 KiB, into
// *out. On a terminal `prompt` is written to standard error first and the
// typed characters are not echoed. false at the end of input, on a read
// error or a longer line. The caller wipes what it gets.
bool readSecretLine(const std::string& prompt, std::string* out);

// What reading one byte of input gave (readLine's source).
enum class ByteRead { Byte, End, Error };

// The line reading both platforms' readSecretLine share (terminal.cc): bytes
// from `read_byte` one at a time (nothing beyond the line is taken from the
// input) into *out, up to '\n' or the end of input (a last line without '\n'
// counts, an empty one does not), without a trailing '\r'. false, with *out
// wiped and empty, on a read error, an empty end or a line over 64 KiB.
// *out's buffer is reserved once: no reallocation leaves stray copies.
bool readLine(const std::function<ByteRead(char*)>& read_byte, std::string* out);

}  // namespace h2gate::terminal
