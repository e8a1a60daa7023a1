// A listener's allow-list (source_prefix_ranges, --allow) and the rate limit
// of the lines about refused clients.
#include "gateway/net/source_ranges.h"

#include <catch2/catch.hpp>

using namespace h2gate;
using namespace h2gate::net;

namespace {

config::SourcePrefixRange entry(const std::string& prefix, uint32_t len) {
  return config::SourcePrefixRange{prefix, len, {}};
}

SourceRanges ranges(std::vector<config::SourcePrefixRange> entries) {
  std::string error;
  std::optional<SourceRanges> r = SourceRanges::build(entries, &error);
  INFO(error);
  REQUIRE(r);
  return *r;
}

asio::ip::address addr(const char* text) {
  return asio::ip::make_address(text);
}

}  // namespace

TEST_CASE("source ranges: a client matches by address family and prefix", "[net][sources]") {
  const SourceRanges r = ranges({entry("172.16.0.0", 12), entry("fd00::", 8)});
  CHECK(r.restricted());
  CHECK(r.str() == "172.16.0.0/12, fd00::/8");
  CHECK(r.allows(addr("172.16.0.1")));
  CHECK(r.allows(addr("172.31.255.254")));
  CHECK_FALSE(r.allows(addr("172.32.0.1")));
  CHECK_FALSE(r.allows(addr("10.0.0.1")));
  CHECK(r.allows(addr("fd12:3456::1")));
  CHECK_FALSE(r.allows(addr("fe80::1")));
  CHECK_FALSE(r.allows(addr("2001:db8::1")));
  // A dual-stack socket's IPv4 client: judged as its IPv4 address.
  CHECK(r.allows(addr("::ffff:172.20.1.2")));
  CHECK_FALSE(r.allows(addr("::ffff:10.0.0.1")));
  // IPv4-compatible (deprecated) is an IPv6 address, not an IPv4 client.
  CHECK_FALSE(r.allows(addr("::172.20.1.2")));

  // One address, everyone of a family.
  const SourceRanges one = ranges({entry("192.168.1.7", 32)});
  CHECK(one.allows(addr("192.168.1.7")));
  CHECK_FALSE(one.allows(addr("192.168.1.8")));
  const SourceRanges v4 = ranges({entry("0.0.0.0", 0)});
  CHECK(v4.allows(addr("203.0.113.9")));
  CHECK(v4.allows(addr("::ffff:203.0.113.9")));
  CHECK_FALSE(v4.allows(addr("2001:db8::1")));  // ::/0 is the IPv6 half
  CHECK(ranges({entry("::", 0)}).allows(addr("2001:db8::1")));

  // An IPv4-mapped range is the IPv4 range it maps.
  const SourceRanges mapped = ranges({entry("::ffff:10.0.0.0", 104)});
  CHECK(mapped.str() == "10.0.0.0/8");
  CHECK(mapped.allows(addr("10.1.2.3")));

  CHECK_FALSE(SourceRanges().restricted());
}

TEST_CASE("source ranges: bad entries say why", "[net][sources][errors]") {
  const auto why = [](const std::string& prefix, uint32_t len) {
    std::string error;
    CHECK_FALSE(sourceRange(entry(prefix, len), &error));
    return error;
  };
  CHECK(why("10.1.2.3", 8) == "'10.1.2.3/8' has host bits set (did you mean 10.0.0.0/8?)");
  CHECK(why("10.0.0.0", 33) == "prefix length /33 is longer than the address (at most /32)");
  CHECK(why("fd00::", 129) == "prefix length /129 is longer than the address (at most /128)");
  CHECK(why("wsl.internal", 24) == "'wsl.internal' is not an IPv4 or IPv6 address");
  CHECK(why("010.0.0.0", 8) == "'010.0.0.0' is not an IPv4 or IPv6 address");
  CHECK(why("fe80::%eth0", 64) == "'fe80::%eth0' is not an IPv4 or IPv6 address");
  CHECK(why("", 0) == "'' is not an IPv4 or IPv6 address");
  CHECK(why("10.0.0.0/8", 8) ==
        "address_prefix '10.0.0.0/8' is an address without /LEN: put the length in prefix_len");
  std::string error;
  CHECK_FALSE(SourceRanges::build({entry("10.0.0.0", 8), entry("10.0.0.1", 8)}, &error));
  CHECK(error == "'10.0.0.1/8' has host bits set (did you mean 10.0.0.0/8?)");
}

TEST_CASE("refusal log: one line per source address per interval", "[net][sources]") {
  using std::chrono::seconds;
  RefusalLog log;
  const RefusalLog::Clock::time_point t0{seconds(1000)};
  const asio::ip::address a = addr("10.0.0.5");
  const asio::ip::address b = addr("10.0.0.6");

  RefusalLog::Verdict v = log.note(a, t0);
  CHECK(v.log);
  CHECK(v.unlogged == 0);
  CHECK_FALSE(v.crowd);
  CHECK_FALSE(log.note(a, t0 + seconds(1)).log);
  CHECK_FALSE(log.note(a, t0 + seconds(9)).log);
  CHECK(log.note(b, t0 + seconds(9)).log);  // another address: its own line
  v = log.note(a, t0 + RefusalLog::kInterval);
  CHECK(v.log);
  CHECK(v.unlogged == 2);  // the two not logged since
  CHECK_FALSE(log.note(a, t0 + RefusalLog::kInterval + seconds(1)).log);
}

TEST_CASE("refusal log: a scan from many addresses stays bounded", "[net][sources]") {
  using std::chrono::seconds;
  RefusalLog log;
  const RefusalLog::Clock::time_point t0{seconds(1000)};
  const auto v4 = [](uint32_t n) {
    return asio::ip::address(asio::ip::address_v4(0x0A000000 + n));
  };
  for (uint32_t i = 0; i < RefusalLog::kMaxSources; ++i) REQUIRE(log.note(v4(i), t0).log);
  // Beyond the table: one shared line, then nothing within the interval.
  RefusalLog::Verdict v = log.note(v4(5000), t0 + seconds(1));
  CHECK(v.log);
  CHECK(v.crowd);
  for (uint32_t i = 5001; i < 5100; ++i) CHECK_FALSE(log.note(v4(i), t0 + seconds(2)).log);
  // Known addresses keep their own lines.
  CHECK_FALSE(log.note(v4(3), t0 + seconds(2)).log);
  // An interval later the old entries make room again.
  v = log.note(v4(6000), t0 + RefusalLog::kInterval + seconds(1));
  CHECK(v.log);
  CHECK_FALSE(v.crowd);
}
