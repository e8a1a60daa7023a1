// WPAD by DNS: where to look for a network's PAC file when nobody said.
//
// For each DNS search domain of this machine (resolv.conf's "search" or
// "domain", then the domain of its own name), h2gate tries
// http://wpad.<domain>/wpad.dat, then the same one level up, and so on up
// to and including the registrable domain (the public suffix list decides:
// for a.b.corp.example.co.uk that is example.co.uk), never beyond: a
// "wpad.co.uk" is somebody else's machine (the devolution attack behind
// Microsoft's MS09-008). A search domain that is itself a public suffix, or
// a single label ("lan", "corp": everything is registrable only with two
// labels), gives no candidate. The first candidate whose name resolves and
// that answers 200 with a file wins.
//
// DHCP (option 252, "auto-proxy-config") is not supported on Linux: the DHCP
// client owns the lease (dhclient, NetworkManager, systemd-networkd each
// keep its options their own way, most do not even request 252), and asking
// the server ourselves needs a privileged socket on port 68. Chromium and
// Firefox do not do it on Linux either.
//
// On Windows, detection is the system's own: WinHTTP's
// WinHttpDetectAutoProxyConfigUrl asks DHCP, then DNS with Windows'
// devolution rules (wpad_win.cc), as Edge and Chrome do there.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace h2gate::pac {

// The PAC URLs to try, in order: on POSIX wpadUrls(systemSearchDomains())
// (wpad_posix.cc), on Windows the one WinHTTP detects (wpad_win.cc). Empty,
// with *why set, when there is none to try. Blocking (file reads, on
// Windows DHCP and DNS queries): call it off the event loop.
std::vector<std::string> wpadCandidates(std::string* why);

// The search domains in resolv.conf's text (the last "search" or "domain"
// line wins, as in glibc), then the domain part of `hostname` when it has
// one. Lower case, no trailing dot, no duplicates.
std::vector<std::string> searchDomains(std::string_view resolv_conf, std::string_view hostname);

}  // namespace h2gate::pac
