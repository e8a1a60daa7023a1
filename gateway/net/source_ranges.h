// Which clients may connect to a listener: its source_prefix_ranges
// (config/README.md, "Who may use a listener"), and the rate limit of the
// log lines about the ones refused.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <asio/ip/address.hpp>

#include "config/config.h"
#include "gateway/net/ip_address.h"

namespace h2gate::net {

// One source_prefix_ranges entry as a range: address_prefix an IPv4 or IPv6
// address without a zone or a "/LEN" of its own, prefix_len at most 32 or
// 128, no host bits set under the prefix ("10.1.2.3" with 8 says "did you
// mean 10.0.0.0/8?"). An IPv4-mapped range (::ffff:10.0.0.0 with 104) is the
// IPv4 range it maps. nullopt and *error otherwise.
std::optional<CidrRange> sourceRange(const config::SourcePrefixRange& entry, std::string* error);

// A listener's allow-list. Built once per listener context; read by every
// worker.
class SourceRanges {
 public:
  SourceRanges() = default;  // no list: every client
  // nullopt and *error at the first entry sourceRange() refuses.
  static std::optional<SourceRanges> build(const std::vector<config::SourcePrefixRange>& entries,
                                           std::string* error);

  bool restricted() const { return !ranges_.empty(); }
  // Whether a client connecting from `client` may use the listener. An
  // IPv4-mapped IPv6 address (::ffff:a.b.c.d, a dual-stack socket's IPv4
  // client) is judged as the IPv4 address it carries.
  bool allows(const asio::ip::address& client) const;
  std::string str() const;  // "10.0.0.0/8, fd00::/8"

 private:
  std::vector<CidrRange> ranges_;
};

// Rate limit of the warnings about refused clients: one line per source
// address per kInterval, with the number of refusals from it not logged
// since. It remembers at most kMaxSources addresses; when more were refused
// within an interval (a scan), the addresses beyond share one line per
// interval. Thread-safe: the workers of a listener share one.
class RefusalLog {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kInterval{10};
  static constexpr std::size_t kMaxSources = 1024;

  struct Verdict {
    bool log = false;       // write a line now
    uint64_t unlogged = 0;  // refusals (of this address, or of the crowd) not logged since
    bool crowd = false;     // this address is one beyond kMaxSources
  };
  Verdict note(const asio::ip::address& source, Clock::time_point now);

 private:
  struct Entry {
    Clock::time_point last{};
    uint64_t unlogged = 0;
  };
  static Verdict due(Entry& e, Clock::time_point now, bool fresh);

  std::mutex mutex_;
  std::map<asio::ip::address, Entry> sources_;
  Entry crowd_;
  bool crowd_logged_ = false;
};

}  // namespace h2gate::net
