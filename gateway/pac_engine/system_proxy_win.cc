// readDesktopProxySettings on Windows: the user's Internet Settings, the
// registry values WinINet (and Edge, Chrome, WinHTTP's IE import) read,
// under HKCU\Software\Microsoft\Windows\CurrentVersion\Internet Settings:
//   AutoConfigURL   the PAC URL ("Use setup script"), present only when on
//   ProxyEnable     1: use ProxyServer
//   ProxyServer     "host:port", or "http=h:p;https=h:p;ftp=h:p;socks=h:p"
//   ProxyOverride   "*.corp;10.*;<local>": bypassed destinations
// and "Automatically detect settings", which exists only as a flag (0x08 of
// the DWORD at offset 8) of Connections\DefaultConnectionSettings.
#include <windows.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gateway/pac_engine/system_proxy.h"

namespace h2gate::pac {
namespace {

constexpr const wchar_t* kKey = L"Software\\Microsoft\\Windows\\CurrentVersion\\Internet Settings";
constexpr DWORD kAutoDetectFlag = 0x08;

std::string narrow(const std::wstring& w) {
  if (w.empty()) return {};
  const int n = WideCharToMultiByte(CP_UTF8, 0, w.c_str(), static_cast<int>(w.size()), nullptr, 0,
                                    nullptr, nullptr);
  if (n <= 0) return {};
  std::string out(static_cast<std::size_t>(n), '\0');
  WideCharToMultiByte(CP_UTF8, 0, w.c_str(), static_cast<int>(w.size()), out.data(), n, nullptr,
                      nullptr);
  return out;
}

std::string stringValue(const wchar_t* subkey, const wchar_t* name) {
  DWORD bytes = 0;
  if (RegGetValueW(HKEY_CURRENT_USER, subkey, name, RRF_RT_REG_SZ, nullptr, nullptr, &bytes) !=
          ERROR_SUCCESS ||
      bytes < sizeof(wchar_t))
    return {};
  std::wstring w(bytes / sizeof(wchar_t), L'\0');
  if (RegGetValueW(HKEY_CURRENT_USER, subkey, name, RRF_RT_REG_SZ, nullptr, w.data(), &bytes) !=
      ERROR_SUCCESS)
    return {};
  w.resize(wcsnlen(w.c_str(), w.size()));
  return narrow(w);
}

DWORD dwordValue(const wchar_t* subkey, const wchar_t* name) {
  DWORD value = 0;
  DWORD bytes = sizeof value;
  if (RegGetValueW(HKEY_CURRENT_USER, subkey, name, RRF_RT_REG_DWORD, nullptr, &value, &bytes) !=
      ERROR_SUCCESS)
    return 0;
  return value;
}

bool autoDetect() {
  const std::wstring subkey = std::wstring(kKey) + L"\\Connections";
  DWORD bytes = 0;
  if (RegGetValueW(HKEY_CURRENT_USER, subkey.c_str(), L"DefaultConnectionSettings",
                   RRF_RT_REG_BINARY, nullptr, nullptr, &bytes) != ERROR_SUCCESS ||
      bytes < 12)
    return false;
  std::vector<unsigned char> blob(bytes);
  if (RegGetValueW(HKEY_CURRENT_USER, subkey.c_str(), L"DefaultConnectionSettings",
                   RRF_RT_REG_BINARY, nullptr, blob.data(), &bytes) != ERROR_SUCCESS ||
      bytes < 12)
    return false;
  const DWORD flags = static_cast<DWORD>(blob[8]) | (static_cast<DWORD>(blob[9]) << 8) |
                      (static_cast<DWORD>(blob[10]) << 16) | (static_cast<DWORD>(blob[11]) << 24);
  return (flags & kAutoDetectFlag) != 0;
}

}  // namespace

std::optional<SystemProxySettings> readDesktopProxySettings() {
  const std::string auto_url = stringValue(kKey, L"AutoConfigURL");
  const bool enabled = dwordValue(kKey, L"ProxyEnable") != 0;
  const std::string server = enabled ? stringValue(kKey, L"ProxyServer") : std::string();
  const std::string bypass = stringValue(kKey, L"ProxyOverride");
  SystemProxySettings s = settingsFromWindows(autoDetect(), auto_url, server, bypass);
  if (s.mode == SystemProxySettings::Mode::Direct) return std::nullopt;
  return s;
}

char** processEnvironment() {
  return _environ;
}

}  // namespace h2gate::pac
