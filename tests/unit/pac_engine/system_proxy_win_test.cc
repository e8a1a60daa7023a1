// The Windows Internet Settings reader (gateway/pac_engine/system_proxy_win.cc)
// against the registry: the test writes the values as the Internet Options
// dialog leaves them (HKCU\Software\Microsoft\Windows\CurrentVersion\Internet
// Settings) and reads them back as the `system` PAC source does. Built only
// by the mingw-w64 cross build (tests/windows/) and run under wine, whose
// registry is the test's own prefix; the Linux build compiles this file to
// nothing.
#ifdef _WIN32
#include <windows.h>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "gateway/pac_engine/system_proxy.h"

using namespace h2gate::pac;

namespace {

constexpr const wchar_t* kKey = L"Software\\Microsoft\\Windows\\CurrentVersion\\Internet Settings";

// Sets the values for one scope and deletes them after.
class InternetSettings {
 public:
  ~InternetSettings() {
    for (const std::wstring& name : names_)
      RegDeleteKeyValueW(HKEY_CURRENT_USER, kKey, name.c_str());
    RegDeleteKeyValueW(HKEY_CURRENT_USER, (std::wstring(kKey) + L"\\Connections").c_str(),
                       L"DefaultConnectionSettings");
  }
  void set(const wchar_t* name, const std::wstring& value) {
    REQUIRE(RegSetKeyValueW(HKEY_CURRENT_USER, kKey, name, REG_SZ, value.c_str(),
                            static_cast<DWORD>((value.size() + 1) * sizeof(wchar_t))) ==
            ERROR_SUCCESS);
    names_.push_back(name);
  }
  void setDword(const wchar_t* name, DWORD value) {
    REQUIRE(RegSetKeyValueW(HKEY_CURRENT_USER, kKey, name, REG_DWORD, &value, sizeof value) ==
            ERROR_SUCCESS);
    names_.push_back(name);
  }
  // DefaultConnectionSettings with only its flags filled in (0x08: detect).
  void setFlags(DWORD flags) {
    std::vector<unsigned char> blob(56, 0);
    blob[0] = 0x46;
    blob[8] = static_cast<unsigned char>(flags);
    REQUIRE(RegSetKeyValueW(HKEY_CURRENT_USER, (std::wstring(kKey) + L"\\Connections").c_str(),
                            L"DefaultConnectionSettings", REG_BINARY, blob.data(),
                            static_cast<DWORD>(blob.size())) == ERROR_SUCCESS);
  }

 private:
  std::vector<std::wstring> names_;
};

}  // namespace

TEST_CASE("windows: no Internet Settings, no desktop proxy", "[pac][system][windows]") {
  InternetSettings none;
  CHECK_FALSE(readDesktopProxySettings());
}

TEST_CASE("windows: ProxyServer and ProxyOverride", "[pac][system][windows]") {
  InternetSettings s;
  s.setDword(L"ProxyEnable", 1);
  s.set(L"ProxyServer", L"http=web.corp:3128;https=tls.corp:3129");
  s.set(L"ProxyOverride", L"*.corp;<local>");
  std::optional<SystemProxySettings> got = readDesktopProxySettings();
  REQUIRE(got);
  CHECK(got->mode == SystemProxySettings::Mode::Manual);
  CHECK(got->from == "Windows Internet Settings");
  CHECK(got->manual.http == "PROXY web.corp:3128");
  CHECK(got->manual.https == "PROXY tls.corp:3129");
  REQUIRE(got->manual.bypass.size() == 2);
  CHECK(got->manual.bypass[0].kind == BypassRule::Kind::Glob);
  CHECK(got->manual.bypass[0].value == "*.corp");
  CHECK(got->manual.bypass[1].kind == BypassRule::Kind::PlainNames);
}

TEST_CASE("windows: ProxyServer is ignored while ProxyEnable is 0", "[pac][system][windows]") {
  InternetSettings s;
  s.setDword(L"ProxyEnable", 0);
  s.set(L"ProxyServer", L"proxy.corp:8080");
  CHECK_FALSE(readDesktopProxySettings());
}

TEST_CASE("windows: AutoConfigURL, then automatic detection", "[pac][system][windows]") {
  {
    InternetSettings s;
    s.set(L"AutoConfigURL", L"http://wpad.corp.example/proxy.pac");
    s.setDword(L"ProxyEnable", 1);
    s.set(L"ProxyServer", L"proxy.corp:8080");
    std::optional<SystemProxySettings> got = readDesktopProxySettings();
    REQUIRE(got);
    CHECK(got->mode == SystemProxySettings::Mode::AutoUrl);
    CHECK(got->pac_url == "http://wpad.corp.example/proxy.pac");
  }
  {
    InternetSettings s;
    s.setFlags(0x01 | 0x08);
    std::optional<SystemProxySettings> got = readDesktopProxySettings();
    REQUIRE(got);
    CHECK(got->mode == SystemProxySettings::Mode::AutoDetect);
  }
}
#endif  // _WIN32
