// WPAD on Windows: the system's own detection. WinHTTP asks DHCP (option
// 252) first, then DNS for wpad.<domain> with Windows' devolution rules, as
// Edge and Chrome rely on there; h2gate then fetches the URL it names like
// any other.
#include <windows.h>
#include <winhttp.h>

#include <string>
#include <vector>

#include "gateway/pac_engine/wpad.h"

namespace h2gate::pac {

std::vector<std::string> wpadCandidates(std::string* why) {
  LPWSTR url = nullptr;
  if (!WinHttpDetectAutoProxyConfigUrl(
          WINHTTP_AUTO_DETECT_TYPE_DHCP | WINHTTP_AUTO_DETECT_TYPE_DNS_A, &url)) {
    const DWORD err = GetLastError();
    *why = err == ERROR_WINHTTP_AUTODETECTION_FAILED
               ? "WinHTTP found no PAC URL by DHCP or DNS"
               : "WinHttpDetectAutoProxyConfigUrl failed with error " + std::to_string(err);
    return {};
  }
  std::string out;
  const int n = WideCharToMultiByte(CP_UTF8, 0, url, -1, nullptr, 0, nullptr, nullptr);
  if (n > 1) {
    out.resize(static_cast<std::size_t>(n - 1));
    WideCharToMultiByte(CP_UTF8, 0, url, -1, out.data(), n, nullptr, nullptr);
  }
  GlobalFree(url);
  if (out.empty()) {
    *why = "WinHTTP detected an empty PAC URL";
    return {};
  }
  return {out};
}

}  // namespace h2gate::pac
