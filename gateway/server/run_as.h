// Which account h2gate runs as, and what that means for single sign-on to
// proxies. Windows' SSPI authenticates without explicit credentials as the
// process's account (gateway/upstream/auth/sspi_win.cc): for a process
// running as LocalSystem (the service, service.h) that is the computer's
// account in the domain (DOMAIN\HOST$), not the person at the keyboard, and
// proxies that allow people, not computers, refuse it or log the wrong
// name. h2gate says so (once at start and at each reload, and in `h2gate
// check`) when it or the installed service runs as LocalSystem with
// proxies that authenticate by single sign-on.
//
// Platform part: run_as_win.cc (the process token's user SID), run_as_posix.cc
// (no such account: "" and false). The rest (run_as.cc) is portable.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"

namespace h2gate::run_as {

// LocalSystem's SID.
inline constexpr const char* kLocalSystemSid = "S-1-5-18";

// The SID of the user of this process's token ("S-1-5-21-...", "S-1-5-18"),
// as text; "" on POSIX or when it cannot be read.
std::string processUserSid();
// Whether the SID `sid` (text) is LocalSystem's (Windows: IsWellKnownSid
// WinLocalSystemSid); false on POSIX and for text that is no SID.
bool isLocalSystem(const std::string& sid);

// The proxies of `b` that authenticate by single sign-on: Negotiate, NTLM or
// auto (proxy_authentication's scheme) without credentials, so as the
// process's account. One entry per cluster ("cluster 'corp'") and per PAC
// route's proxies ("the proxies the PAC file of listener 'main' names").
// `b` must have been validated (its filters built; cli::buildBootstrap).
std::vector<std::string> singleSignOnProxies(const config::Bootstrap& b);

// The warning for a process running as LocalSystem (`who`: "h2gate runs",
// "the installed service h2gate runs") with these single sign-on proxies:
// what happens, and what to do; empty when there are no such proxies.
struct Warning {
  std::string detail;
  std::string advice;
  bool empty() const { return detail.empty(); }
  std::string line() const { return detail + "; " + advice; }  // for the log
};
Warning localSystemWarning(const std::vector<std::string>& proxies, const std::string& who);

// What `h2gate check` warns of: this process runs as LocalSystem with
// single sign-on proxies in `b`; the installed service (Windows,
// service::installed()) runs as LocalSystem with single sign-on proxies in
// the configuration its command line gives (read and built as the service
// would; a configuration that does not load is not judged here).
std::vector<Warning> checkWarnings(const config::Bootstrap& b);

}  // namespace h2gate::run_as
