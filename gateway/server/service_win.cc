// The Windows service (gateway/server/service.h): installation through the Service
// Control Manager (advapi32), and the service's life under it. Threads: the
// process's main thread runs StartServiceCtrlDispatcherW and, on it, the
// control handler; the service manager starts serviceMain() on a thread of
// its own, which runs the gateway (serve) to its end.
#include <windows.h>
// windows.h first: shellapi.h builds on its types.
#include <shellapi.h>

#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gateway/base/log.h"
#include "gateway/server/command_line.h"
#include "gateway/server/server_signals.h"
#include "gateway/server/server_signals_win.h"
#include "gateway/server/service.h"
#include "gateway/server/win_text.h"

namespace h2gate::service {
namespace {

const wchar_t kNameW[] = L"h2gate";
const wchar_t kDisplayNameW[] = L"h2gate";
const wchar_t kDescriptionW[] =
    L"Local forward proxy (127.0.0.1:3128 by default) carrying applications' traffic to "
    L"upstream HTTPS proxies over HTTP/2.";

// The system's text for a Win32 error code, with the code.
using win_text::errorText;
using win_text::narrow;

// Closes a service manager handle at scope exit.
struct ScHandle {
  SC_HANDLE h = nullptr;
  explicit ScHandle(SC_HANDLE handle) : h(handle) {}
  ~ScHandle() {
    if (h) ::CloseServiceHandle(h);
  }
  ScHandle(const ScHandle&) = delete;
  ScHandle& operator=(const ScHandle&) = delete;
};

// --- running under the service manager ---------------------------------

// The service's state as last reported; the control handler (main thread),
// serviceMain's thread and the stop-pending ticker report through it.
struct Status {
  std::mutex mutex;
  std::condition_variable changed;
  SERVICE_STATUS_HANDLE handle = nullptr;
  SERVICE_STATUS status{};
  const Serve* serve = nullptr;
  int result = 0;

