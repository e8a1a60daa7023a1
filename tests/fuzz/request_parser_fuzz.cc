// Feeds arbitrary bytes to the app-facing request parser the way a
// connection does: split at an input-chosen point, with every event handled,
// including the body and pipelined requests. Nothing may crash or hang.
// A parsed target must also hold what the policy filters rely on: its host
// is in canonical form (canonicalising it again changes nothing), an IP
// literal parses as an address, never the unspecified one, and the origin
// request built from it carries exactly one Host.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gateway/http1/codec.h"
#include "gateway/http1/parser.h"
#include "gateway/match/matcher.h"
#include "gateway/net/host_name.h"

namespace {

void checkTarget(const h2gate::RequestHead& r) {
  using namespace h2gate;
  const bool v6 = r.host.find(':') != std::string::npos;
  std::string error;
  const std::optional<std::string> again = net::canonicalRequestHost(r.host, v6, &error);
  if (!again || *again != r.host) std::abort();  // not a fixed point
  const match::Destination d(r.host, r.port, r.is_connect);
  if (v6 && !d.ip()) std::abort();
  if (d.ip() && (d.ip()->unspecified() || !(d.ip()->unmapped() == *d.ip()))) std::abort();
  if (net::endsInNumber(r.host) && !d.ip()) std::abort();
  if (!r.is_connect) {
    std::string out;
    http1::appendOriginRequest(out, r, true);
    size_t hosts = 0;
    for (size_t at = out.find("\r\n"); at != std::string::npos; at = out.find("\r\n", at + 2))
      if (out.compare(at + 2, 6, "Host: ") == 0 || out.compare(at + 2, 6, "host: ") == 0) ++hosts;
    if (hosts != 1) std::abort();
  }
}

}  // namespace

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
      if (http1::parseTarget(r).empty()) checkTarget(r);
      if (r.method == "CONNECT") break;  // the rest would be tunnel bytes
    }
    if (body.size() > 1 << 20) body.clear();
  }
  return 0;
}
