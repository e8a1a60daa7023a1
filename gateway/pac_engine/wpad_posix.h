// WPAD by DNS on POSIX (wpad.h): the candidate URLs for search domains and
// this machine's search domains, both in wpad_posix.cc. Windows asks WinHTTP
// instead (wpad_win.cc).
#pragma once

#include <string>
#include <vector>

namespace h2gate::pac {

// The candidate URLs for `domains`, in the order to try them (the public
// suffix list from libpsl).
std::vector<std::string> wpadUrls(const std::vector<std::string>& domains);

// This machine's: /etc/resolv.conf and gethostname() (blocking file read).
std::vector<std::string> systemSearchDomains();

}  // namespace h2gate::pac
