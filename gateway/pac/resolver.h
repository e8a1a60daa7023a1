// Name resolution for the PAC functions that ask DNS (dnsResolve,
// dnsResolveEx, isResolvable, isInNet with a name, myIpAddress...).
//
// PAC evaluation runs on its own threads (gateway/pac/evaluator.h), so these
// calls block — but never past the deadline they are given: a PAC file
// whose DNS server does not answer is slow, not stuck. Tests inject their
// own resolver; production uses systemResolver().
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "filters/matcher.h"

namespace h2gate::pac {

using Deadline = std::chrono::steady_clock::time_point;

class PacResolver {
 public:
  virtual ~PacResolver() = default;

  // The addresses of `host` (a name or an IP literal), in the resolver's
  // order of preference; only IPv4 ones when `v4_only`. Empty when the name
  // does not resolve or `deadline` passes first. Called on PAC threads,
  // concurrently.
  virtual std::vector<filters::IpAddress> resolve(const std::string& host, bool v4_only,
                                                  Deadline deadline) = 0;

  // This machine's own addresses for myIpAddress()/myIpAddressEx(), the one
  // its default route would use first. Empty when there is none (only
  // loopback).
  virtual std::vector<filters::IpAddress> localAddresses(Deadline deadline) = 0;
};

// getaddrinfo() on a few lookup threads of its own (at most `threads`
// lookups run at once; more wait their turn, up to `max_waiting`, beyond
// which a lookup fails at once). A caller whose deadline passes gets an
// empty answer; its lookup finishes in the background and is dropped, so a
// dead DNS server costs each PAC call its timeout, never more.
// localAddresses(): what Chromium answers for myIpAddress(): the source
// address of the default IPv4 and IPv6 routes, else the addresses of the
// interfaces that are up, loopback and link-local left out
// (net::routeSourceAddress, net::interfaceAddresses).
class SystemResolver : public PacResolver {
 public:
  explicit SystemResolver(std::size_t threads = 4, std::size_t max_waiting = 256);
  ~SystemResolver() override;
  SystemResolver(const SystemResolver&) = delete;
  SystemResolver& operator=(const SystemResolver&) = delete;

  std::vector<filters::IpAddress> resolve(const std::string& host, bool v4_only,
                                          Deadline deadline) override;
  std::vector<filters::IpAddress> localAddresses(Deadline deadline) override;

 private:
  struct Pool;
  static void lookupThread(std::shared_ptr<Pool> pool);
  std::shared_ptr<Pool> pool_;  // shared with the lookup threads, which may outlive us
};

}  // namespace h2gate::pac
