#include <windows.h>

#include <algorithm>
#include <string>

#include "gateway/base/ascii.h"
#include "gateway/net/idn.h"

namespace h2gate::net {

std::optional<std::string> idnToAscii(const std::string& utf8, std::string* error) {
  auto fail = [&](const char* why) -> std::optional<std::string> {
    *error = "'" + utf8 + "' is not a valid internationalised domain name (" + why + ")";
    return std::nullopt;
  };
  if (utf8.empty() || utf8.size() > 1024) return fail("empty or too long");
  const int wide_len = ::MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, utf8.data(),
                                             static_cast<int>(utf8.size()), nullptr, 0);
  if (wide_len <= 0) return fail("not UTF-8");
  std::wstring wide(static_cast<size_t>(wide_len), L'\0');
  ::MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, utf8.data(), static_cast<int>(utf8.size()),
                        wide.data(), wide_len);
  // Windows' IDNA (nameprep: case folding, NFKC); unassigned code points
  // are refused. Not IDN_USE_STD3_ASCII_RULES: wine 8 refuses every name
  // with it (ERROR_INVALID_NAME); normalizeHostName() checks the
  // characters of the result itself.
  wchar_t out[512];
  const int n = ::IdnToAscii(0, wide.data(), wide_len, out, 512);
  if (n <= 0) return fail(("IdnToAscii error " + std::to_string(::GetLastError())).c_str());
  std::string ascii;
  ascii.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    if (out[i] > 0x7f) return fail("not ASCII after conversion");
    const char c = static_cast<char>(out[i]);
    ascii.push_back(lowerAscii(c));
  }
  return ascii;
}

}  // namespace h2gate::net
