#include "gateway/base/ascii.h"

#include <algorithm>

namespace h2gate {
namespace {

constexpr bool isOws(char c) {
  return c == ' ' || c == '\t';
}

template <typename Pred>
std::string_view trimIf(std::string_view s, Pred strip) {
  while (!s.empty() && strip(s.front())) s.remove_prefix(1);
  while (!s.empty() && strip(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string toLowerAscii(std::string_view s) {
  std::string out(s);
  lowerAsciiInPlace(out);
  return out;
}

std::string toUpperAscii(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = upperAscii(c);
  return out;
}

void lowerAsciiInPlace(std::string& s) {
  for (char& c : s) c = lowerAscii(c);
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return lowerAscii(x) == lowerAscii(y);
         });
}

bool istartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

bool iendsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && iequals(s.substr(s.size() - suffix.size()), suffix);
}

bool isAscii(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

std::string_view trim(std::string_view s) {
  return trimIf(s, isAsciiSpace);
}

std::string_view trimOws(std::string_view s) {
  return trimIf(s, isOws);
}

}  // namespace h2gate
