#include "gateway/base/ascii.h"

#include <string>

#include <catch2/catch.hpp>

using namespace h2gate;

namespace {

// "İstanbul" in UTF-8: 'İ' (U+0130) is 0xC4 0xB0, and Unicode lowers it to
// "i̇"; ASCII helpers must leave both bytes as they are.
const std::string kIstanbul = "\xC4\xB0stanbul";

}  // namespace

TEST_CASE("lowerAscii and upperAscii change only the 26 ASCII letters", "[ascii]") {
  for (int i = 0; i < 256; ++i) {
    const char c = static_cast<char>(i);
    const bool upper = i >= 'A' && i <= 'Z';
    const bool lower = i >= 'a' && i <= 'z';
    INFO("byte " << i);
    CHECK(lowerAscii(c) == (upper ? static_cast<char>(i + 32) : c));
    CHECK(upperAscii(c) == (lower ? static_cast<char>(i - 32) : c));
    CHECK(isAsciiAlpha(c) == (upper || lower));
    CHECK(isAsciiDigit(c) == (i >= '0' && i <= '9'));
    CHECK(isAsciiAlnum(c) == (upper || lower || (i >= '0' && i <= '9')));
    CHECK(isAsciiSpace(c) == (i == ' ' || (i >= '\t' && i <= '\r')));
  }
}

TEST_CASE("toLowerAscii and toUpperAscii leave other bytes as they are", "[ascii]") {
  CHECK(toLowerAscii("") == "");
  CHECK(toLowerAscii("Proxy-Authorization: Basic") == "proxy-authorization: basic");
  CHECK(toUpperAscii("socks5") == "SOCKS5");
  CHECK(toLowerAscii(kIstanbul) == "\xC4\xB0stanbul");
  CHECK(toUpperAscii(kIstanbul) == "\xC4\xB0STANBUL");
  CHECK(toLowerAscii("\xC3\x89T\xC3\x89") == "\xC3\x89t\xC3\x89");  // "ÉTÉ": the É stays
  CHECK(toLowerAscii(std::string("A\0B", 3)) == std::string("a\0b", 3));

  std::string s = "WWW.Example.COM";
  lowerAsciiInPlace(s);
  CHECK(s == "www.example.com");
  std::string empty;
  lowerAsciiInPlace(empty);
  CHECK(empty.empty());
}

TEST_CASE("iequals compares ASCII case-insensitively", "[ascii]") {
  CHECK(iequals("Content-Length", "content-length"));
  CHECK(iequals("", ""));
  CHECK_FALSE(iequals("Host", "Hos"));
  CHECK_FALSE(iequals("a", "b"));
  CHECK_FALSE(iequals("\xC3\xA9", "\xC3\x89"));  // é and É: no Unicode folding
  CHECK_FALSE(iequals(kIstanbul, "istanbul"));
  CHECK(iequals(kIstanbul, "\xC4\xB0STANBUL"));
  // '@' (0x40) and '`' (0x60) differ by 0x20 as letters do, but are no letters.
  CHECK_FALSE(iequals("@", "`"));
  CHECK_FALSE(iequals("[", "{"));
}

TEST_CASE("istartsWith and iendsWith", "[ascii]") {
  CHECK(istartsWith("HTTP://example.com", "http://"));
  CHECK(istartsWith("basic ", "Basic "));
  CHECK(istartsWith("anything", ""));
  CHECK(istartsWith("", ""));
  CHECK_FALSE(istartsWith("htt", "http://"));
  CHECK_FALSE(istartsWith("https://x", "http://"));
  CHECK(iendsWith("Foo.LOCALHOST", ".localhost"));
  CHECK(iendsWith("x", ""));
  CHECK_FALSE(iendsWith("localhost", ".localhost"));
  CHECK_FALSE(iendsWith("", "a"));
}

TEST_CASE("isAscii is true when every byte is below 0x80", "[ascii]") {
  CHECK(isAscii(""));
  CHECK(isAscii(std::string("\x00\x7F", 2)));
  CHECK(isAscii("example.com"));
  CHECK_FALSE(isAscii("\x80"));
  CHECK_FALSE(
      isAscii("b\xC3\xBC"
              "cher.example"));  // bücher
  CHECK_FALSE(isAscii(kIstanbul));
}

TEST_CASE("trim strips C-locale white space, trimOws only spaces and tabs", "[ascii]") {
  CHECK(trim("") == "");
  CHECK(trim(" \t\n\v\f\r") == "");
  CHECK(trim(" \tDIRECT\r\n") == "DIRECT");
  CHECK(trim("a b") == "a b");
  CHECK(trim("\xC2\xA0x\xC2\xA0") == "\xC2\xA0x\xC2\xA0");  // U+00A0 is no ASCII space
  CHECK(trim(std::string("\0x\0", 3)) == std::string("\0x\0", 3));

  CHECK(trimOws("") == "");
  CHECK(trimOws(" \t \t") == "");
  CHECK(trimOws("\t Basic abc \t") == "Basic abc");
  CHECK(trimOws("\r\nvalue\r\n") == "\r\nvalue\r\n");  // CR and LF are no OWS
  CHECK(trimOws(" \vx\f ") == "\vx\f");

  // A view into the same text, not a copy.
  const std::string_view text = "  x  ";
  CHECK(trim(text).data() == text.data() + 2);
}

TEST_CASE("isHttpTokenChar is RFC 9110's tchar; isSpaceOrTab is a field's white space", "[ascii]") {
  std::string tokens;
  for (int c = 0; c < 256; ++c)
    if (isHttpTokenChar(static_cast<char>(c))) tokens += static_cast<char>(c);
  CHECK(tokens == "!#$%&'*+-.0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ^_`abcdefghijklmnopqrstuvwxyz|~");
  std::string blanks;
  for (int c = 0; c < 256; ++c)
    if (isSpaceOrTab(static_cast<char>(c))) blanks += static_cast<char>(c);
  CHECK(blanks == "\t ");
}
