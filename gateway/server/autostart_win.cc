// The per-user start at logon (gateway/server/autostart.h): the value
// "h2gate" of HKCU\Software\Microsoft\Windows\CurrentVersion\Run. A user
// may write their own HKCU without administrator rights; Explorer starts
// the command line of each value there when that user logs on, in that
// user's session, with that user's logon token (so SSPI's single sign-on
// is that user's). A logon task of the Task Scheduler would do the same but
// needs administrator rights for a logon trigger (deploy/windows/README.md).
#include <windows.h>

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "gateway/server/autostart.h"
#include "gateway/server/command_line.h"
#include "gateway/server/service.h"
#include "gateway/server/win_text.h"

namespace h2gate::autostart {
namespace {

const wchar_t kRunKeyW[] = L"Software\\Microsoft\\Windows\\CurrentVersion\\Run";
const wchar_t kValueNameW[] = L"h2gate";

using win_text::errorText;
using win_text::narrow;

// Closes a registry key at scope exit.
struct Key {
  HKEY h = nullptr;
  ~Key() {
    if (h) ::RegCloseKey(h);
  }
};

// The Run value's command line: nullopt-like "" with *found false when
// there is none; *error set when the key cannot be read.
std::wstring readValue(bool* found, std::string* error) {
  *found = false;
  Key key;
  LSTATUS rc = ::RegOpenKeyExW(HKEY_CURRENT_USER, kRunKeyW, 0, KEY_QUERY_VALUE, &key.h);
  if (rc == ERROR_FILE_NOT_FOUND) return {};
  if (rc != ERROR_SUCCESS) {
    *error = errorText(rc);
    return {};
  }
  DWORD type = 0;
  DWORD bytes = 0;
  rc = ::RegQueryValueExW(key.h, kValueNameW, nullptr, &type, nullptr, &bytes);
  if (rc == ERROR_FILE_NOT_FOUND) return {};
  if (rc != ERROR_SUCCESS) {
    *error = errorText(rc);
    return {};
  }
  std::wstring value(bytes / sizeof(wchar_t) + 1, L'\0');
  bytes = static_cast<DWORD>(value.size() * sizeof(wchar_t));
  rc = ::RegQueryValueExW(key.h, kValueNameW, nullptr, &type, reinterpret_cast<BYTE*>(value.data()),
                          &bytes);
  if (rc != ERROR_SUCCESS) {
    *error = errorText(rc);
    return {};
  }
  value.resize(bytes / sizeof(wchar_t));
  while (!value.empty() && value.back() == L'\0') value.pop_back();
  *found = true;
  return value;
}

}  // namespace

std::string defaultLogFile() {
  wchar_t buf[MAX_PATH] = L"";
  DWORD n = ::GetEnvironmentVariableW(L"LOCALAPPDATA", buf, MAX_PATH);
  if (n == 0 || n >= MAX_PATH) {
    n = ::GetEnvironmentVariableW(L"USERPROFILE", buf, MAX_PATH);
    if (n == 0 || n >= MAX_PATH) return {};
    std::wstring dir = std::wstring(buf, n) + L"\\AppData\\Local\\h2gate";
    ::CreateDirectoryW((std::wstring(buf, n) + L"\\AppData").c_str(), nullptr);
    ::CreateDirectoryW((std::wstring(buf, n) + L"\\AppData\\Local").c_str(), nullptr);
    ::CreateDirectoryW(dir.c_str(), nullptr);
    return narrow(dir + L"\\h2gate.log");
  }
  std::wstring dir = std::wstring(buf, n) + L"\\h2gate";
  ::CreateDirectoryW(dir.c_str(), nullptr);  // fails harmlessly when it exists
  return narrow(dir + L"\\h2gate.log");
}

int install(const std::vector<std::string>& flags) {
  std::string error;
  // defaultLogFile() is "" when neither %LOCALAPPDATA% nor %USERPROFILE% is set.
  const std::vector<std::wstring> args =
      win_text::ownCommand({L"autostart", L"run"}, flags, defaultLogFile, &error);
  if (args.empty()) {
    std::cerr << "h2gate: autostart install: " << error << "\n";
    return 1;
  }
  const std::wstring command = command_line::join(args);

  // The service beside it: both would listen on the same port.
  if (const std::optional<service::Installed> svc = service::installed()) {
    std::cerr << "h2gate: autostart install: warning: the service " << service::kName
              << " is installed too (" << (svc->running ? "running" : "not running") << ", as "
              << svc->account
              << "): at logon this h2gate would fail to listen on the port the service "
                 "holds, or take it first. Remove the service (an administrator: 'h2gate "
                 "service uninstall', or 'msiexec /x' for the MSI's) or give this one other "
                 "--listen and --admin addresses\n";
  }

  bool found = false;
  error.clear();
  const std::wstring before = readValue(&found, &error);
  if (found && before == command) {
    std::cout << "autostart: already installed, unchanged: " << kRunKey << "\\" << kValueName
              << " = " << narrow(command) << "\n";
    return 0;
  }
  Key key;
  LSTATUS rc = ::RegCreateKeyExW(HKEY_CURRENT_USER, kRunKeyW, 0, nullptr, 0, KEY_SET_VALUE, nullptr,
                                 &key.h, nullptr);
  if (rc == ERROR_SUCCESS)
    rc = ::RegSetValueExW(key.h, kValueNameW, 0, REG_SZ,
                          reinterpret_cast<const BYTE*>(command.c_str()),
                          static_cast<DWORD>((command.size() + 1) * sizeof(wchar_t)));
  if (rc != ERROR_SUCCESS) {
    std::cerr << "h2gate: autostart install: cannot write " << kRunKey << "\\" << kValueName << ": "
              << errorText(rc) << "\n";
    return 1;
  }
  if (found) std::cout << "autostart: replaced " << narrow(before) << "\n";
  std::cout << "autostart: installed " << kRunKey << "\\" << kValueName << " = " << narrow(command)
            << "\nh2gate starts at your next logon, as you, without a console window "
               "(to start it now, run that command line)\n";
  return 0;
}

int uninstall() {
  bool found = false;
  std::string error;
  const std::wstring before = readValue(&found, &error);
  if (!error.empty()) {
    std::cerr << "h2gate: autostart uninstall: cannot read " << kRunKey << ": " << error << "\n";
    return 1;
  }
  if (!found) {
    std::cout << "autostart: not installed (no value " << kValueName << " in " << kRunKey
              << "): nothing to remove\n";
    return 0;
  }
  Key key;
  LSTATUS rc = ::RegOpenKeyExW(HKEY_CURRENT_USER, kRunKeyW, 0, KEY_SET_VALUE, &key.h);
  if (rc == ERROR_SUCCESS) rc = ::RegDeleteValueW(key.h, kValueNameW);
  if (rc != ERROR_SUCCESS) {
    std::cerr << "h2gate: autostart uninstall: cannot delete " << kRunKey << "\\" << kValueName
              << ": " << errorText(rc) << "\n";
    return 1;
  }
  std::cout << "autostart: removed " << kRunKey << "\\" << kValueName << " (was " << narrow(before)
            << "); an h2gate it started runs on until you log off or POST /quitquitquit\n";
  return 0;
}

int status() {
  bool found = false;
  std::string error;
  const std::wstring value = readValue(&found, &error);
  if (!error.empty()) {
    std::cerr << "h2gate: autostart status: cannot read " << kRunKey << ": " << error << "\n";
    return 1;
  }
  if (!found) {
    std::cout << "autostart: not installed (no value " << kValueName << " in " << kRunKey << ")\n";
    return 1;
  }
  std::cout << "autostart: installed: " << kRunKey << "\\" << kValueName << " = " << narrow(value)
            << "\n";
  return 0;
}

std::string detachConsole() {
  if (::GetConsoleWindow() == nullptr) return {};  // none to leave
  if (!::FreeConsole())
    return "cannot detach from the console: " + errorText(static_cast<LSTATUS>(::GetLastError()));
  return {};
}

}  // namespace h2gate::autostart
