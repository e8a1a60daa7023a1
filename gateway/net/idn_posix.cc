#include <idn2.h>

#include "gateway/net/idn.h"

namespace h2gate::net {

std::optional<std::string> idnToAscii(const std::string& utf8, std::string* error) {
  // libidn2 maps (lower-cases, NFC) and encodes each label; a name it
  // refuses (disallowed code points, bad bidi) cannot be on the wire.
  char* ascii = nullptr;
  const int rc = idn2_to_ascii_8z(utf8.c_str(), &ascii, IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL);
  if (rc != IDN2_OK) {
    *error =
        "'" + utf8 + "' is not a valid internationalised domain name (" + idn2_strerror(rc) + ")";
    return std::nullopt;
  }
  std::string out = ascii;
  idn2_free(ascii);
  return out;
}

}  // namespace h2gate::net
