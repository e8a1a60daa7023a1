#include "gateway/pac_engine/worker_protocol.h"

#include <algorithm>
#include <concepts>
#include <cstring>
#include <type_traits>

namespace h2gate::pac::wire {
namespace {

// Error messages and names a worker sends are cut to this.
constexpr std::size_t kMaxMessage = 4096;
constexpr std::size_t kMaxAddresses = 256;
// A DNS name the script asks about.
constexpr std::size_t kMaxHost = 1024;

// A string field's bound: the reader refuses a longer one; the writer sends
// it as it is (Refuse), or cut to the bound (Cut).
struct Refuse {
  std::size_t max;
};
struct Cut {
  std::size_t max;
};

// Writes the fields of one frame; see fields() below.
class Writer {
 public:
  explicit Writer(Type type) {
    buf_.resize(4);
    u8(static_cast<uint8_t>(type));
  }
  void operator()(uint32_t v) { le(v, 4); }
  void operator()(uint64_t v) { le(v, 8); }
  void operator()(int64_t v) { le(static_cast<uint64_t>(v), 8); }
  void operator()(bool v) { u8(v ? 1 : 0); }
  void operator()(double v) {
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    le(bits, 8);
  }
  void operator()(const std::string& s, Refuse) { str(s); }
  void operator()(const std::string& s, Cut c) { str(std::string_view(s).substr(0, c.max)); }
  void operator()(const PacError& e) {
    u8(static_cast<uint8_t>(e.kind));
    str(std::string_view(e.message).substr(0, kMaxMessage));
  }
  void operator()(const std::vector<net::IpAddress>& addresses) {
    const std::size_t n = std::min(addresses.size(), kMaxAddresses);
    le(n, 4);
    for (std::size_t i = 0; i < n; ++i) {
      u8(addresses[i].v6 ? 1 : 0);
      for (uint8_t b : addresses[i].bytes) u8(b);
    }
  }
  std::string frame() && {
    const auto len = static_cast<uint32_t>(buf_.size() - 4);
    for (int i = 0; i < 4; ++i) buf_[i] = static_cast<char>((len >> (8 * i)) & 0xff);
    return std::move(buf_);
  }

 private:
  void u8(uint8_t v) { buf_ += static_cast<char>(v); }
  void le(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) buf_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  void str(std::string_view s) {
    le(s.size(), 4);
    buf_.append(s);
  }

  std::string buf_;
};

// Reads the fields of one payload, trusting nothing; see fields() below.
class Reader {
 public:
  explicit Reader(std::string_view p) : p_(p) {}
  void operator()(uint32_t& v) { v = static_cast<uint32_t>(le(4)); }
  void operator()(uint64_t& v) { v = le(8); }
  void operator()(int64_t& v) { v = static_cast<int64_t>(le(8)); }
  void operator()(bool& v) {
    const uint8_t b = u8();
    if (b > 1) ok_ = false;
    v = b == 1;
  }
  void operator()(double& v) {
    const uint64_t bits = le(8);
    std::memcpy(&v, &bits, sizeof v);
  }
  void operator()(std::string& s, Refuse r) { s = str(r.max); }
  void operator()(std::string& s, Cut c) { s = str(c.max); }
  void operator()(PacError& e) {
    const uint8_t kind = u8();
    if (kind > static_cast<uint8_t>(PacError::Kind::Shutdown)) ok_ = false;
    e.kind = static_cast<PacError::Kind>(kind);
    e.message = str(kMaxMessage);
  }
  void operator()(std::vector<net::IpAddress>& addresses) {
    const uint64_t n = le(4);
    addresses.clear();
    if (n > kMaxAddresses) ok_ = false;
    for (uint64_t i = 0; ok_ && i < n; ++i) {
      net::IpAddress ip;
      (*this)(ip.v6);
      for (uint8_t& b : ip.bytes) b = u8();
      addresses.push_back(ip);
    }
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
  uint8_t u8() {
    if (!need(1)) return 0;
    return static_cast<uint8_t>(p_[pos_++]);
  }
  uint64_t le(int bytes) {
    if (!need(static_cast<std::size_t>(bytes))) return 0;
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<uint8_t>(p_[pos_++])) << (8 * i);
    return v;
  }
  std::string str(std::size_t max) {
    const uint64_t n = le(4);
    if (!ok_ || n > max || !need(n)) {
      ok_ = false;
      return {};
    }
    std::string s(p_.substr(pos_, n));
    pos_ += n;
    return s;
  }

  std::string_view p_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

// Each message's fields in wire order, listed once for both directions: `io`
// is a Writer (M const) or a Reader.
template <class M, class T>
concept Is = std::same_as<std::remove_const_t<M>, T>;

template <class Io, Is<Hello> M>
void fields(Io& io, M& m) {
  io(m.version);
}
template <class Io, Is<Setup> M>
void fields(Io& io, M& m) {
  io(m.heap_limit);
  io(m.dns_timeout_us);
  io(m.own_clock);
}
template <class Io, Is<Load> M>
void fields(Io& io, M& m) {
  io(m.timeout_us);
  io(m.name, Refuse{kMaxMessage});
  io(m.text, Refuse{kMaxToWorker});
}
template <class Io, Is<Loaded> M>
void fields(Io& io, M& m) {
  io(m.error);
  io(m.lookups_refused);
}
template <class Io, Is<Eval> M>
void fields(Io& io, M& m) {
  io(m.timeout_us);
  io(m.url, Refuse{kMaxToWorker});
  io(m.host, Refuse{kMaxToWorker});
}
template <class Io, Is<Answer> M>
void fields(Io& io, M& m) {
  io(m.answer.error);
  io(m.answer.text, Refuse{kMaxAnswer});
  io(m.answer.lookups_refused);
}
template <class Io, Is<Resolve> M>
void fields(Io& io, M& m) {
  io(m.v4_only);
  io(m.timeout_us);
  io(m.host, Refuse{kMaxHost});
}
template <class Io, Is<Local> M>
void fields(Io& io, M& m) {
  io(m.timeout_us);
}
template <class Io, Is<Addresses> M>
void fields(Io& io, M& m) {
  io(m.addresses);
}
template <class Io, Is<Alert> M>
void fields(Io& io, M& m) {
  io(m.text, Cut{kMaxAlert});
}
template <class Io, Is<Now> M>
void fields(Io&, M&) {}
template <class Io, Is<Time> M>
void fields(Io& io, M& m) {
  io(m.ms);
}

}  // namespace

template <class M>
std::string encode(const M& m) {
  Writer w(M::kType);
  fields(w, m);
  return std::move(w).frame();
}

template <class M>
bool decode(std::string_view payload, M& m) {
  Reader r(payload);
  fields(r, m);
  return r.done();
}

#define H2GATE_PAC_WIRE_INSTANTIATE(M)   \
  template std::string encode(const M&); \
  template bool decode(std::string_view, M&);
H2GATE_PAC_WIRE_MESSAGES(H2GATE_PAC_WIRE_INSTANTIATE)
#undef H2GATE_PAC_WIRE_INSTANTIATE

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
