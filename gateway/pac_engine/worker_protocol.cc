#include "gateway/pac_engine/worker_protocol.h"

#include <algorithm>
#include <cstring>

namespace h2gate::pac::wire {
namespace {

// Error messages and names a worker sends are cut to this.
constexpr std::size_t kMaxMessage = 4096;
constexpr std::size_t kMaxAddresses = 256;

class Writer {
 public:
  explicit Writer(Type type) {
    buf_.resize(4);
    u8(static_cast<uint8_t>(type));
  }
  void u8(uint8_t v) { buf_ += static_cast<char>(v); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) buf_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) buf_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void f64(double v) {
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    u64(bits);
  }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    buf_.append(s);
  }
  std::string frame() && {
    const auto len = static_cast<uint32_t>(buf_.size() - 4);
    for (int i = 0; i < 4; ++i) buf_[i] = static_cast<char>((len >> (8 * i)) & 0xff);
    return std::move(buf_);
  }

 private:
  std::string buf_;
};

class Reader {
 public:
  explicit Reader(std::string_view p) : p_(p) {}
  uint8_t u8() {
    if (!need(1)) return 0;
    return static_cast<uint8_t>(p_[pos_++]);
  }
  uint32_t u32() {
    if (!need(4)) return 0;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t(static_cast<uint8_t>(p_[pos_++])) << (8 * i);
    return v;
  }
  uint64_t u64() {
    if (!need(8)) return 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(static_cast<uint8_t>(p_[pos_++])) << (8 * i);
    return v;
  }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  double f64() {
    const uint64_t bits = u64();
    double v = 0;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  std::string str(std::size_t max) {
    const uint32_t n = u32();
    if (!ok_ || n > max || !need(n)) {
      ok_ = false;
      return {};
    }
    std::string s(p_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  bool boolean() {
    const uint8_t v = u8();
    if (v > 1) ok_ = false;
    return v == 1;
  }
  PacError error() {
    PacError e;
    const uint8_t kind = u8();
    if (kind > static_cast<uint8_t>(PacError::Kind::Shutdown)) ok_ = false;
    e.kind = static_cast<PacError::Kind>(kind);
    e.message = str(kMaxMessage);
    return e;
  }
  // Everything read, nothing left over.
  bool done() const { return ok_ && pos_ == p_.size(); }

 private:
  bool need(std::size_t n) {
    if (!ok_ || p_.size() - pos_ < n) {
      ok_ = false;
      return false;
    }
    return true;
  }
  std::string_view p_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

void putError(Writer& w, const PacError& e) {
  w.u8(static_cast<uint8_t>(e.kind));
  w.str(std::string_view(e.message).substr(0, kMaxMessage));
}

}  // namespace

std::string encode(const Hello& m) {
  Writer w(Type::Hello);
  w.u32(m.version);
  return std::move(w).frame();
}
std::string encode(const Setup& m) {
  Writer w(Type::Setup);
  w.u64(m.heap_limit);
  w.i64(m.dns_timeout_us);
  w.u8(m.own_clock ? 1 : 0);
  return std::move(w).frame();
}
std::string encode(const Load& m) {
  Writer w(Type::Load);
  w.i64(m.timeout_us);
  w.str(m.name);
  w.str(m.text);
  return std::move(w).frame();
}
std::string encode(const Loaded& m) {
  Writer w(Type::Loaded);
  putError(w, m.error);
  w.u32(m.lookups_refused);
  return std::move(w).frame();
}
std::string encode(const Eval& m) {
  Writer w(Type::Eval);
  w.i64(m.timeout_us);
  w.str(m.url);
  w.str(m.host);
  return std::move(w).frame();
}
std::string encode(const Answer& m) {
  Writer w(Type::Answer);
  putError(w, m.answer.error);
  w.str(m.answer.text);
  w.u32(m.answer.lookups_refused);
  return std::move(w).frame();
}
std::string encode(const Resolve& m) {
  Writer w(Type::Resolve);
  w.u8(m.v4_only ? 1 : 0);
  w.i64(m.timeout_us);
  w.str(m.host);
  return std::move(w).frame();
}
std::string encode(const Local& m) {
  Writer w(Type::Local);
  w.i64(m.timeout_us);
  return std::move(w).frame();
}
std::string encode(const Addresses& m) {
  Writer w(Type::Addresses);
  const std::size_t n = std::min(m.addresses.size(), kMaxAddresses);
  w.u32(static_cast<uint32_t>(n));
  for (std::size_t i = 0; i < n; ++i) {
    const net::IpAddress& ip = m.addresses[i];
    w.u8(ip.v6 ? 1 : 0);
    for (uint8_t b : ip.bytes) w.u8(b);
  }
  return std::move(w).frame();
}
std::string encode(const Alert& m) {
  Writer w(Type::Alert);
  w.str(std::string_view(m.text).substr(0, kMaxAlert));
  return std::move(w).frame();
}
std::string encode(const Now&) {
  return Writer(Type::Now).frame();
}
std::string encode(const Time& m) {
  Writer w(Type::Time);
  w.f64(m.ms);
  return std::move(w).frame();
}

bool decode(std::string_view payload, Hello& m) {
  Reader r(payload);
  m.version = r.u32();
  return r.done();
}
bool decode(std::string_view payload, Setup& m) {
  Reader r(payload);
  m.heap_limit = r.u64();
  m.dns_timeout_us = r.i64();
  m.own_clock = r.boolean();
  return r.done();
}
bool decode(std::string_view payload, Load& m) {
  Reader r(payload);
  m.timeout_us = r.i64();
  m.name = r.str(kMaxMessage);
  m.text = r.str(kMaxToWorker);
  return r.done();
}
bool decode(std::string_view payload, Loaded& m) {
  Reader r(payload);
  m.error = r.error();
  m.lookups_refused = r.u32();
  return r.done();
}
bool decode(std::string_view payload, Eval& m) {
  Reader r(payload);
  m.timeout_us = r.i64();
  m.url = r.str(kMaxToWorker);
  m.host = r.str(kMaxToWorker);
  return r.done();
}
bool decode(std::string_view payload, Answer& m) {
  Reader r(payload);
  m.answer.error = r.error();
  m.answer.text = r.str(kMaxAnswer);
  m.answer.lookups_refused = r.u32();
  return r.done();
}
bool decode(std::string_view payload, Resolve& m) {
  Reader r(payload);
  m.v4_only = r.boolean();
  m.timeout_us = r.i64();
  m.host = r.str(1024);
  return r.done();
}
bool decode(std::string_view payload, Local& m) {
  Reader r(payload);
  m.timeout_us = r.i64();
  return r.done();
}
bool decode(std::string_view payload, Addresses& m) {
  Reader r(payload);
  const uint32_t n = r.u32();
  if (n > kMaxAddresses) return false;
  m.addresses.clear();
  for (uint32_t i = 0; i < n; ++i) {
    net::IpAddress ip;
    ip.v6 = r.boolean();
    for (uint8_t& b : ip.bytes) b = r.u8();
    m.addresses.push_back(ip);
  }
  return r.done();
}
bool decode(std::string_view payload, Alert& m) {
  Reader r(payload);
  m.text = r.str(kMaxAlert);
  return r.done();
}
bool decode(std::string_view payload, Now&) {
  return payload.empty();
}
bool decode(std::string_view payload, Time& m) {
  Reader r(payload);
  m.ms = r.f64();
  return r.done();
}

void FrameReader::reserve(std::size_t more) {
  if (start_ > 0 && (start_ == end_ || capacity_ - end_ < more)) {
    // Move what is left of the stream to the front.
    std::memmove(buf_.get(), buf_.get() + start_, end_ - start_);
    end_ -= start_;
    start_ = 0;
  }
  if (capacity_ - end_ >= more) return;
  const std::size_t want = std::max(end_ + more, std::max<std::size_t>(capacity_ * 2, 64u << 10));
  std::unique_ptr<char[]> bigger(new char[want]);
  if (end_ > 0) std::memcpy(bigger.get(), buf_.get(), end_);
  buf_ = std::move(bigger);
  capacity_ = want;
}

void FrameReader::append(std::string_view bytes) {
  reserve(bytes.size());
  if (!bytes.empty()) std::memcpy(buf_.get() + end_, bytes.data(), bytes.size());
  end_ += bytes.size();
}

FrameReader::Result FrameReader::next(const ReadFunction& read, Type& type,
                                      std::string_view& payload) {
  if (start_ == end_ && capacity_ > (1u << 20)) {
    // Nothing left of the stream, and the buffer grew for a big frame (a
    // PAC file): give it back rather than keep it for the process's life.
    buf_.reset();
    capacity_ = start_ = end_ = 0;
  }
  // At least `want` bytes of the stream from start_ on, reading as needed.
  auto fill = [&](std::size_t want) {
    while (end_ - start_ < want) {
      if (!read) return false;
      reserve(want - (end_ - start_));
      const std::size_t got = read(buf_.get() + end_, capacity_ - end_);
      if (got == 0) return false;
      end_ += got;
    }
    return true;
  };
  if (!fill(4)) return end_ == start_ ? Result::End : Result::Truncated;
  uint32_t len = 0;
  for (int i = 0; i < 4; ++i) len |= uint32_t(static_cast<uint8_t>(buf_[start_ + i])) << (8 * i);
  if (len == 0) return Result::Malformed;
  if (len > max_frame_) return Result::TooLarge;
  if (!fill(4 + std::size_t(len))) return Result::Truncated;
  type = static_cast<Type>(static_cast<uint8_t>(buf_[start_ + 4]));
  payload = std::string_view(buf_.get() + start_ + 5, len - 1);
  start_ += 4 + std::size_t(len);
  return Result::Frame;
}

}  // namespace h2gate::pac::wire
