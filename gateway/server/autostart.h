// Starting h2gate at the user's logon, in the user's own session, without
// administrator rights: `h2gate autostart install|uninstall|status|run`.
// Windows (autostart_win.cc): the value "h2gate" of the user's
// HKCU\Software\Microsoft\Windows\CurrentVersion\Run key, which Explorer
// runs at each logon of that user. As that user, SSPI's single sign-on
// (Negotiate, NTLM) authenticates to proxies as the person logged on; the
// service (service.h) runs as LocalSystem, which is the computer's account
// to a proxy (deploy/windows/README.md says more). POSIX
// (autostart_posix.cc): not there (a systemd user unit or the desktop's
// autostart does it: deploy/README.md); every call says so and returns 2.
#pragma once

#include <string>
#include <vector>

namespace h2gate::autostart {

// The Run key and the name of the value h2gate writes there.
inline constexpr const char* kRunKey = "HKCU\\Software\\Microsoft\\Windows\\CurrentVersion\\Run";
inline constexpr const char* kValueName = "h2gate";

// Writes the Run value: this executable's full path, `autostart run`, then
// `flags` (those after `autostart install`), the paths of -c, --cacert,
// --log-file and --pac FILE made absolute (command_line.h), and
// `--log-file defaultLogFile()` when no --log-file is given. An existing
// value is replaced (said so), an identical one left. Warns when the
// service h2gate is installed (two h2gate on one port). Messages to
// stdout/stderr. Returns the exit status: 0 done, 1 failed, 2 not on this
// platform.
int install(const std::vector<std::string>& flags);
// Deletes the Run value; none there is no error (says so, 0). Does not stop
// a running h2gate.
int uninstall();
// Prints the Run value's command line; 0 when there is one, 1 when not,
// 2 not on this platform.
int status();

// For `autostart run` (what the Run value starts), before anything is
// logged: detaches the process from the console window Windows opened for
// it at logon (FreeConsole: the window closes), so no console stays on the
// user's desktop. h2gate then runs on, logging to its --log-file, until
// POST /quitquitquit or the session ends. Returns "" or why it could not.
std::string detachConsole();

// The log file of `autostart run` without --log-file:
// %LOCALAPPDATA%\h2gate\h2gate.log (its folder created; %USERPROFILE%\AppData\Local
// without %LOCALAPPDATA%); "" when neither is set, and on POSIX.
std::string defaultLogFile();

}  // namespace h2gate::autostart
