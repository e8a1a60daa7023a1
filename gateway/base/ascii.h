// ASCII text helpers: case, case-insensitive comparison, white space.
//
// Protocol text (header names, schemes, host names, PAC keywords, config
// words) is ASCII, and its case rules are ASCII's. These helpers change or
// compare only the 26 letters A-Z / a-z; every other byte passes unchanged,
// including each byte >= 0x80 of UTF-8 text ("İ" stays "İ", "é" is not
// equal to "É"). They do not use <cctype>: std::tolower, std::isspace and
// std::isalnum answer by the process's C locale (a setlocale() call, in a
// library or a future main, would change what they return for bytes >= 0x80),
// and are undefined for a negative char.
#pragma once

#include <string>
#include <string_view>

namespace h2gate {

constexpr char lowerAscii(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}
constexpr char upperAscii(char c) {
  return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
}
constexpr bool isAsciiDigit(char c) {
  return c >= '0' && c <= '9';
}
constexpr bool isAsciiAlpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
constexpr bool isAsciiAlnum(char c) {
  return isAsciiAlpha(c) || isAsciiDigit(c);
}
// Space, \t, \n, \v, \f or \r: what std::isspace says in the "C" locale.
constexpr bool isAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}
// Space or tab: HTTP's white space inside a field (RFC 9110 section 5.6.3).
constexpr bool isSpaceOrTab(char c) {
  return c == ' ' || c == '\t';
}
// A character of an HTTP token (RFC 9110 section 5.6.2 tchar): a header
// name, a method, an authentication scheme.
constexpr bool isHttpTokenChar(char c) {
  return isAsciiAlnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// `s` with A-Z lowered (upper-cased: a-z raised); other bytes as they are.
std::string toLowerAscii(std::string_view s);
std::string toUpperAscii(std::string_view s);
void lowerAsciiInPlace(std::string& s);

// Equal, or beginning / ending with the other, with A-Z equal to a-z.
bool iequals(std::string_view a, std::string_view b);
bool istartsWith(std::string_view s, std::string_view prefix);
bool iendsWith(std::string_view s, std::string_view suffix);

// Every byte below 0x80.
bool isAscii(std::string_view s);

// `s` without leading and trailing isAsciiSpace white space.
std::string_view trim(std::string_view s);
// `s` without leading and trailing spaces and tabs only: HTTP's optional
// white space (OWS, RFC 9110 section 5.6.3) around a header value or list
// element; a CR or LF stays (it is no part of a field value).
std::string_view trimOws(std::string_view s);

}  // namespace h2gate
