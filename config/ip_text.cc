#include "config/ip_text.h"

namespace h2gate::config {
namespace {

bool strictIpv4(std::string_view t) {
  int parts = 0;
  size_t i = 0;
  while (true) {
    const size_t start = i;
    unsigned v = 0;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9' && i - start < 3) v = v * 10 + (t[i++] - '0');
    const size_t len = i - start;
    if (len == 0 || v > 255 || (len > 1 && t[start] == '0')) return false;
    ++parts;
    if (i == t.size()) return parts == 4;
    if (t[i] != '.' || parts == 4) return false;
    ++i;
  }
}

bool hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

}  // namespace

bool ipTextIsStrict(std::string_view text) {
  if (text.find(':') == std::string_view::npos) return strictIpv4(text);
  std::string_view groups = text;
  const size_t last_colon = text.rfind(':');
  if (text.find('.') != std::string_view::npos) {
    if (!strictIpv4(text.substr(last_colon + 1))) return false;
    groups = text.substr(0, last_colon + 1);
  }
  size_t run = 0;
  for (char c : groups) {
    if (c == ':') {
      run = 0;
    } else if (!hex(c) || ++run > 4) {
      return false;
    }
  }
  return true;
}

}  // namespace h2gate::config
