// The functions a PAC file may call, installed into a Duktape heap before
// the file runs.
//
// Standard (Netscape's PAC definition, as Mozilla and Chromium implement
// it): isPlainHostName, dnsDomainIs, localHostOrDomainIs, isResolvable,
// isInNet, dnsResolve, myIpAddress, dnsDomainLevels, shExpMatch,
// weekdayRange, dateRange, timeRange, alert. Microsoft's IPv6 extensions:
// isResolvableEx, isInNetEx, dnsResolveEx, myIpAddressEx,
// sortIpAddressList, getClientVersion (FindProxyForURLEx is the script's
// own: gateway/pac_engine/pac_context.h calls it in preference when defined).
//
// Semantics follow Chromium where browsers differ (it documents its table
// of choices), so a PAC file tested in a browser answers the same here:
//   dnsResolve / isResolvable / isInNet   IPv4 only; null / false when none
//   dnsResolveEx                          every address, ";"-separated, in the
//                                         resolver's order; "" when none
//   myIpAddress                           the first IPv4 address of
//                                         PacHost::myAddresses(), else the
//                                         first one, else "127.0.0.1"
//   myIpAddressEx                         all of them ";"-separated, or ""
//   isPlainHostName                       no dot and not an IPv6 literal
//   isInNetEx(ip, "prefix/len")           IP literals only (no DNS); IPv4 vs
//                                         IPv6 compares the IPv4-mapped form
//   sortIpAddressList                     IPv6 before IPv4, ascending; false
//                                         when an entry is not an address
//   weekdayRange / dateRange / timeRange  a range whose start is after its
//                                         end wraps around (FRI..MON), except
//                                         timeRange(h1, h2) which, as in every
//                                         browser, does not; "GMT" as the last
//                                         argument compares in UTC
//   shExpMatch                            '*' any run, '?' one character; the
//                                         other regular-expression characters
//                                         keep their meaning, as in browsers
//                                         (a pattern without them is matched
//                                         as a glob, in linear time)
// Where the browsers' own code has date arithmetic slips, the definition
// wins: Mozilla's dateRange("JAN", "FEB") is true until March 2nd or 3rd
// (it sets February on December 31st), h2gate's ends with February; its
// timeRange(..., "GMT") compares the UTC time with the *local* date, so it
// is false all day when the two dates differ, h2gate's compares the UTC
// time of day. tests/integration/pac_compare_test.cc lists every
// difference with pacparser, which has Mozilla's code.
//
// The DNS functions block the calling thread (a PAC thread): PacHost bounds
// each call.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <duktape.h>

#include "gateway/net/ip_address.h"

namespace h2gate::pac {

// What the native functions ask of the context they run in.
class PacHost {
 public:
  virtual ~PacHost() = default;
  // dnsResolve and friends: bounded by the DNS timeout and the run's deadline.
  virtual std::vector<net::IpAddress> dnsLookup(const std::string& host, bool v4_only) = 0;
  virtual std::vector<net::IpAddress> myAddresses() = 0;
  virtual void alert(std::string_view message) = 0;
  // After a DNS call: true when the run's deadline has passed meanwhile (the
  // lookup was cut short by it, not by the DNS timeout); the function then
  // throws instead of answering "not resolvable", so no answer computed
  // from a cut-short lookup is used or cached.
  virtual bool runPastDeadline() = 0;
};

// Defines the functions above as globals of the heap's context. The heap's
// owner (JsHeap::ownerOf) must be a PacHost. Returns "" or what failed.
std::string installPacLibrary(duk_context* ctx);

// The pure parts, for tests.
bool isPlainHostName(std::string_view host);
// True when the glob p ('*' any run, '?' one character, everything else
// literal) matches the whole of s; at most s.size() * p.size() steps.
bool globMatch(std::string_view s, std::string_view p);
// shExpMatch(s, p) when p is a plain glob, which is most of them: both
// ASCII, p with no regular-expression character but '.', '*' and '?', s
// without a line break (where '.' stops). Else nullopt: shExpMatch then
// makes p a regular expression, as browsers do.
std::optional<bool> shExpGlob(std::string_view s, std::string_view p);
// nullopt: not a dotted quad of 1-3 digit decimal numbers up to 255 (what
// isInNet accepts as an address, mask or pattern).
std::optional<uint32_t> parseDottedQuad(std::string_view text);
bool isInNetEx(std::string_view ip, std::string_view prefix);
// nullopt where sortIpAddressList() returns false.
std::optional<std::string> sortIpAddressList(std::string_view list);
std::string joinAddresses(const std::vector<net::IpAddress>& ips);

}  // namespace h2gate::pac
