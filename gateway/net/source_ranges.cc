#include "gateway/net/source_ranges.h"

#include <asio/ip/address_v4.hpp>

#include "gateway/net/host_addresses.h"

namespace h2gate::net {

std::optional<CidrRange> sourceRange(const config::SourcePrefixRange& entry, std::string* error) {
  if (entry.address_prefix.find('/') != std::string::npos) {
    *error = "address_prefix '" + entry.address_prefix +
             "' is an address without /LEN: put the length in prefix_len";
    return std::nullopt;
  }
  return parseCidr(entry.address_prefix + "/" + std::to_string(entry.prefix_len),
                   /*strict=*/true, error);
}

std::optional<SourceRanges> SourceRanges::build(
    const std::vector<config::SourcePrefixRange>& entries, std::string* error) {
  SourceRanges out;
  for (const config::SourcePrefixRange& e : entries) {
    std::optional<CidrRange> range = sourceRange(e, error);
    if (!range) return std::nullopt;
    out.ranges_.push_back(*range);
  }
  return out;
}

bool SourceRanges::allows(const asio::ip::address& client) const {
  asio::ip::address a = client;
  // Only the mapped form: an IPv4-compatible ::a.b.c.d is an IPv6 client.
  if (a.is_v6() && a.to_v6().is_v4_mapped())
    a = asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  const IpAddress ip = toIpAddress(a);
  for (const CidrRange& r : ranges_)
    if (r.contains(ip)) return true;
  return false;
}

std::string SourceRanges::str() const {
  std::string out;
  for (const CidrRange& r : ranges_) out += (out.empty() ? "" : ", ") + r.str();
  return out;
}

RefusalLog::Verdict RefusalLog::due(Entry& e, Clock::time_point now, bool fresh) {
  if (!fresh && now - e.last < kInterval) {
    ++e.unlogged;
    return {};
  }
  Verdict v{true, e.unlogged, false};
  e.last = now;
  e.unlogged = 0;
  return v;
}

RefusalLog::Verdict RefusalLog::note(const asio::ip::address& source, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = sources_.find(source); it != sources_.end()) return due(it->second, now, false);
  if (sources_.size() >= kMaxSources) {
    // Addresses whose last line is an interval old would be logged again
    // anyway: forgetting them loses nothing but their unlogged count.
    std::erase_if(sources_, [&](const auto& kv) { return now - kv.second.last >= kInterval; });
  }
  if (sources_.size() < kMaxSources) return due(sources_[source], now, true);
  Verdict v = due(crowd_, now, !crowd_logged_);
  crowd_logged_ = true;
  v.crowd = true;
  return v;
}

}  // namespace h2gate::net
