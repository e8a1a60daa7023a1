// The PAC answer parser: what FindProxyForURL returns, turned into the
// failover list h2gate follows.
#include "gateway/pac_engine/answer.h"

#include <catch2/catch.hpp>

using namespace h2gate::pac;

namespace {

std::string entries(std::string_view answer) {
  return parseProxyList(answer).str();
}

std::string firstReason(std::string_view answer) {
  const ProxyList l = parseProxyList(answer);
  return l.skipped.empty() ? std::string("(none)") : l.skipped.front().reason;
}

}  // namespace

TEST_CASE("pac answer: DIRECT, PROXY and HTTPS with their default ports", "[pac][answer]") {
  CHECK(entries("DIRECT") == "DIRECT");
  CHECK(entries("PROXY proxy.corp:8080") == "PROXY proxy.corp:8080");
  CHECK(entries("PROXY proxy.corp") == "PROXY proxy.corp:80");
  CHECK(entries("HTTPS secure.corp") == "HTTPS secure.corp:443");
  CHECK(entries("HTTPS secure.corp:8443") == "HTTPS secure.corp:8443");
  CHECK(entries("HTTP legacy.corp:3128") == "PROXY legacy.corp:3128");  // Chromium's alias
  const ProxyList l = parseProxyList("HTTPS 10.0.0.1:444");
  REQUIRE(l.entries.size() == 1);
  CHECK(l.entries[0].kind == ProxyEntry::Kind::Https);
  CHECK(l.entries[0].host == "10.0.0.1");
  CHECK(l.entries[0].port == 444);
  CHECK(l.skipped_count == 0);
}

TEST_CASE("pac answer: a failover list in order, whatever the spacing", "[pac][answer]") {
  const std::string want = "PROXY a.corp:8080; PROXY b.corp:8080; DIRECT";
  CHECK(entries("PROXY a.corp:8080; PROXY b.corp:8080; DIRECT") == want);
  CHECK(entries("PROXY a.corp:8080;PROXY b.corp:8080;DIRECT") == want);
  CHECK(entries("  PROXY   a.corp:8080 ;\tPROXY\tb.corp:8080\t;  DIRECT  ") == want);
  CHECK(entries("PROXY a.corp:8080;\r\n PROXY b.corp:8080;\nDIRECT;") == want);
  CHECK(entries(";;PROXY a.corp:8080;;; PROXY b.corp:8080 ; DIRECT ;;") == want);
  CHECK(parseProxyList(";;  ;").entries.empty());
  CHECK(parseProxyList(";;  ;").skipped_count == 0);
  CHECK(parseProxyList("").entries.empty());
}

TEST_CASE("pac answer: keywords in any case, host names lower-cased", "[pac][answer]") {
  CHECK(entries("direct") == "DIRECT");
  CHECK(entries("Proxy Proxy.CORP.example:8080; hTtPs A.B:1") ==
        "PROXY proxy.corp.example:8080; HTTPS a.b:1");
}

TEST_CASE("pac answer: IPv6 literals in brackets", "[pac][answer]") {
  CHECK(entries("PROXY [2001:db8::1]:8080") == "PROXY [2001:db8::1]:8080");
  CHECK(entries("HTTPS [2001:DB8:0:0::1]") == "HTTPS [2001:db8::1]:443");
  CHECK(entries("PROXY [::1]") == "PROXY [::1]:80");
  const ProxyList l = parseProxyList("PROXY [fd00::5]:3128");
  REQUIRE(l.entries.size() == 1);
  CHECK(l.entries[0].host == "fd00::5");  // without brackets, for connecting

  CHECK(firstReason("PROXY 2001:db8::1:8080") ==
        "an IPv6 address needs brackets ([2001:db8::1]:8080)");
  CHECK(firstReason("PROXY [2001:db8::1:8080") == "unclosed '[' in the address");
  CHECK(firstReason("PROXY [10.0.0.1]:80") == "'10.0.0.1' in brackets is not an IPv6 address");
  CHECK(firstReason("PROXY [fe80::1%eth0]:80") ==
        "'fe80::1%eth0' in brackets is not an IPv6 address");
  CHECK(firstReason("PROXY [::1]x") == "unexpected text after ']'");
}

