// Standard input on Windows (gateway/server/terminal.h): a console's line
// read with ReadConsoleW and ENABLE_ECHO_INPUT off; a pipe or a file read
// as UTF-8 bytes.
#include <windows.h>

#include <cstdio>
#include <string>

#include "gateway/server/terminal.h"

namespace h2gate::terminal {
namespace {

constexpr std::size_t kMaxLine = 64 * 1024;

bool isConsole(HANDLE h) {
  DWORD mode = 0;
  return h != INVALID_HANDLE_VALUE && h != nullptr && GetConsoleMode(h, &mode) != 0;
}

bool readConsoleLine(HANDLE in, std::string* out) {
  DWORD mode = 0;
  GetConsoleMode(in, &mode);
  SetConsoleMode(in, (mode | ENABLE_LINE_INPUT | ENABLE_PROCESSED_INPUT) & ~ENABLE_ECHO_INPUT);
  std::wstring line;
  line.reserve(kMaxLine + 1);
  bool failed = false;
  for (;;) {
    wchar_t c = 0;
    DWORD n = 0;
    if (!ReadConsoleW(in, &c, 1, &n, nullptr) || n == 0) {
      failed = true;
      break;
    }
    if (c == L'\n') break;
    if (c == L'\r') continue;
    if (line.size() == kMaxLine) {
      failed = true;
      break;
    }
    line.push_back(c);
  }
  SetConsoleMode(in, mode);
  std::fputs("\n", stderr);
  out->clear();
  if (!failed && !line.empty()) {
    const int size = WideCharToMultiByte(CP_UTF8, 0, line.data(), static_cast<int>(line.size()),
                                         nullptr, 0, nullptr, nullptr);
    out->reserve(static_cast<std::size_t>(size) + 1);
    out->resize(static_cast<std::size_t>(size));
    WideCharToMultiByte(CP_UTF8, 0, line.data(), static_cast<int>(line.size()), out->data(), size,
                        nullptr, nullptr);
  }
  SecureZeroMemory(line.data(), line.capacity() * sizeof(wchar_t));
  return !failed;
}

}  // namespace

bool stdinIsTerminal() {
  return isConsole(GetStdHandle(STD_INPUT_HANDLE));
}

bool readSecretLine(const std::string& prompt, std::string* out) {
  HANDLE in = GetStdHandle(STD_INPUT_HANDLE);
  if (isConsole(in)) {
    std::fputs(prompt.c_str(), stderr);
    std::fflush(stderr);
    return readConsoleLine(in, out);
  }
  // A pipe's writer gone (ERROR_BROKEN_PIPE) is its end.
  return readLine(
      [in](char* c) {
        DWORD n = 0;
        if (ReadFile(in, c, 1, &n, nullptr)) return n == 1 ? ByteRead::Byte : ByteRead::End;
        return GetLastError() == ERROR_BROKEN_PIPE ? ByteRead::End : ByteRead::Error;
      },
      out);
}

}  // namespace h2gate::terminal
