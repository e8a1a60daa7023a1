#include "filters/host_name.h"

#include <idn2.h>

#include <algorithm>

namespace h2gate::filters {
namespace {

bool isAscii(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

bool validChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

}  // namespace

std::optional<std::string> normalizeHostName(std::string_view text, std::string* error) {
  if (!text.empty() && text.back() == '.') text.remove_suffix(1);
  std::string out;
  if (isAscii(text)) {
    out.assign(text);
    std::transform(out.begin(), out.end(), out.begin(), [](char c) {
      return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    });
  } else {
    // libidn2 maps (lower-cases, NFC) and encodes each label; a name it
    // refuses (disallowed code points, bad bidi) cannot be on the wire.
    const std::string input(text);
    char* ascii = nullptr;
    const int rc = idn2_to_ascii_8z(input.c_str(), &ascii, IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL);
    if (rc != IDN2_OK) {
      *error = "'" + input + "' is not a valid internationalised domain name (" +
               idn2_strerror(rc) + ")";
      return std::nullopt;
    }
    out = ascii;
    idn2_free(ascii);
  }
  if (out.empty()) {
    *error = "empty host name";
    return std::nullopt;
  }
  if (out.size() > 253) {
    *error = "host name longer than 253 characters";
    return std::nullopt;
  }
  if (!std::all_of(out.begin(), out.end(), validChar)) {
    *error =
        "'" + std::string(text) + "' is not a host name (letters, digits, '-', '_' and '.' only)";
    return std::nullopt;
  }
  if (out.front() == '.' || out.find("..") != std::string::npos) {
    *error = "'" + std::string(text) + "' has an empty label";
    return std::nullopt;
  }
  return out;
}

}  // namespace h2gate::filters
