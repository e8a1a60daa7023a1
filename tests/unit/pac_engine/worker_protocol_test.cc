// The PAC worker's wire protocol (gateway/pac_engine/worker_protocol.h): what
// the evaluator and a worker process say to each other. Every message survives
// a round trip through encode, FrameReader and decode; a worker that sends a
// cut, oversized or garbled frame is refused (the evaluator then ends it)
// rather than misread.
#include "gateway/pac_engine/worker_protocol.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <limits>

using namespace h2gate;
using namespace h2gate::pac;
using namespace h2gate::pac::wire;
using namespace std::literals;

namespace {

// One whole frame through a FrameReader fed at once: its type and payload.
struct Cut {
  FrameReader::Result result;
  Type type = Type::Hello;
  std::string payload;
};
Cut cut(std::string_view bytes, std::size_t max_frame = kMaxFromWorker) {
  FrameReader reader(max_frame);
  reader.append(bytes);
  Cut c;
  std::string_view payload;
  c.result = reader.next(nullptr, c.type, payload);
  c.payload = std::string(payload);
  return c;
}

// encode -> FrameReader -> decode, checking the frame's type on the way.
template <class M>
M roundTrip(const M& in, Type expected) {
  const Cut c = cut(encode(in), kMaxToWorker);
  REQUIRE(c.result == FrameReader::Result::Frame);
  CHECK(c.type == expected);
  M out;
  REQUIRE(decode(c.payload, out));
  return out;
}

std::string le32(uint32_t v) {
  std::string s;
  for (int i = 0; i < 4; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

net::IpAddress v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  net::IpAddress ip;
  ip.bytes[0] = a;
  ip.bytes[1] = b;
  ip.bytes[2] = c;
  ip.bytes[3] = d;
  return ip;
}

}  // namespace

TEST_CASE("pac worker protocol: every message survives a round trip", "[pac][worker_protocol]") {
  CHECK(roundTrip(Hello{}, Type::Hello).version == kProtocolVersion);

  const Setup setup = roundTrip(Setup{512u << 20, -5, true}, Type::Setup);
  CHECK(setup.heap_limit == (512u << 20));
  CHECK(setup.dns_timeout_us == -5);  // already past: negative survives
  CHECK(setup.own_clock);
  CHECK_FALSE(roundTrip(Setup{1, 2, false}, Type::Setup).own_clock);

  const Load load =
      roundTrip(Load{2'000'000, "proxy.pac", "function FindProxyForURL(u,h){}"}, Type::Load);
  CHECK(load.timeout_us == 2'000'000);
  CHECK(load.name == "proxy.pac");
  CHECK(load.text == "function FindProxyForURL(u,h){}");

  Loaded loaded_in;
  loaded_in.error = {PacError::Kind::Syntax, "SyntaxError: parse error (line 3)"};
  loaded_in.lookups_refused = 7;
  const Loaded loaded = roundTrip(loaded_in, Type::Loaded);
  CHECK(loaded.error.kind == PacError::Kind::Syntax);
  CHECK(loaded.error.message == "SyntaxError: parse error (line 3)");
  CHECK(loaded.lookups_refused == 7);

  const Eval eval = roundTrip(Eval{-1, "https://example.com/a?b", "example.com"}, Type::Eval);
  CHECK(eval.timeout_us == -1);
  CHECK(eval.url == "https://example.com/a?b");
  CHECK(eval.host == "example.com");

  Answer answer_in;
  answer_in.answer.text = "PROXY a:1; DIRECT";
  answer_in.answer.lookups_refused = 2;
  const Answer answer = roundTrip(answer_in, Type::Answer);
  CHECK(answer.answer.text == "PROXY a:1; DIRECT");
  CHECK(answer.answer.error.ok());
  CHECK(answer.answer.lookups_refused == 2);

  const Resolve resolve = roundTrip(Resolve{true, 300, "wpad.corp"}, Type::Resolve);
  CHECK(resolve.v4_only);
  CHECK(resolve.timeout_us == 300);
  CHECK(resolve.host == "wpad.corp");

  CHECK(roundTrip(Local{42}, Type::Local).timeout_us == 42);

  Addresses addresses_in;
  addresses_in.addresses.push_back(v4(192, 0, 2, 1));
  net::IpAddress six;
  six.v6 = true;
  six.bytes = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  addresses_in.addresses.push_back(six);
  const Addresses addresses = roundTrip(addresses_in, Type::Addresses);
  REQUIRE(addresses.addresses.size() == 2);
  CHECK(addresses.addresses[0].str() == "192.0.2.1");
  CHECK(addresses.addresses[1].str() == "2001:db8::1");
  CHECK(roundTrip(Addresses{}, Type::Addresses).addresses.empty());

  CHECK(roundTrip(Alert{"hello from the script"}, Type::Alert).text == "hello from the script");
  roundTrip(Now{}, Type::Now);
  CHECK(roundTrip(Time{1.7e12 + 0.25}, Type::Time).ms == 1.7e12 + 0.25);
}

TEST_CASE("pac worker protocol: what is too long is cut at encode, not refused",
          "[pac][worker_protocol]") {
  // alert() text past kMaxAlert: the worker cuts it, the evaluator accepts it.
  const Alert alert = roundTrip(Alert{std::string(kMaxAlert + 100, 'a')}, Type::Alert);
  CHECK(alert.text.size() == kMaxAlert);
  // An error message past 4096 bytes (an exception's huge message).
  Loaded loaded_in;
  loaded_in.error = {PacError::Kind::Exception, std::string(10000, 'e')};
  CHECK(roundTrip(loaded_in, Type::Loaded).error.message.size() == 4096);
  // More than 256 addresses for one name: the first 256.
  Addresses many;
  for (int i = 0; i < 300; ++i) many.addresses.push_back(v4(10, 0, uint8_t(i >> 8), uint8_t(i)));
  const Addresses got = roundTrip(many, Type::Addresses);
  REQUIRE(got.addresses.size() == 256);
  CHECK(got.addresses[255].str() == "10.0.0.255");
}

TEST_CASE("pac worker protocol: frames cut from a stream in any pieces", "[pac][worker_protocol]") {
  const std::string stream =
      encode(Hello{}) + encode(Alert{"one"}) + encode(Now{}) + encode(Time{12.5});
  // Served one byte per read: every frame still arrives whole.
  std::size_t pos = 0;
  const FrameReader::ReadFunction oneByte = [&](void* out, std::size_t size) -> std::size_t {
    if (pos == stream.size() || size == 0) return 0;
    std::memcpy(out, stream.data() + pos++, 1);
    return 1;
  };
  FrameReader reader(kMaxFromWorker);
  Type type{};
  std::string_view payload;
  REQUIRE(reader.next(oneByte, type, payload) == FrameReader::Result::Frame);
  CHECK(type == Type::Hello);
  REQUIRE(reader.next(oneByte, type, payload) == FrameReader::Result::Frame);
  CHECK(type == Type::Alert);
  Alert alert;
  REQUIRE(decode(payload, alert));
  CHECK(alert.text == "one");
  REQUIRE(reader.next(oneByte, type, payload) == FrameReader::Result::Frame);
  CHECK(type == Type::Now);
  CHECK(payload.empty());
  REQUIRE(reader.next(oneByte, type, payload) == FrameReader::Result::Frame);
  CHECK(type == Type::Time);
  Time time;
  REQUIRE(decode(payload, time));
  CHECK(time.ms == 12.5);
  // The stream ends between frames: End, not Truncated.
  CHECK(reader.next(oneByte, type, payload) == FrameReader::Result::End);
}

TEST_CASE("pac worker protocol: a worker dying mid-frame is Truncated", "[pac][worker_protocol]") {
  const std::string frame = encode(Alert{"the script said something"});
  for (std::size_t n :
       {std::size_t(1), std::size_t(3), std::size_t(4), std::size_t(5), frame.size() - 1}) {
    INFO("the first " << n << " bytes of " << frame.size());
    CHECK(cut(frame.substr(0, n)).result == FrameReader::Result::Truncated);
  }
  CHECK(cut("").result == FrameReader::Result::End);
}

TEST_CASE("pac worker protocol: an oversized or empty frame is refused before it is read",
          "[pac][worker_protocol]") {
  // A length past the bound: refused from the header alone, without waiting
  // for (or buffering) the gigabyte it announces.
  bool read_called = false;
  FrameReader reader(kMaxFromWorker);
  reader.append(le32(uint32_t(kMaxFromWorker + 1)) + "\x06");
  Type type{};
  std::string_view payload;
  CHECK(reader.next(
            [&](void*, std::size_t) -> std::size_t {
              read_called = true;
              return 0;
            },
            type, payload) == FrameReader::Result::TooLarge);
  CHECK_FALSE(read_called);
  CHECK(cut(le32(std::numeric_limits<uint32_t>::max())).result == FrameReader::Result::TooLarge);
  // Exactly the bound is a frame.
  const std::string at_bound = le32(16) + std::string(16, '\x0a');
  CHECK(cut(at_bound, 16).result == FrameReader::Result::Frame);
  CHECK(cut(at_bound, 15).result == FrameReader::Result::TooLarge);
  // A length of 0 has no room for its type.
  CHECK(cut(le32(0)).result == FrameReader::Result::Malformed);
}

TEST_CASE("pac worker protocol: garbage payloads are refused field by field",
          "[pac][worker_protocol]") {
  Hello hello;
  CHECK_FALSE(decode("", hello));
  CHECK_FALSE(decode("\x01\x00\x00"sv, hello));  // short
  CHECK(decode("\x01\x00\x00\x00"sv, hello));
  CHECK(hello.version == 1);
  CHECK_FALSE(decode("\x01\x00\x00\x00\x00"sv, hello));  // one byte left over

  // A boolean other than 0 or 1.
  Setup setup;
  std::string p = std::string(16, '\0') + "\x02";
  CHECK_FALSE(decode(p, setup));
  p.back() = '\x01';
  CHECK(decode(p, setup));

  // An error kind past the last one.
  Loaded loaded;
  CHECK(decode(std::string("\x0b") + le32(0) + le32(0), loaded));  // Shutdown: the last
  CHECK(loaded.error.kind == PacError::Kind::Shutdown);
  CHECK_FALSE(decode(std::string("\x0c") + le32(0) + le32(0), loaded));

  // A string whose length points past the payload.
  Alert alert;
  CHECK_FALSE(decode(le32(10) + "short", alert));
  CHECK_FALSE(decode(le32(0xffffffff) + "x", alert));
  // A string longer than its field allows, even when the bytes are all there.
  CHECK_FALSE(decode(le32(kMaxAlert + 1) + std::string(kMaxAlert + 1, 'a'), alert));
  Answer answer;
  CHECK_FALSE(decode(std::string("\x00", 1) + le32(0) + le32(kMaxAnswer + 1) +
                         std::string(kMaxAnswer + 1, 'x') + le32(0),
                     answer));
  Resolve resolve;
  CHECK_FALSE(
      decode(std::string("\x00", 1) + std::string(8, '\0') + le32(1025) + std::string(1025, 'h'),
             resolve));
  CHECK(decode(std::string("\x00", 1) + std::string(8, '\0') + le32(1024) + std::string(1024, 'h'),
               resolve));

  // More addresses than a lookup may return, or fewer than announced.
  Addresses addresses;
  CHECK_FALSE(decode(le32(257) + std::string(257 * 17, '\0'), addresses));
  CHECK_FALSE(decode(le32(2) + std::string(17, '\0'), addresses));
  CHECK(decode(le32(1) + std::string(17, '\0'), addresses));

  // Now carries nothing.
  Now now;
  CHECK_FALSE(decode("x", now));

  // Each message refuses the payload of another (same type byte aside).
  Local local;
  CHECK_FALSE(decode(cut(encode(Alert{"x"})).payload, local));
  Time time;
  CHECK_FALSE(decode(cut(encode(Local{1})).payload + "x", time));
}

TEST_CASE("pac worker protocol: a big frame's buffer is given back once read",
          "[pac][worker_protocol]") {
  // A 2 MB PAC file, then a small frame: both arrive, the second intact
  // after the buffer was released and regrown.
  const std::string big_text(2u << 20, 'x');
  FrameReader reader(kMaxToWorker);
  reader.append(encode(Load{1, "big.pac", big_text}));
  Type type{};
  std::string_view payload;
  REQUIRE(reader.next(nullptr, type, payload) == FrameReader::Result::Frame);
  Load load;
  REQUIRE(decode(payload, load));
  CHECK(load.text == big_text);
  // Nothing left: the 2 MB buffer is released here, then grows again.
  CHECK(reader.next(nullptr, type, payload) == FrameReader::Result::End);
  reader.append(encode(Eval{5, "http://a/", "a"}));
  REQUIRE(reader.next(nullptr, type, payload) == FrameReader::Result::Frame);
  Eval eval;
  REQUIRE(decode(payload, eval));
  CHECK(eval.url == "http://a/");
  CHECK(reader.next(nullptr, type, payload) == FrameReader::Result::End);
}
