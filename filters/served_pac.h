// The proxy auto-config file (PAC) of a listener, served at GET /proxy.pac
// on the admin listener and, when asked, on the proxy listener itself.
//
// Generated once when the listener is built (start, reload), never per
// request, from the listener's filters in chain order: each filter that
// decides where requests go describes its rules (Filter::describePac).
// Rules h2gate would send DIRECT become "DIRECT"; everything else —
// clusters, rejections, ACL denials — becomes "PROXY <this listener>", so
// h2gate still enforces its policy: a request the acl would refuse is never
// sent DIRECT by the PAC file.
//
// (filters/pac_routing.h is the other way round: a route that follows a PAC
// file someone else wrote, run by the PAC engine in gateway/pac_engine/.)
//
// What the JavaScript tests, per pattern kind (gateway/match/matcher.h):
//   exact "a.example"       host == "a.example"
//   suffix "corp.example"   host == "corp.example" || dnsDomainIs(host, ".corp.example")
//   "*.example.com"         dnsDomainIs(host, ".example.com")
//   IPv4 CIDR               only for IPv4-literal hosts: isInNet(host, net, mask) (no DNS
//                           lookup: h2gate does not resolve names to route them either)
//   IPv6 CIDR               only for IPv6-literal hosts: a prefix comparison in the
//                           file's own JavaScript (isInNet is IPv4-only; isInNetEx is not
//                           in every engine)
//   ports, kind             the port and scheme parsed from the URL ("http" is
//                           absolute-form, every other scheme a CONNECT tunnel)
// Host names are compared lower-case without a trailing dot, as h2gate does.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gateway/match/matcher.h"

namespace h2gate::filters {

// forward_proxy's `pac` settings.
struct PacOptions {
  // Also answer an origin-form GET /proxy.pac on the proxy listener.
  bool serve_on_listener = false;
  // "host:port" the file names in PROXY; empty: the listener's own address
  // (127.0.0.1 for a listener on 0.0.0.0, [::1] for one on ::).
  std::string proxy;
  // "PROXY …; DIRECT": browsers go DIRECT when h2gate is unreachable.
  bool direct_fallback = false;
};

inline constexpr std::string_view kPacContentType = "application/x-ns-proxy-autoconfig";
inline constexpr std::string_view kPacPath = "/proxy.pac";

class PacBuilder {
 public:
  enum class Action { Proxy, Direct };

  // if (<m matches>) return ACTION;   after the rules already added.
  void add(const match::Match& m, Action action, std::string_view comment);
  // if (!(<any of ms matches>)) return ACTION;
  void addUnlessAny(const std::vector<const match::Match*>& ms, Action action,
                    std::string_view comment);
  // What a request no rule took gets (default PROXY).
  void setDefault(Action action, std::string_view comment);
  PacOptions& options() { return options_; }
  const PacOptions& options() const { return options_; }

  // The file. `proxy` is "host:port" (options().proxy wins when set).
  std::string build(const std::string& proxy) const;

 private:
  std::vector<std::string> statements_;
  Action default_ = Action::Proxy;
  std::string default_comment_ = "everything else";
  PacOptions options_;
};

// The JavaScript boolean expression for `m` over the variables the file
// defines (host, port, absolute, v4, v6, ip).
std::string pacCondition(const match::Match& m);

// "host:port" for PROXY from a listener's bound address: unspecified
// addresses become loopback, IPv6 gets brackets.
std::string pacProxyAddress(const std::string& address, uint16_t port);

}  // namespace h2gate::filters
