// Text helpers the Windows-only sources of gateway/server/ share
// (service_win.cc, autostart_win.cc): Windows builds only
// (win_text_win.cc).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace h2gate::win_text {

// A Windows error code as "its message (error N)".
std::string errorText(unsigned long code);

// The ANSI code page (main's argv) to UTF-16 and back.
std::wstring widen(const std::string& s);
std::string narrow(const std::wstring& s);

// GetFullPathNameW: `p` made absolute against the current directory; `p`
// itself when that fails.
std::wstring absolutePath(const std::wstring& p);

// The command line that starts this h2gate.exe again as `verb` (e.g. L"service",
// L"run") with `flags`, the paths in them made absolute
// (command_line::withAbsolutePaths): what service install and autostart install
// store. Flags that name no --log-file get `--log-file default_log_file()`.
// Empty, with *error set, when the executable's own path cannot be found or
// default_log_file() is needed and gives "" (no folder for it).
std::vector<std::wstring> ownCommand(const std::vector<std::wstring>& verb,
                                     const std::vector<std::string>& flags,
                                     const std::function<std::string()>& default_log_file,
                                     std::string* error);

}  // namespace h2gate::win_text
