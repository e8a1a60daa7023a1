// The PAC functions as a PAC file sees them: each case evaluates JavaScript
// in a real Duktape heap with the library installed, a resolver with a
// fixed table and a fixed clock. Expected values are what Chromium answers
// (its choices are listed in gateway/pac_engine/pac_library.h); where pacparser
// (the independent engine of tests/integration/pac_compare_test.cc) differs,
// the case says so.
#include "gateway/pac_engine/pac_library.h"

#include <catch2/catch.hpp>

#include "tests/unit/pac_engine/pac_test_util.h"

using namespace h2gate::pac;
using namespace h2gate::pac::test;

namespace {

std::shared_ptr<TableResolver> table() {
  auto r = std::make_shared<TableResolver>();
  r->table["www.corp.example"] = {"10.1.2.3"};
  r->table["dual.example"] = {"2001:db8::7", "192.0.2.7"};
  r->table["v6only.example"] = {"2001:db8::8"};
  r->table["multi.example"] = {"192.0.2.1", "192.0.2.2"};
  r->local = {"fd00::5", "192.168.7.20", "10.9.9.9"};
  return r;
}

}  // namespace

TEST_CASE("pac library: host name functions", "[pac][library]") {
  ExprRunner js(table());
  CHECK(js.eval("isPlainHostName('www')") == "true");
  CHECK(js.eval("isPlainHostName('www.corp.example')") == "false");
  // Chromium: an IPv6 literal has no dot but is not a plain name
  // (pacparser says true: it only looks for a dot).
  CHECK(js.eval("isPlainHostName('2001:db8::1')") == "false");
  CHECK(js.eval("isPlainHostName('::1')") == "false");
  CHECK(js.eval("isPlainHostName(42)").starts_with("ERROR exception: TypeError"));

  CHECK(js.eval("dnsDomainIs('www.corp.example', '.corp.example')") == "true");
  CHECK(js.eval("dnsDomainIs('www.corp.example', 'corp.example')") ==
        "true");  // a plain suffix test
  CHECK(js.eval("dnsDomainIs('www.example', '.corp.example')") == "false");
  CHECK(js.eval("dnsDomainIs('corp.example', '.corp.example')") == "false");

  CHECK(js.eval("localHostOrDomainIs('www.corp.example', 'www.corp.example')") == "true");
  CHECK(js.eval("localHostOrDomainIs('www', 'www.corp.example')") == "true");
  CHECK(js.eval("localHostOrDomainIs('www.other.example', 'www.corp.example')") == "false");
  CHECK(js.eval("localHostOrDomainIs('home', 'www.corp.example')") == "false");

  CHECK(js.eval("dnsDomainLevels('www')") == "0");
  CHECK(js.eval("dnsDomainLevels('www.corp.example')") == "2");
}

TEST_CASE("pac library: shExpMatch is a shell pattern over the whole string", "[pac][library]") {
  ExprRunner js(table());
  CHECK(js.eval("shExpMatch('http://home.netscape.com/people/ari/index.html', '*/ari/*')") ==
        "true");
  CHECK(js.eval("shExpMatch('http://home.netscape.com/people/montulli/index.html', '*/ari/*')") ==
        "false");
  CHECK(js.eval("shExpMatch('www.corp.example', '*.corp.example')") == "true");
  CHECK(js.eval("shExpMatch('corp.example', '*.corp.example')") == "false");
  CHECK(js.eval("shExpMatch('wwwxcorp.example', 'www.corp.example')") == "false");  // '.' literal
  CHECK(js.eval("shExpMatch('host1.corp', 'host?.corp')") == "true");
  CHECK(js.eval("shExpMatch('host12.corp', 'host?.corp')") == "false");
  CHECK(js.eval("shExpMatch('abc', 'b')") == "false");  // anchored
  // As in browsers, other regular-expression characters keep their meaning.
  CHECK(js.eval("shExpMatch('a.foo.com', '*.(foo|bar).com')") == "true");
  // The same pattern again, from the compiled-pattern cache.
  CHECK(js.eval("[shExpMatch('x.corp', '*.corp'), shExpMatch('y.corp', '*.corp'), "
                "shExpMatch('y.corpx', '*.corp')].join()") == "true,true,false");
  // A pattern that is not a valid regular expression throws, as in browsers.
  CHECK(js.eval("shExpMatch('x', '(')").starts_with("ERROR exception: SyntaxError"));
  // '.' stops at a line break, as in a regular expression.
  CHECK(js.eval("shExpMatch('a\\nb', 'a?b')") == "false");
  CHECK(js.eval("shExpMatch('a\\nb', 'a*')") == "false");
}