  // With `mutex` held.
  void report(DWORD state, DWORD wait_hint_ms) {
    status.dwServiceType = SERVICE_WIN32_OWN_PROCESS;
    status.dwCurrentState = state;
    status.dwControlsAccepted =
        state == SERVICE_RUNNING ? SERVICE_ACCEPT_STOP | SERVICE_ACCEPT_SHUTDOWN : 0;
    status.dwWaitHint = wait_hint_ms;
    status.dwCheckPoint = state == SERVICE_START_PENDING || state == SERVICE_STOP_PENDING
                              ? status.dwCheckPoint + 1
                              : 0;
    ::SetServiceStatus(handle, &status);
    changed.notify_all();
  }
};
Status g_status;

DWORD WINAPI onControl(DWORD control, DWORD, void*, void*) {
  switch (control) {
    case SERVICE_CONTROL_STOP:
    case SERVICE_CONTROL_SHUTDOWN: {
      const char* what = control == SERVICE_CONTROL_STOP ? "service stop" : "system shutdown";
      {
        std::lock_guard<std::mutex> lock(g_status.mutex);
        if (g_status.status.dwCurrentState == SERVICE_RUNNING) {
          H2G_LOG(Info, 0, 0, "service " << kName << ": " << what << " requested: stop pending");
          g_status.report(SERVICE_STOP_PENDING, 5000);
        }
      }
      // A second stop while draining cuts the connections (as a second
      // Ctrl+C does).
      ServerSignals::requestStop(what);
      return NO_ERROR;
    }
    case SERVICE_CONTROL_INTERROGATE:
      return NO_ERROR;
    default:
      return ERROR_CALL_NOT_IMPLEMENTED;
  }
}

void WINAPI serviceMain(DWORD, LPWSTR*) {
  g_status.handle = ::RegisterServiceCtrlHandlerExW(kNameW, onControl, nullptr);
  if (!g_status.handle) {
    H2G_LOG(Error, 0, 0,
            "service " << kName
                       << ": RegisterServiceCtrlHandlerEx failed: " << errorText(::GetLastError()));
    g_status.result = 1;
    return;
  }
  ignoreSessionEndEvents();
  {
    std::lock_guard<std::mutex> lock(g_status.mutex);
    g_status.report(SERVICE_START_PENDING, 30000);
  }
  H2G_LOG(Info, 0, 0, "service " << kName << ": starting (pid " << ::GetCurrentProcessId() << ")");

  // While stop is pending (the drain), the check point advances each
  // second, so the service manager sees progress, not a hung service.
  bool done = false;
  std::thread ticker([&done] {
    std::unique_lock<std::mutex> lock(g_status.mutex);
    while (!done) {
      g_status.changed.wait_for(lock, std::chrono::seconds(1));
      if (!done && g_status.status.dwCurrentState == SERVICE_STOP_PENDING)
        g_status.report(SERVICE_STOP_PENDING, 5000);
    }
  });

  const int rc = (*g_status.serve)([] {
    std::lock_guard<std::mutex> lock(g_status.mutex);
    g_status.report(SERVICE_RUNNING, 0);
    H2G_LOG(Info, 0, 0, "service " << kName << ": running");
  });

  {
    std::lock_guard<std::mutex> lock(g_status.mutex);
    done = true;
    g_status.changed.notify_all();
  }
  ticker.join();
  H2G_LOG(Info, 0, 0, "service " << kName << ": stopped, exit code " << rc);
  std::lock_guard<std::mutex> lock(g_status.mutex);
  g_status.result = rc;
  g_status.status.dwWin32ExitCode = rc == 0 ? NO_ERROR : ERROR_SERVICE_SPECIFIC_ERROR;
  g_status.status.dwServiceSpecificExitCode = static_cast<DWORD>(rc);
  // The last call: the process may end as soon as the manager sees it.
  g_status.report(SERVICE_STOPPED, 0);
}

}  // namespace

std::string defaultLogFile() {
  wchar_t buf[MAX_PATH] = L"";
  DWORD n = ::GetEnvironmentVariableW(L"ProgramData", buf, MAX_PATH);
  std::wstring dir =
      n > 0 && n < MAX_PATH ? std::wstring(buf, n) : std::wstring(L"C:\\ProgramData");
  dir += L"\\h2gate";
  ::CreateDirectoryW(dir.c_str(), nullptr);  // fails harmlessly when it exists
  return narrow(dir + L"\\h2gate.log");
}

int install(const std::vector<std::string>& flags) {
  std::string error;
  const std::vector<std::wstring> args =
      win_text::ownCommand({L"service", L"run"}, flags, defaultLogFile, &error);
  if (args.empty()) {
    std::cerr << "h2gate: service install: " << error << "\n";
    return 1;
  }
  const std::wstring command = command_line::join(args);

  ScHandle scm(::OpenSCManagerW(nullptr, nullptr, SC_MANAGER_CONNECT | SC_MANAGER_CREATE_SERVICE));
  if (!scm.h) {
    std::cerr << "h2gate: service install: cannot open the service manager: "
              << errorText(::GetLastError()) << " (run it as an administrator)\n";
    return 1;
  }
  // Started at boot (SERVICE_AUTO_START) as LocalSystem (no account given):
  // the apps of every user rely on the proxy being there.
  ScHandle svc(::CreateServiceW(scm.h, kNameW, kDisplayNameW, SERVICE_ALL_ACCESS,
                                SERVICE_WIN32_OWN_PROCESS, SERVICE_AUTO_START, SERVICE_ERROR_NORMAL,
                                command.c_str(), nullptr, nullptr, nullptr, nullptr, nullptr));
  if (!svc.h) {
    const DWORD err = ::GetLastError();
    std::cerr << "h2gate: service install: " << errorText(err)
              << (err == ERROR_SERVICE_EXISTS
                      ? ": remove it first with 'h2gate service uninstall' (or, if the MSI "
                        "installed it, with 'msiexec /x' or Apps & features)"
                      : "")
              << "\n";
    return 1;
  }
  SERVICE_DESCRIPTIONW description{const_cast<wchar_t*>(kDescriptionW)};
  ::ChangeServiceConfig2W(svc.h, SERVICE_CONFIG_DESCRIPTION, &description);
  std::cout << "installed the service " << kName << " (starts at boot): " << narrow(command)
            << "\nstart it now with: sc start " << kName << "\n";
  return 0;
}

std::optional<Installed> installed() {
  ScHandle scm(::OpenSCManagerW(nullptr, nullptr, SC_MANAGER_CONNECT));
  if (!scm.h) return std::nullopt;
  ScHandle svc(::OpenServiceW(scm.h, kNameW, SERVICE_QUERY_CONFIG | SERVICE_QUERY_STATUS));
  if (!svc.h) return std::nullopt;
  DWORD bytes = 0;
  ::QueryServiceConfigW(svc.h, nullptr, 0, &bytes);
  if (::GetLastError() != ERROR_INSUFFICIENT_BUFFER || bytes == 0) return std::nullopt;
  std::vector<unsigned char> buf(bytes);
  auto* config = reinterpret_cast<QUERY_SERVICE_CONFIGW*>(buf.data());
  if (!::QueryServiceConfigW(svc.h, config, bytes, &bytes)) return std::nullopt;
  Installed out;
  // No account given to CreateService is LocalSystem.
  out.account = config->lpServiceStartName && *config->lpServiceStartName
                    ? narrow(config->lpServiceStartName)
                    : std::string("LocalSystem");
  if (config->lpBinaryPathName && *config->lpBinaryPathName) {
    int argc = 0;
    if (LPWSTR* argv = ::CommandLineToArgvW(config->lpBinaryPathName, &argc)) {
      for (int i = 0; i < argc; ++i) out.args.push_back(narrow(argv[i]));
      ::LocalFree(argv);
    }
  }
  SERVICE_STATUS st{};
  out.running = ::QueryServiceStatus(svc.h, &st) && (st.dwCurrentState == SERVICE_RUNNING ||
                                                     st.dwCurrentState == SERVICE_START_PENDING);
  return out;
}

int uninstall() {
  ScHandle scm(::OpenSCManagerW(nullptr, nullptr, SC_MANAGER_CONNECT));
  if (!scm.h) {
    std::cerr << "h2gate: service uninstall: cannot open the service manager: "
              << errorText(::GetLastError()) << "\n";
    return 1;
  }
  ScHandle svc(::OpenServiceW(scm.h, kNameW, SERVICE_STOP | SERVICE_QUERY_STATUS | DELETE));
  if (!svc.h) {
    const DWORD err = ::GetLastError();
    std::cerr << "h2gate: service uninstall: " << errorText(err)
              << (err == ERROR_ACCESS_DENIED ? " (run it as an administrator)" : "") << "\n";
    return 1;
  }
  SERVICE_STATUS st{};
  if (::QueryServiceStatus(svc.h, &st) && st.dwCurrentState != SERVICE_STOPPED) {
    std::cout << "stopping the service " << kName << " (it drains its connections)\n";
    if (st.dwCurrentState == SERVICE_RUNNING) ::ControlService(svc.h, SERVICE_CONTROL_STOP, &st);
    // As long as the service reports progress (its drain timeout, then
    // closing); at most 10 minutes.
    for (int i = 0; i < 600 && st.dwCurrentState != SERVICE_STOPPED; ++i) {
      ::Sleep(1000);
      if (!::QueryServiceStatus(svc.h, &st)) break;
    }
    if (st.dwCurrentState != SERVICE_STOPPED)
      std::cerr << "h2gate: service uninstall: the service did not stop; removing it anyway "
                   "(it is deleted once it stops)\n";
  }
  if (!::DeleteService(svc.h)) {
    std::cerr << "h2gate: service uninstall: " << errorText(::GetLastError()) << "\n";
    return 1;
  }
  std::cout << "removed the service " << kName << "\n";
  return 0;
}

int run(const Serve& serve) {
  g_status.serve = &serve;
  SERVICE_TABLE_ENTRYW table[] = {{const_cast<wchar_t*>(kNameW), serviceMain}, {nullptr, nullptr}};
  if (!::StartServiceCtrlDispatcherW(table)) {
    const DWORD err = ::GetLastError();
    std::cerr << "h2gate: service run: "
              << (err == ERROR_FAILED_SERVICE_CONTROLLER_CONNECT
                      ? std::string("not started by the service manager (start the service with "
                                    "'sc start h2gate'; to run in a console, leave out 'service "
                                    "run')")
                      : errorText(err))
              << "\n";
    return 2;
  }
  return g_status.result;
}

}  // namespace h2gate::service