TEST_CASE("pac answer: SOCKS and QUIC are skipped as unsupported, the rest still counts",
          "[pac][answer]") {
  const ProxyList l = parseProxyList(
      "SOCKS5 s.corp:1080; socks s.corp:1080; SOCKS4 s:1; "
      "QUIC q.corp:443; PROXY p.corp:3128; DIRECT");
  CHECK(l.str() == "PROXY p.corp:3128; DIRECT");
  REQUIRE(l.skipped.size() == 4);
  CHECK(l.skipped[0].unsupported);
  CHECK(l.skipped[0].reason == "SOCKS5 proxies are not supported by h2gate");
  CHECK(l.skipped[0].text == "SOCKS5 s.corp:1080");
  CHECK(l.skipped[1].reason == "SOCKS proxies are not supported by h2gate");
  CHECK(l.skipped[2].reason == "SOCKS4 proxies are not supported by h2gate");
  CHECK(l.skipped[3].reason == "QUIC proxies are not supported by h2gate");
}

TEST_CASE("pac answer: garbage entries are skipped with a reason", "[pac][answer]") {
  CHECK(firstReason("undefined") ==
        "unknown keyword 'undefined' (expected DIRECT, PROXY host:port or HTTPS host:port)");
  CHECK(firstReason("PROXY") == "PROXY needs host:port");
  CHECK(firstReason("HTTPS   ") == "HTTPS needs host:port");
  CHECK(firstReason("DIRECT now") == "DIRECT takes no address");
  CHECK(firstReason("PROXY a:1 b:2") == "more than one address in the entry");
  CHECK(firstReason("PROXY a:") == "empty port after ':'");
  CHECK(firstReason("PROXY a:http") == "port 'http' is not a number");
  CHECK(firstReason("PROXY a:0") == "port 0 is out of range");
  CHECK(firstReason("PROXY a:65536") == "port 65536 is out of range");
  CHECK(firstReason("PROXY a:123456") == "port '123456' is not a number");
  CHECK(firstReason("PROXY a..b:1") == "'a..b' is not a host name or address");
  CHECK(firstReason("PROXY .a:1") == "'.a' is not a host name or address");
  CHECK(firstReason("PROXY :8080") == "'' is not a host name or address");
  CHECK(firstReason("PROXY http://a:8080") == "'http://a:8080' is a URL, not host:port");
  CHECK(firstReason(std::string("PROXY a\0b:1", 11)) == "control character in the entry");
  CHECK(firstReason("PROXY b\xc3\xbc.corp:1") == "'b??.corp' is not a host name or address");
  // A name with a trailing dot is a name.
  CHECK(entries("PROXY proxy.corp.:8080") == "PROXY proxy.corp.:8080");
  // Skipped text is quoted as written (trimmed) and kept short.
  const ProxyList l = parseProxyList("  BOGUS " + std::string(500, 'x') + " ; DIRECT");
  CHECK(l.str() == "DIRECT");
  REQUIRE(l.skipped.size() == 1);
  CHECK(l.skipped[0].text.size() == 203);
  CHECK(l.skipped[0].text.starts_with("BOGUS xxx"));
  CHECK_FALSE(l.skipped[0].unsupported);
}

TEST_CASE("pac answer: repeats are dropped, and the lists are bounded", "[pac][answer]") {
  CHECK(entries("PROXY a:1; DIRECT; proxy A:1; DIRECT") == "PROXY a:1; DIRECT");
  std::string many;
  for (int i = 0; i < 100; ++i) many += "PROXY p" + std::to_string(i) + ":1;";
  ProxyList l = parseProxyList(many);
  CHECK(l.entries.size() == kMaxEntries);
  CHECK(l.entries.back().host == "p31");
  CHECK(l.skipped_count == 100 - kMaxEntries);
  CHECK(l.skipped.size() == kMaxSkipped);
  CHECK(l.skipped[0].reason == "more than 32 entries");

  std::string junk;
  for (int i = 0; i < 50; ++i) junk += "junk" + std::to_string(i) + "; ";
  l = parseProxyList(junk + "DIRECT");
  CHECK(l.str() == "DIRECT");
  CHECK(l.skipped_count == 50);
  CHECK(l.skipped.size() == kMaxSkipped);
  CHECK(l.skipped.back().text == "junk7");
}

TEST_CASE("pac answer: str() parses back to the same list", "[pac][answer]") {
  const ProxyList l = parseProxyList("HTTPS [2001:db8::7]:8443; PROXY a.b:3128; DIRECT");
  CHECK(parseProxyList(l.str()).entries == l.entries);
}
