// Feeds arbitrary bytes to the app-facing request parser the way a
// connection does: split at an input-chosen point, with every event handled,
// including the body and pipelined requests. Nothing may crash or hang.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gateway/http1/parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace h2gate;
  if (size == 0) return 0;
  const size_t split = data[0] % 64 + 1;
  const char* in = reinterpret_cast<const char*>(data + 1);
  size_t len = size - 1;
  http1::Parser parser(http1::Parser::Kind::Request, http1::Limits{4096, 20});
  std::string body;
  size_t off = 0;
  int steps = 0;
  while (off < len && steps++ < 100000) {
    const size_t n = std::min(split, len - off);
    size_t used = 0;
    const http1::Event ev = parser.feed(in + off, n, &used, &body);
    off += used;
    if (ev == http1::Event::Error) break;
    if (ev == http1::Event::HeadComplete) {
      RequestHead& r = parser.request();
      (void)http1::parseTarget(r);
      if (r.method == "CONNECT") break;  // the rest would be tunnel bytes
    }
    if (body.size() > 1 << 20) body.clear();
  }
  return 0;
}
