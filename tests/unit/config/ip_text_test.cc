// The IP text form the config accepts (config/ip_text.h): the same on every
// platform, so a config that loads on Linux loads on Windows and means the
// same addresses there (Windows' inet_pton would take "127.1" or octal).
#include "config/ip_text.h"

#include <catch2/catch.hpp>

using h2gate::config::ipTextIsStrict;

TEST_CASE("ip text: dotted-quad IPv4, exactly four decimal parts", "[config][ip_text]") {
  for (const char* ok : {"127.0.0.1", "0.0.0.0", "255.255.255.255", "10.0.100.9", "192.0.2.10"}) {
    INFO(ok);
    CHECK(ipTextIsStrict(ok));
  }
  for (const char* bad : {"", "127.1", "127.0.1", "1.2.3.4.5", "256.0.0.1", "1.2.3.1000",
                          "0177.0.0.1", "010.0.0.1", "00.0.0.0", "0x7f.0.0.1", "1.2.3.", ".1.2.3",
                          "1..2.3", "1.2.3.4 ", " 1.2.3.4", "1.2.3.-4", "+1.2.3.4"}) {
    INFO(bad);
    CHECK_FALSE(ipTextIsStrict(bad));
  }
}

TEST_CASE("ip text: IPv6 hex groups, optionally ending in dotted-quad IPv4", "[config][ip_text]") {
  for (const char* ok : {"::1", "::", "2001:db8::1", "2001:DB8:0:0:0:0:0:1", "fe80::abcd",
                         "::ffff:192.0.2.1", "64:ff9b::10.0.0.1", "1:2:3:4:5:6:7:8"}) {
    INFO(ok);
    CHECK(ipTextIsStrict(ok));
  }
  for (const char* bad : {"[::1]", "fe80::1%eth0", "2001:db8::12345", "2001:db8::g", "::ffff:1.2.3",
                          "::ffff:01.2.3.4", "::ffff:1.2.3.256", "1.2.3.4::", "::1 "}) {
    INFO(bad);
    CHECK_FALSE(ipTextIsStrict(bad));
  }
}
