// Name resolution for the PAC functions that ask DNS (dnsResolve,
// dnsResolveEx, isResolvable, isInNet with a name, myIpAddress...).
//
// PAC evaluation runs apart from the event loops (gateway/pac_engine/evaluator.h),
// so these calls block — but never past the deadline they are given: a PAC
// file whose DNS server does not answer is slow, not stuck. Tests inject
// their own resolver; production uses SystemResolver.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/net/ip_address.h"

namespace h2gate::pac {

using Deadline = std::chrono::steady_clock::time_point;

class PacResolver {
 public:
  virtual ~PacResolver() = default;

  // The addresses of `host` (a name or an IP literal), in the resolver's
  // order of preference; only IPv4 ones when `v4_only`. Empty when the name
  // does not resolve or `deadline` passes first. `owner` is whom the lookup
  // is for: the host of the request whose evaluation asks ("" for a PAC
  // file's top-level code); a resolver may bound the lookups per owner so
  // that one request's cannot starve another's. Called concurrently.
  virtual std::vector<net::IpAddress> resolve(const std::string& host, bool v4_only,
                                              Deadline deadline, std::string_view owner) = 0;

  // This machine's own addresses for myIpAddress()/myIpAddressEx(), the one
  // its default route would use first. Empty when there is none (only
  // loopback).
  virtual std::vector<net::IpAddress> localAddresses(Deadline deadline) = 0;

  // The network changed: whatever the resolver remembers may be wrong now.
  virtual void networkChanged() {}
};

// getaddrinfo() on lookup threads of its own, with a short cache, shared by
// the evaluations of one PAC route.
//
//   - Cache: an answer is kept `ttl` (30 s), "no such name" `negative_ttl`
//     (5 s); networkChanged() empties it. Lookups of a name already under
//     way are joined, not repeated.
//   - Deadlines: a caller whose deadline passes gets an empty answer; its
//     lookup goes on in the background (getaddrinfo() cannot be cancelled)
//     and its answer is cached when it comes, so a dead DNS server costs
//     each name one lookup per negative_ttl, not one per call.
//   - Fairness: a lookup counts against its owner until getaddrinfo()
//     returns, whether anybody still waits for it or not. An owner with
//     `per_owner` lookups under way gets no more (an empty answer at once),
//     so a PAC file that loops over dnsResolve() for one request, with a
//     DNS server that does not answer, holds at most `per_owner` threads;
//     the other requests' lookups (a name in /etc/hosts, say) start at once
//     on threads of their own. At most `max_threads` lookups run at once;
//     beyond, a lookup waits for a thread (by its deadline), up to
//     `max_waiting` of them.
//   - Threads are started on demand and end after 10 s without work.
//
// localAddresses(): what Chromium answers for myIpAddress(): the source
// address of the default IPv4 and IPv6 routes, else the addresses of the
// interfaces that are up, loopback and link-local left out
// (net::routeSourceAddress, net::interfaceAddresses).
class SystemResolver : public PacResolver {
 public:
  struct Options {
    std::string name = "pac";  // for logs: the route
    std::size_t max_threads = 32;
    std::size_t per_owner = 4;
    std::size_t max_waiting = 256;
    std::chrono::milliseconds ttl{30000};
    std::chrono::milliseconds negative_ttl{5000};
    std::size_t cache_entries = 1024;
  };
  // The blocking lookup itself; empty: getaddrinfo(). Tests give their own
  // (one that never answers, say).
  using LookupFunction =
      std::function<std::vector<net::IpAddress>(const std::string& host, bool v4_only)>;

  SystemResolver();
  explicit SystemResolver(Options options, LookupFunction lookup = {});
  ~SystemResolver() override;
  SystemResolver(const SystemResolver&) = delete;
  SystemResolver& operator=(const SystemResolver&) = delete;

  std::vector<net::IpAddress> resolve(const std::string& host, bool v4_only, Deadline deadline,
                                      std::string_view owner) override;
  std::vector<net::IpAddress> localAddresses(Deadline deadline) override;
  void networkChanged() override;

  struct Stats {
    uint64_t lookups = 0;     // getaddrinfo() calls started
    uint64_t cache_hits = 0;  // answered from the cache
    uint64_t joined = 0;      // answered by a lookup of the same name under way
    uint64_t refused = 0;    // refused: the owner had per_owner lookups under way, or too many wait
    uint64_t timed_out = 0;  // callers whose deadline passed first
    std::size_t threads = 0;  // lookup threads now
  };
  Stats stats() const;

 private:
  struct Pool;
  static void lookupThread(std::shared_ptr<Pool> pool);
  std::shared_ptr<Pool> pool_;  // shared with the lookup threads, which may outlive us
};

// getaddrinfo() itself: the addresses of `host`, without duplicates.
std::vector<net::IpAddress> getaddrinfoLookup(const std::string& host, bool v4_only);

}  // namespace h2gate::pac
