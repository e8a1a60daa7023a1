// What the evaluator and a PAC worker process (gateway/pac_engine/worker.h) say to
// each other over the worker's standard input and output.
//
// Frames, both ways: [u32 length][u8 type][payload of length - 1 bytes],
// integers little-endian, a string as [u32 length][bytes], a double as the
// u64 of its bits. Times are durations in microseconds from when the frame
// is written (the two processes need not share a clock), negative when
// already past.
//
//   worker  -> evaluator  Hello      once, first: kProtocolVersion
//   evaluator -> worker   Setup      once, after Hello: heap limit, DNS timeout, clock
//   evaluator -> worker   Load       compile and run a PAC file       -> Loaded
//   evaluator -> worker   Eval       FindProxyForURL(url, host)       -> Answer
//   worker  -> evaluator  Resolve    a DNS question of the script     <- Addresses
//   worker  -> evaluator  Local      myIpAddress()                    <- Addresses
//   worker  -> evaluator  Now        Date, when the evaluator's clock is not the system's <- Time
//   worker  -> evaluator  Alert      alert(message); no answer
//
// While a Load or Eval runs, the worker may send any number of Resolve,
// Local, Now and Alert frames, each answered before it goes on; the run
// ends with its Loaded or Answer. The evaluator trusts nothing a worker
// sends (it runs a PAC file from anywhere): every frame is bounded
// (kMaxFromWorker) and checked field by field; anything else ends the
// worker.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/net/ip_address.h"
#include "gateway/pac_engine/pac_context.h"
#include "gateway/pac_engine/pac_error.h"

namespace h2gate::pac::wire {

inline constexpr uint32_t kProtocolVersion = 1;
// The largest frame a worker may send: an answer (kMaxAnswer) and an error
// message with room to spare.
inline constexpr std::size_t kMaxFromWorker = 1u << 20;
// The largest the evaluator sends: a PAC file (its source's max_size is at
// most this) and its name.
inline constexpr std::size_t kMaxToWorker = (1u << 30) + 4096;
// alert() text beyond this is cut.
inline constexpr std::size_t kMaxAlert = 16 * 1024;

enum class Type : uint8_t {
  Hello = 1,
  Setup = 2,
  Load = 3,
  Loaded = 4,
  Eval = 5,
  Answer = 6,
  Resolve = 7,
  Local = 8,
  Addresses = 9,
  Alert = 10,
  Now = 11,
  Time = 12,
};

struct Hello {
  static constexpr Type kType = Type::Hello;
  uint32_t version = kProtocolVersion;
};
struct Setup {
  static constexpr Type kType = Type::Setup;
  uint64_t heap_limit = 0;
  int64_t dns_timeout_us = 0;
  bool own_clock = false;  // true: ask for the time (Now) instead of reading the system clock
};
struct Load {
  static constexpr Type kType = Type::Load;
  int64_t timeout_us = 0;
  std::string name;
  std::string text;
};
struct Loaded {
  static constexpr Type kType = Type::Loaded;
  PacError error;
  uint32_t lookups_refused = 0;
};
struct Eval {
  static constexpr Type kType = Type::Eval;
  int64_t timeout_us = 0;
  std::string url;
  std::string host;
};
struct Answer {
  static constexpr Type kType = Type::Answer;
  RawAnswer answer;
};
struct Resolve {
  static constexpr Type kType = Type::Resolve;
  bool v4_only = false;
  int64_t timeout_us = 0;
  std::string host;
};
struct Local {
  static constexpr Type kType = Type::Local;
  int64_t timeout_us = 0;
};
struct Addresses {
  static constexpr Type kType = Type::Addresses;
  std::vector<net::IpAddress> addresses;
};
struct Alert {
  static constexpr Type kType = Type::Alert;
  std::string text;
};
struct Now {
  static constexpr Type kType = Type::Now;
};
struct Time {
  static constexpr Type kType = Type::Time;
  double ms = 0;
};

// The messages, for encode() and decode().
// clang-format off
#define H2GATE_PAC_WIRE_MESSAGES(X) \
  X(Hello) X(Setup) X(Load) X(Loaded) X(Eval) X(Answer) \
  X(Resolve) X(Local) X(Addresses) X(Alert) X(Now) X(Time)
// clang-format on

// A whole frame, header included; M is one of the messages above.
template <class M>
std::string encode(const M& m);
// A payload (without the header) into its message: false when it is not
// exactly one well-formed message of that type.
template <class M>
bool decode(std::string_view payload, M& m);

// Cuts a byte stream into frames.
class FrameReader {
 public:
  // Reads more bytes into `out` (at most `size`); 0 at the end of the stream.
  using ReadFunction = std::function<std::size_t(void* out, std::size_t size)>;

  explicit FrameReader(std::size_t max_frame) : max_frame_(max_frame) {}
  enum class Result { Frame, End, Truncated, TooLarge, Malformed };
  // The next frame's type and payload (valid until the next call), reading
  // as needed. End: the stream ended between frames, Truncated: inside one;
  // Malformed: a frame of length 0.
  Result next(const ReadFunction& read, Type& type, std::string_view& payload);
  // For tests and the fuzz target: feeds bytes without a stream.
  void append(std::string_view bytes);

 private:
  // Room for `more` bytes after end_ (grown, never shrunk; not zeroed).
  void reserve(std::size_t more);

  std::size_t max_frame_;
  std::unique_ptr<char[]> buf_;
  std::size_t capacity_ = 0;
  std::size_t start_ = 0;  // the next frame
  std::size_t end_ = 0;    // the bytes read so far
};

}  // namespace h2gate::pac::wire
