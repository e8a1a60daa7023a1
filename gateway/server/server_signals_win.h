// Windows only, beside server_signals.h: what the service code
// (service_win.cc) tells the console control handler.
#pragma once

namespace h2gate {

// The process runs as a service: the console control events of a session
// ending (logoff, shutdown) no longer stop it. A user logging off must not
// stop a service, and the service manager's own shutdown request
// (service_win.cc) stops it once, not twice (a second stop cuts the drain).
void ignoreSessionEndEvents();

}  // namespace h2gate