TEST_CASE("pac library: shExpMatch globs of many '*' answer at once", "[pac][library][hostile]") {
  ExprRunner js(table());
  CHECK(js.eval(
            "[shExpMatch('abc', 'a**c'), shExpMatch('', '*'), shExpMatch('', '?'), "
            "shExpMatch('a', '?'), shExpMatch('ab', '*b*'), shExpMatch('ab', '*?*?*?')].join()") ==
        "true,true,false,true,true,false");
  CHECK(js.eval("shExpMatch('x.corp.example', '*.*.example')") == "true");
  CHECK(js.eval("shExpMatch('x.corp.example', '*.*.*.example')") == "false");
  // As a regular expression each of these backtracks for longer than the
  // 5 s the runner allows (C(200, 15) ways to place the stars), and the
  // answer would be a timeout.
  const std::string host = "'" + std::string(200, 'a') + "'";
  CHECK(js.eval("shExpMatch(" + host + ", '*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b')") == "false");
  CHECK(js.eval("shExpMatch(" + host + ", '" + std::string(40, '*') + "b')") == "false");
  CHECK(js.eval("shExpMatch(" + host + ", '*?*?*?*?*?*?*?*?*?*?*?*?*?*?*a')") == "true");
  // Its native half is no global of the PAC file.
  CHECK(js.eval("typeof __h2gateShExpGlob") == "undefined");
}

TEST_CASE("pac library: globMatch, and when shExpMatch may use it", "[pac][library]") {
  CHECK(globMatch("", ""));
  CHECK(globMatch("", "***"));
  CHECK_FALSE(globMatch("", "?"));
  CHECK(globMatch("abc", "a*c"));
  CHECK(globMatch("abc", "*"));
  CHECK(globMatch("ac", "a*c"));
  CHECK_FALSE(globMatch("abd", "a*c"));
  CHECK(globMatch("a(b)c", "a(*)c"));  // literal
  CHECK(globMatch("mississippi", "m*iss*ppi"));
  CHECK_FALSE(globMatch("mississippi", "m*iss*ppx"));
  CHECK(globMatch("abcabd", "*abd"));  // the '*' retried past a false start
  CHECK(shExpGlob("x.corp", "*.corp") == std::optional<bool>(true));
  CHECK(shExpGlob("xcorp", "*.corp") == std::optional<bool>(false));
  CHECK_FALSE(shExpGlob("a.foo.com", "*.(foo|bar).com"));  // a regular expression
  CHECK_FALSE(shExpGlob("a\nb", "a?b"));                   // '.' stops at the break
  CHECK_FALSE(shExpGlob("\xc3\xa4", "?"));                 // one UTF-16 unit, two bytes
}

TEST_CASE("pac library: DNS functions are IPv4-only except the Ex ones", "[pac][library]") {
  auto r = table();
  ExprRunner js(r);
  CHECK(js.eval("dnsResolve('www.corp.example')") == "10.1.2.3");
  CHECK(js.eval("dnsResolve('dual.example')") == "192.0.2.7");
  // pacparser answers 2001:db8::8 here (it falls back to IPv6); Chromium null.
  CHECK(js.eval("dnsResolve('v6only.example')") == "null");
  CHECK(js.eval("dnsResolve('nowhere.example')") == "null");
  CHECK(js.eval("dnsResolve('192.0.2.99')") == "192.0.2.99");
  CHECK(js.eval("dnsResolve(5)") == "null");
  CHECK(js.eval("isResolvable('www.corp.example')") == "true");
  CHECK(js.eval("isResolvable('v6only.example')") == "false");
  CHECK(js.eval("isResolvable('nowhere.example')") == "false");

  CHECK(js.eval("dnsResolveEx('dual.example')") == "2001:db8::7;192.0.2.7");
  CHECK(js.eval("dnsResolveEx('multi.example')") == "192.0.2.1;192.0.2.2");
  // "" when nothing resolves (Chromium, Internet Explorer); pacparser: null.
  CHECK(js.eval("JSON.stringify(dnsResolveEx('nowhere.example'))") == "\"\"");
  CHECK(js.eval("isResolvableEx('v6only.example')") == "true");
  CHECK(js.eval("isResolvableEx('nowhere.example')") == "false");
}

