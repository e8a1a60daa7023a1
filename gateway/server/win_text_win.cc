#include "gateway/server/win_text.h"

#include <windows.h>

#include "gateway/server/command_line.h"

namespace h2gate::win_text {

std::string errorText(unsigned long code) {
  char buf[512] = "";
  DWORD n = ::FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, nullptr,
                             static_cast<DWORD>(code), 0, buf, sizeof buf, nullptr);
  while (n > 0 && (buf[n - 1] == '\r' || buf[n - 1] == '\n' || buf[n - 1] == '.')) buf[--n] = 0;
  return (n ? std::string(buf) : std::string("error")) + " (error " + std::to_string(code) + ")";
}

std::wstring widen(const std::string& s) {
  if (s.empty()) return {};
  int n = ::MultiByteToWideChar(CP_ACP, 0, s.data(), static_cast<int>(s.size()), nullptr, 0);
  std::wstring out(static_cast<size_t>(n), L'\0');
  ::MultiByteToWideChar(CP_ACP, 0, s.data(), static_cast<int>(s.size()), out.data(), n);
  return out;
}

std::string narrow(const std::wstring& s) {
  if (s.empty()) return {};
  int n = ::WideCharToMultiByte(CP_ACP, 0, s.data(), static_cast<int>(s.size()), nullptr, 0,
                                nullptr, nullptr);
  std::string out(static_cast<size_t>(n), '\0');
  ::WideCharToMultiByte(CP_ACP, 0, s.data(), static_cast<int>(s.size()), out.data(), n, nullptr,
                        nullptr);
  return out;
}

std::wstring absolutePath(const std::wstring& p) {
  DWORD n = ::GetFullPathNameW(p.c_str(), 0, nullptr, nullptr);
  if (n == 0) return p;
  std::wstring out(n, L'\0');
  n = ::GetFullPathNameW(p.c_str(), n, out.data(), nullptr);
  out.resize(n);
  return out;
}

std::vector<std::wstring> ownCommand(const std::vector<std::wstring>& verb,
                                     const std::vector<std::string>& flags,
                                     const std::function<std::string()>& default_log_file,
                                     std::string* error) {
  wchar_t exe[MAX_PATH * 2] = L"";
  DWORD n = ::GetModuleFileNameW(nullptr, exe, MAX_PATH * 2);
  if (n == 0 || n >= MAX_PATH * 2) {
    *error = "cannot find h2gate.exe's own path: " + errorText(::GetLastError());
    return {};
  }
  std::vector<std::wstring> wide;
  for (const std::string& f : flags) wide.push_back(widen(f));
  std::vector<std::wstring> args = {exe};
  args.insert(args.end(), verb.begin(), verb.end());
  bool has_log_file = false;
  for (std::wstring& a :
       command_line::withAbsolutePaths<wchar_t>(wide, absolutePath, &has_log_file))
    args.push_back(std::move(a));
  if (!has_log_file) {
    const std::string log = default_log_file();
    if (log.empty()) {
      *error = "found no folder for its log file: give --log-file FILE";
      return {};
    }
    args.push_back(L"--log-file");
    args.push_back(widen(log));
  }
  return args;
}

}  // namespace h2gate::win_text
