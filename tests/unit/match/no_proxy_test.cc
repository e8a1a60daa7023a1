// NO_PROXY lists in each compatibility mode, with the cases of filters/README.md's
// curl / Go / Python table.
#include "gateway/match/no_proxy.h"

#include <catch2/catch.hpp>

using namespace h2gate::match;

namespace {

struct List {
  List(const std::string& text, NoProxyMode mode) : parsed(parseNoProxy(text, mode)) {
    for (const HostPattern& p : parsed.patterns) set.add(p);
  }
  bool bypass(const std::string& host, uint16_t port = 443) const {
    const Destination d(host, port, true);
    return set.matches(d);
  }
  NoProxyList parsed;
  DestinationSet set;
};

constexpr NoProxyMode kCurl = NoProxyMode::Curl;
constexpr NoProxyMode kGo = NoProxyMode::Go;
constexpr NoProxyMode kPython = NoProxyMode::Python;

}  // namespace

TEST_CASE("no_proxy modes by name", "[match][no_proxy]") {
  CHECK(parseNoProxyMode("curl") == kCurl);
  CHECK(parseNoProxyMode("go") == kGo);
  CHECK(parseNoProxyMode("python") == kPython);
  CHECK_FALSE(parseNoProxyMode("Curl"));
  CHECK(std::string(noProxyModeName(kGo)) == "go");
}

TEST_CASE("no_proxy: 'example.com' covers the name and its subdomains everywhere",
          "[match][no_proxy]") {
  for (NoProxyMode mode : {kCurl, kGo, kPython}) {
    INFO(noProxyModeName(mode));
    List l("example.com", mode);
    CHECK(l.bypass("example.com"));
    CHECK(l.bypass("www.example.com"));
    CHECK(l.bypass("WWW.EXAMPLE.COM."));
    CHECK_FALSE(l.bypass("notexample.com"));
    CHECK_FALSE(l.bypass("example.com.evil"));
  }
}

TEST_CASE("no_proxy: '.example.com' — Go alone means subdomains only", "[match][no_proxy]") {
  CHECK(List(".example.com", kCurl).bypass("example.com"));
  CHECK(List(".example.com", kPython).bypass("example.com"));
  CHECK_FALSE(List(".example.com", kGo).bypass("example.com"));
  for (NoProxyMode mode : {kCurl, kGo, kPython})
    CHECK(List(".example.com", mode).bypass("a.example.com"));
}

TEST_CASE("no_proxy: '*.example.com' — only Go takes it (as subdomains)", "[match][no_proxy]") {
  const List go("*.example.com", kGo);
  CHECK(go.bypass("a.example.com"));
  CHECK_FALSE(go.bypass("example.com"));
  for (NoProxyMode mode : {kCurl, kPython}) {
    const List l("*.example.com", mode);
    CHECK_FALSE(l.bypass("a.example.com"));
    REQUIRE(l.parsed.ignored.size() == 1);
    CHECK(l.parsed.ignored[0].rfind("'*.example.com': ", 0) == 0);
  }
}

TEST_CASE("no_proxy: '*' alone, and among other entries", "[match][no_proxy]") {
  for (NoProxyMode mode : {kCurl, kGo, kPython}) {
    INFO(noProxyModeName(mode));
    CHECK(List("*", mode).bypass("anything"));
    CHECK(List("*", mode).bypass("10.1.2.3"));
  }
  // Only Go honours a '*' entry inside a list.
  CHECK(List("a.test,*", kGo).bypass("b.test"));
  CHECK_FALSE(List("a.test,*", kCurl).bypass("b.test"));
  CHECK_FALSE(List("a.test,*", kPython).bypass("b.test"));
  CHECK(List("a.test,*", kCurl).parsed.ignored.size() == 1);
}