TEST_CASE("pac library: myIpAddress prefers IPv4, myIpAddressEx lists all", "[pac][library]") {
  auto r = table();
  ExprRunner js(r);
  CHECK(js.eval("myIpAddress()") == "192.168.7.20");
  CHECK(js.eval("myIpAddressEx()") == "fd00::5;192.168.7.20;10.9.9.9");
  r->local = {"fd00::5"};
  CHECK(js.eval("myIpAddress()") == "fd00::5");
  r->local = {};
  CHECK(js.eval("myIpAddress()") == "127.0.0.1");
  CHECK(js.eval("JSON.stringify(myIpAddressEx())") == "\"\"");
}

TEST_CASE("pac library: isInNet with addresses, names and bad masks", "[pac][library]") {
  auto r = table();
  ExprRunner js(r);
  CHECK(js.eval("isInNet('10.1.2.3', '10.0.0.0', '255.0.0.0')") == "true");
  CHECK(js.eval("isInNet('10.1.2.3', '10.1.3.0', '255.255.255.0')") == "false");
  CHECK(js.eval("isInNet('10.1.2.3', '0.0.0.0', '0.0.0.0')") == "true");
  CHECK(js.eval("isInNet('www.corp.example', '10.1.0.0', '255.255.0.0')") == "true");  // resolved
  CHECK(js.eval("isInNet('nowhere.example', '10.1.0.0', '255.255.0.0')") == "false");
  CHECK(js.eval("isInNet('v6only.example', '0.0.0.0', '0.0.0.0')") == "false");
  CHECK(js.eval("isInNet('10.1.2.3', '10.0.0.0', '255.0.0')") == "false");      // bad mask
  CHECK(js.eval("isInNet('10.1.2.3', '10.0.0.256', '255.0.0.0')") == "false");  // bad pattern
  CHECK(js.eval("isInNet('10.1.2.3', '010.0.0.0', '255.0.0.0')") == "true");    // decimal
  const int before = r->lookups();
  CHECK(js.eval("isInNet('1.2.3.4', '1.0.0.0', '255.0.0.0')") == "true");
  CHECK(r->lookups() == before);  // a literal needs no DNS

  CHECK(parseDottedQuad("192.168.0.1") == 0xC0A80001u);
  CHECK_FALSE(parseDottedQuad("192.168.0"));
  CHECK_FALSE(parseDottedQuad("192.168.0.1.5"));
  CHECK_FALSE(parseDottedQuad("1234.0.0.1"));
  CHECK_FALSE(parseDottedQuad(" 1.2.3.4"));
  CHECK_FALSE(parseDottedQuad("1.2.3.4 "));
}

TEST_CASE("pac library: isInNetEx takes IP literals and prefixes of both families",
          "[pac][library]") {
  ExprRunner js(table());
  CHECK(js.eval("isInNetEx('2001:db8::1', '2001:db8::/32')") == "true");
  CHECK(js.eval("isInNetEx('2001:db9::1', '2001:db8::/32')") == "false");
  CHECK(js.eval("isInNetEx('10.1.2.3', '10.0.0.0/8')") == "true");
  CHECK(js.eval("isInNetEx('10.1.2.3', '10.1.2.0/23')") == "true");
  CHECK(js.eval("isInNetEx('10.1.2.3', '10.1.4.0/23')") == "false");
  // Mixed families compare through the IPv4-mapped form.
  CHECK(js.eval("isInNetEx('10.1.2.3', '::ffff:10.0.0.0/104')") == "true");
  CHECK(js.eval("isInNetEx('::ffff:10.1.2.3', '10.0.0.0/8')") == "true");
  CHECK(js.eval("isInNetEx('2001:db8::1', '10.0.0.0/8')") == "false");
  // No DNS: names are not addresses (pacparser resolves them).
  CHECK(js.eval("isInNetEx('www.corp.example', '10.0.0.0/8')") == "false");
  CHECK(js.eval("isInNetEx('10.1.2.3', '10.0.0.0')") == "false");     // no length
  CHECK(js.eval("isInNetEx('10.1.2.3', '10.0.0.0/33')") == "false");  // too long
  CHECK(js.eval("isInNetEx('10.1.2.3', '10.0.0.0/x')") == "false");
  CHECK(js.eval("isInNetEx('10.1.2.3')") == "null");  // not two strings
  CHECK(isInNetEx("fd00::1:2", "fd00::/8"));
  CHECK_FALSE(isInNetEx("[fd00::1]", "fd00::/8"));
}

