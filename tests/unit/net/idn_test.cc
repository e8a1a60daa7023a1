// Internationalised host names (gateway/net/idn.h) through their interface:
// libidn2 on POSIX (idn_posix.cc), IdnToAscii on Windows (idn_win.cc). A
// rule written with a U-label matches the A-label an app sends, and a name
// that cannot be on the wire is an error naming it.
#include "gateway/net/idn.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

using h2gate::net::idnToAscii;

namespace {

std::string ascii(const std::string& utf8) {
  std::string error;
  const auto out = idnToAscii(utf8, &error);
  INFO(error);
  REQUIRE(out);
  CHECK(error.empty());
  return *out;
}

}  // namespace

TEST_CASE("idn: U-labels to A-labels, lower-cased, ASCII names as they are", "[net][idn]") {
  CHECK(ascii("bücher.example") == "xn--bcher-kva.example");
  CHECK(ascii("BÜCHER.example") == "xn--bcher-kva.example");
  CHECK(ascii("münchen.de") == "xn--mnchen-3ya.de");
  CHECK(ascii("例え.テスト") == "xn--r8jz45g.xn--zckzah");
  CHECK(ascii("www.example.com") == "www.example.com");
#if !defined(_WIN32)
  // libidn2 is non-transitional (IDNA2008): ß stays ß, not "ss" (Windows'
  // IdnToAscii is IDNA2003 nameprep, which maps it to "ss").
  CHECK(ascii("faß.de") == "xn--fa-hia.de");
#endif
}

TEST_CASE("idn: what cannot be a host name is refused, naming the input", "[net][idn]") {
  std::vector<std::string> bad_names = {"\xff\xfe.example"};  // not UTF-8
#if !defined(_WIN32)
  // libidn2's own refusals (Windows' IDNA2003 nameprep judges otherwise).
  bad_names.push_back("a\u2028b.example");  // a line separator: disallowed
  bad_names.push_back("\u0300a.example");   // a label that starts with a combining mark
#endif
  for (const std::string& bad : bad_names) {
    std::string error;
    CHECK_FALSE(idnToAscii(bad, &error));
    CHECK_THAT(error, Catch::StartsWith("'" + bad +
                                        "' is not a valid internationalised domain "
                                        "name"));
  }
}
