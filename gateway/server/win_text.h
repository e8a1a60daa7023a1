// Text helpers the Windows-only sources of gateway/server/ share
// (service_win.cc, autostart_win.cc): Windows builds only
// (win_text_win.cc).
#pragma once

#include <string>

namespace h2gate::win_text {

// A Windows error code as "its message (error N)".
std::string errorText(unsigned long code);

// The ANSI code page (main's argv) to UTF-16 and back.
std::wstring widen(const std::string& s);
std::string narrow(const std::wstring& s);

// GetFullPathNameW: `p` made absolute against the current directory; `p`
// itself when that fails.
std::wstring absolutePath(const std::wstring& p);

}  // namespace h2gate::win_text
