// Envoy-style filters: named in the config, created by name from a registry.
//
// One Filter instance is built per listener and shared by all requests on all
// workers, so methods are const and MUST be thread-safe. A filter only
// overrides what it needs: the defaults pass everything through.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "gateway/base/http_types.h"

namespace h2gate::net {
struct IpAddress;  // gateway/net/ip_address.h
}  // namespace h2gate::net

namespace h2gate::filters {

class PacBuilder;  // filters/served_pac.h

enum class FilterStatus {
  Continue,  // next filter
  Stop,      // stop the chain: info.status set means reject with that status,
             // otherwise the route in info is final
};

class Filter {
 public:
  virtual ~Filter() = default;

  // Runtime set-up that may do I/O (open a log file). Not called by
  // `--validate`. Returns an error message or "".
  virtual std::string init() { return {}; }

  // Sees the parsed request head. May reject (set info.status and
  // info.reason, return Stop) or set the route (info.cluster/route_set).
  virtual FilterStatus onRequestHead(const RequestHead&, StreamInfo&) const {
    return FilterStatus::Continue;
  }

  // Direct mode, before h2gate connects anywhere for this request: once per
  // address the destination name resolved to, or the IP literal it named
  // (IPv4-mapped addresses already unmapped). `head` and `info` are those
  // onRequestHead saw. A refusal of any address refuses the request (h2gate
  // connects to none of them). Filters whose rules match addresses (the
  // acl's deny entries, forward_proxy's reject routes) override it.
  virtual std::optional<Refusal> checkAddress(const RequestHead&, const StreamInfo&,
                                              const net::IpAddress&) const {
    return std::nullopt;
  }

  // Called once per request/tunnel when it ends, whatever the result.
  virtual void onComplete(const RequestHead&, const StreamInfo&) const {}

  // A terminal filter (forward_proxy) must be last in a chain.
  // The machine's network changed (or it resumed): forget what depends on
  // it (a PAC route's cached answers). Called on the main thread.
  virtual void onNetworkChange() const {}
  virtual bool terminal() const { return false; }

  // Filters that decide where requests go (acl, forward_proxy) add their
  // rules to the listener's PAC file, in chain order. Called once per
  // listener build, never per request.
  virtual void describePac(PacBuilder&) const {}
};

using FilterPtr = std::shared_ptr<const Filter>;

}  // namespace h2gate::filters