TEST_CASE("pac library: sortIpAddressList puts IPv6 first, each family ascending",
          "[pac][library]") {
  ExprRunner js(table());
  CHECK(js.eval("sortIpAddressList('10.2.3.9;2001:4898:28:3:201:2ff:feea:fc14;::1;"
                "127.0.0.1;::9')") ==
        "::1;::9;2001:4898:28:3:201:2ff:feea:fc14;10.2.3.9;127.0.0.1");
  CHECK(js.eval("sortIpAddressList(' 10.0.0.2 ; 10.0.0.1 ')") == "10.0.0.1;10.0.0.2");
  CHECK(js.eval("sortIpAddressList('10.0.0.1')") == "10.0.0.1");
  CHECK(js.eval("sortIpAddressList(';')") == "false");
  CHECK(js.eval("sortIpAddressList('')") == "false");
  CHECK(js.eval("sortIpAddressList('10.0.0.1;bogus')") == "false");
  CHECK(js.eval("sortIpAddressList(7)") == "null");
  CHECK(sortIpAddressList("10.0.0.1;;10.0.0.0") == "10.0.0.0;10.0.0.1");
}

TEST_CASE("pac library: alert and getClientVersion", "[pac][library]") {
  ExprRunner js(table());
  CHECK(js.eval("(alert('hello ' + 42), 'x')") == "x");
  CHECK(js.eval("(alert(), 'y')") == "y");
  REQUIRE(js.alerts.size() == 2);
  CHECK(js.alerts[0] == "hello 42");
  CHECK(js.alerts[1] == "undefined");
  CHECK(js.eval("getClientVersion()") == "1.0");
}

TEST_CASE("pac library: weekdayRange", "[pac][library]") {
  ScopedTimeZone tz("UTC0");
  ExprRunner js(table());  // Friday 2024-03-15 10:30 UTC
  CHECK(js.eval("weekdayRange('FRI')") == "true");
  CHECK(js.eval("weekdayRange('MON', 'FRI')") == "true");
  CHECK(js.eval("weekdayRange('MON', 'THU')") == "false");
  CHECK(js.eval("weekdayRange('SAT', 'SUN')") == "false");
  // Wrapping around the week (Chromium; pacparser 1.5.3 never wraps).
  CHECK(js.eval("weekdayRange('THU', 'MON')") == "true");
  CHECK(js.eval("weekdayRange('SAT', 'THU')") == "false");
  CHECK(js.eval("weekdayRange('FRI', 'GMT')") == "true");
  CHECK(js.eval("weekdayRange('fri')") == "false");  // names are upper case
  CHECK(js.eval("weekdayRange('XYZ')") == "false");
  CHECK(js.eval("weekdayRange()") == "false");
  // A PAC file's own globals do not disturb the library.
  CHECK(js.eval("(function(){ wdays = {}; months = {}; return weekdayRange('FRI'); })()") ==
        "true");
}

TEST_CASE("pac library: local time and GMT differ across midnight", "[pac][library]") {
  ScopedTimeZone tz("JST-9");  // UTC+9, no daylight saving
  ExprRunner js(table());
  js.setNow(1710640800000.0);  // Sun 2024-03-17 02:00 UTC = Sun 11:00 in Tokyo
  CHECK(js.eval("timeRange(11)") == "true");
  CHECK(js.eval("timeRange(2, 'GMT')") == "true");
  js.setNow(1710629400000.0);  // Sat 2024-03-16 22:50 UTC = Sun 07:50 in Tokyo
  CHECK(js.eval("weekdayRange('SUN')") == "true");
  CHECK(js.eval("weekdayRange('SAT', 'GMT')") == "true");
  CHECK(js.eval("dateRange(17)") == "true");
  CHECK(js.eval("dateRange(16, 'GMT')") == "true");
}

