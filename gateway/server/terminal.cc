// The line reading of gateway/server/terminal.h that terminal_posix.cc and
// terminal_win.cc share.
#include <string>

#include <openssl/crypto.h>

#include "gateway/server/terminal.h"

namespace h2gate::terminal {

bool readLine(const std::function<ByteRead(char*)>& read_byte, std::string* out) {
  constexpr std::size_t kMaxLine = 64 * 1024;
  std::string& line = *out;
  line.clear();
  line.reserve(kMaxLine + 1);
  bool failed = false;
  for (;;) {
    char c = 0;
    const ByteRead r = read_byte(&c);
    if (r != ByteRead::Byte) {
      failed = r == ByteRead::Error || line.empty();
      break;
    }
    if (c == '\n') break;
    if (line.size() == kMaxLine) {
      failed = true;
      break;
    }
    line.push_back(c);
  }
  if (failed) {
    OPENSSL_cleanse(line.data(), line.capacity());
    line.clear();
    return false;
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

}  // namespace h2gate::terminal
