// Feeds arbitrary bytes to what the evaluator reads from a PAC worker
// process (gateway/pac_engine/worker_protocol.h): a worker runs a PAC file from
// anywhere, so its channel is untrusted input. The frames are cut with the
// evaluator's bound, each decoded as the type it claims (and, to reach
// every decoder, as every other type too). Nothing may crash or read past
// the frame; what decodes must encode back to a frame that decodes to the
// same values.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gateway/pac_engine/worker_protocol.h"

namespace {

using namespace h2gate::pac;
using namespace h2gate::pac::wire;

// The payload of a whole frame made by encode().
std::string_view payloadOf(const std::string& frame) {
  return std::string_view(frame).substr(5);
}

template <typename M, typename Same>
void roundTrip(std::string_view payload, Same same) {
  M m;
  if (!decode(payload, m)) return;
  const std::string frame = encode(m);
  M again;
  if (!decode(payloadOf(frame), again) || !same(m, again)) std::abort();
}

void decodeAll(std::string_view p) {
  roundTrip<Hello>(p, [](const Hello& a, const Hello& b) { return a.version == b.version; });
  roundTrip<Loaded>(p, [](const Loaded& a, const Loaded& b) {
    return a.error.kind == b.error.kind && a.error.message == b.error.message &&
           a.lookups_refused == b.lookups_refused;
  });
  roundTrip<Answer>(p, [](const Answer& a, const Answer& b) {
    return a.answer.text == b.answer.text && a.answer.error.kind == b.answer.error.kind &&
           a.answer.error.message == b.answer.error.message &&
           a.answer.lookups_refused == b.answer.lookups_refused;
  });
  roundTrip<Resolve>(p, [](const Resolve& a, const Resolve& b) {
    return a.v4_only == b.v4_only && a.timeout_us == b.timeout_us && a.host == b.host;
  });
  roundTrip<Local>(p, [](const Local& a, const Local& b) { return a.timeout_us == b.timeout_us; });
  roundTrip<Alert>(p, [](const Alert& a, const Alert& b) { return a.text == b.text; });
  roundTrip<Now>(p, [](const Now&, const Now&) { return true; });
  roundTrip<Addresses>(
      p, [](const Addresses& a, const Addresses& b) { return a.addresses == b.addresses; });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FrameReader reader(kMaxFromWorker);
  reader.append(std::string_view(reinterpret_cast<const char*>(data), size));
  Type type{};
  std::string_view payload;
  for (int frames = 0; frames < 64; ++frames) {
    const FrameReader::Result r = reader.next({}, type, payload);
    if (r != FrameReader::Result::Frame) break;
    if (payload.size() > kMaxFromWorker) std::abort();
    decodeAll(payload);
  }
  return 0;
}