TEST_CASE("no_proxy: IP addresses and CIDR ranges match IP literals", "[match][no_proxy]") {
  for (NoProxyMode mode : {kCurl, kGo, kPython}) {
    INFO(noProxyModeName(mode));
    const List l("127.0.0.1,10.0.0.0/8,192.168.0.0/16", mode);
    CHECK(l.bypass("127.0.0.1"));
    CHECK(l.bypass("10.20.30.40"));
    CHECK(l.bypass("192.168.255.1"));
    CHECK_FALSE(l.bypass("11.0.0.1"));
    CHECK_FALSE(l.bypass("10.example"));  // names never match ranges
  }
  // Host bits are cleared, as the programs do.
  CHECK(List("10.1.2.3/8", kCurl).bypass("10.200.0.1"));
  // IPv6: curl and Go take ranges; requests only IPv4 ones.
  CHECK(List("fd00::/8", kCurl).bypass("fd12::1"));
  CHECK(List("fd00::/8", kGo).bypass("[fd12::1]"));
  CHECK_FALSE(List("fd00::/8", kPython).bypass("fd12::1"));
  CHECK(List("fd00::/8", kPython).parsed.ignored.size() == 1);
  CHECK(List("::1", kCurl).bypass("::1"));
}

TEST_CASE("no_proxy: host:port — Go and Python restrict to the port, curl ignores it",
          "[match][no_proxy]") {
  for (NoProxyMode mode : {kGo, kPython}) {
    INFO(noProxyModeName(mode));
    const List l("host.test:8080,10.0.0.1:8443", mode);
    CHECK(l.bypass("host.test", 8080));
    CHECK(l.bypass("a.host.test", 8080));
    CHECK_FALSE(l.bypass("host.test", 443));
    CHECK(l.bypass("10.0.0.1", 8443));
    CHECK_FALSE(l.bypass("10.0.0.1", 443));
  }
  CHECK(List("[::1]:8080", kGo).bypass("::1", 8080));
  const List curl("host.test:8080", kCurl);
  CHECK_FALSE(curl.bypass("host.test", 8080));
  REQUIRE(curl.parsed.ignored.size() == 1);
  CHECK(curl.parsed.ignored[0] ==
        "'host.test:8080': curl takes no ports in NO_PROXY and this is no IP range");
}

TEST_CASE("no_proxy: separators — curl splits on blanks too", "[match][no_proxy]") {
  CHECK(List("a.test b.test", kCurl).bypass("b.test"));
  CHECK(List(" a.test ,\tb.test ", kCurl).bypass("b.test"));
  // Go and Python split on commas only: "a.test b.test" is one (bad) entry.
  CHECK_FALSE(List("a.test b.test", kGo).bypass("b.test"));
  CHECK_FALSE(List("a.test b.test", kPython).bypass("b.test"));
  CHECK(List(" a.test , b.test ", kGo).bypass("b.test"));
  CHECK(List(" a.test , b.test ", kPython).bypass("b.test"));
  CHECK(List("a.test,,", kCurl).parsed.patterns.size() == 1);
}

TEST_CASE("no_proxy: Go never proxies localhost or loopback", "[match][no_proxy]") {
  const List go("", kGo);
  CHECK(go.bypass("localhost"));
  CHECK(go.bypass("127.0.0.2"));
  CHECK(go.bypass("::1"));
  CHECK_FALSE(go.bypass("sub.localhost"));
  for (NoProxyMode mode : {kCurl, kPython}) {
    CHECK_FALSE(List("", mode).bypass("localhost"));
    CHECK_FALSE(List("", mode).bypass("127.0.0.1"));
  }
}

TEST_CASE("no_proxy: the example list of no_proxy.h in each mode", "[match][no_proxy]") {
  const std::string list = "localhost,127.0.0.1,.svc,10.0.0.0/8,host:8080";
  const List curl(list, kCurl), go(list, kGo), py(list, kPython);
  for (const List* l : {&curl, &go, &py}) {
    CHECK(l->bypass("localhost"));
    CHECK(l->bypass("127.0.0.1"));
    CHECK(l->bypass("api.default.svc"));
    CHECK(l->bypass("10.9.8.7"));
    CHECK_FALSE(l->bypass("example.com"));
  }
  CHECK(curl.bypass("svc"));
  CHECK_FALSE(go.bypass("svc"));  // ".svc" is subdomains only for Go
  CHECK(py.bypass("svc"));
  CHECK_FALSE(curl.bypass("host", 8080));
  CHECK(go.bypass("host", 8080));
  CHECK(py.bypass("host", 8080));
  CHECK_FALSE(go.bypass("host", 80));
}

TEST_CASE("no_proxy: IDN entries are compared as A-labels", "[match][no_proxy]") {
  for (NoProxyMode mode : {kCurl, kGo, kPython})
    CHECK(List("bücher.example", mode).bypass("www.xn--bcher-kva.example"));
}