TEST_CASE("pac library: dateRange forms", "[pac][library]") {
  ScopedTimeZone tz("UTC0");
  ExprRunner js(table());  // 2024-03-15
  CHECK(js.eval("dateRange(15)") == "true");
  CHECK(js.eval("dateRange(16)") == "false");
  CHECK(js.eval("dateRange('MAR')") == "true");
  CHECK(js.eval("dateRange(2024)") == "true");
  CHECK(js.eval("dateRange(1, 15)") == "true");
  CHECK(js.eval("dateRange(16, 31)") == "false");
  CHECK(js.eval("dateRange(20, 14)") == "false");
  CHECK(js.eval("dateRange(20, 15)") == "true");  // wraps around the month
  CHECK(js.eval("dateRange('JAN', 'MAR')") == "true");
  CHECK(js.eval("dateRange('APR', 'DEC')") == "false");
  CHECK(js.eval("dateRange('NOV', 'MAR')") == "true");  // wraps around the year
  CHECK(js.eval("dateRange(2020, 2023)") == "false");
  CHECK(js.eval("dateRange(1, 'MAR', 15, 'MAR')") == "true");
  CHECK(js.eval("dateRange(16, 'MAR', 1, 'APR')") == "false");
  CHECK(js.eval("dateRange('FEB', 2024, 'APR', 2024)") == "true");
  CHECK(js.eval("dateRange('APR', 2024, 'FEB', 2025)") == "false");
  CHECK(js.eval("dateRange(15, 'MAR', 2024, 15, 'MAR', 2024)") == "true");
  CHECK(js.eval("dateRange(1, 'JAN', 2025, 31, 'DEC', 2025)") == "false");
  CHECK(js.eval("dateRange('MAR', 'GMT')") == "true");
  CHECK(js.eval("dateRange('XYZ')") == "false");
  CHECK(js.eval("dateRange(1, 'MAR', 31)") == "false");  // odd forms are not ranges
  CHECK(js.eval("dateRange()") == "false");
  // The definition, not Mozilla's date arithmetic: it makes the end of
  // dateRange("JAN", "FEB") by setting February on December 31st, which is
  // March 2nd in 2024, and ends dateRange("MAR", "JUN") on "June 31st",
  // July 1st (pacparser 1.5.3, which has that code, answers true on both).
  js.setNow(1709380800000.0);  // 2024-03-02 12:00 UTC
  CHECK(js.eval("dateRange('JAN', 'FEB')") == "false");
  js.setNow(1719835200000.0);  // 2024-07-01 12:00 UTC
  CHECK(js.eval("dateRange('MAR', 'JUN')") == "false");
}

TEST_CASE("pac library: timeRange forms", "[pac][library]") {
  ScopedTimeZone tz("UTC0");
  ExprRunner js(table());  // 10:30:00
  CHECK(js.eval("timeRange(10)") == "true");
  CHECK(js.eval("timeRange(11)") == "false");
  CHECK(js.eval("timeRange(9, 17)") == "true");
  CHECK(js.eval("timeRange(11, 17)") == "false");
  CHECK(js.eval("timeRange(9, 10)") == "true");  // through 10:59
  // Two hours never wrap, in any browser.
  CHECK(js.eval("timeRange(22, 11)") == "false");
  CHECK(js.eval("timeRange(10, 30, 11, 0)") == "true");
  CHECK(js.eval("timeRange(10, 31, 11, 0)") == "false");
  CHECK(js.eval("timeRange(9, 0, 10, 30)") == "true");  // through 10:30:59
  CHECK(js.eval("timeRange(22, 0, 11, 0)") == "true");  // minutes wrap around midnight
  CHECK(js.eval("timeRange(10, 29, 59, 10, 30, 0)") == "true");
  CHECK(js.eval("timeRange(10, 30, 1, 10, 31, 0)") == "false");
  CHECK(js.eval("timeRange(10, 'GMT')") == "true");
  CHECK(js.eval("timeRange('10')") == "true");
  CHECK(js.eval("timeRange()") == "false");
  CHECK(js.eval("timeRange(1, 2, 3)").starts_with("ERROR exception: Error: timeRange: bad number"));
}

TEST_CASE("pac library: Date reads the heap's clock", "[pac][library]") {
  ExprRunner js(table());
  CHECK(js.eval("Date.now()") == "1710498600000");
  CHECK(js.eval("new Date().toISOString()") == "2024-03-15T10:30:00.000Z");
}
