#include "gateway/upstream/auth/challenge.h"

#include "gateway/base/ascii.h"

namespace h2gate::upstream::auth {
namespace {

// RFC 9110 §11.2 token68 characters (without the trailing '=' padding).
bool isToken68Char(char c) {
  if (isAsciiAlnum(c)) return true;
  return c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/';
}

class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}
  bool done() const { return i_ >= s_.size(); }
  char peek(size_t ahead = 0) const { return i_ + ahead < s_.size() ? s_[i_ + ahead] : '\0'; }
  size_t pos() const { return i_; }
  void seek(size_t i) { i_ = i; }
  void skipWs() {
    while (!done() && isSpaceOrTab(s_[i_])) ++i_;
  }
  // OWS and empty list elements (RFC 9110 §5.6.1: recipients accept them).
  void skipWsAndCommas() {
    while (!done() && (isSpaceOrTab(s_[i_]) || s_[i_] == ',')) ++i_;
  }
  std::string_view token() {
    const size_t start = i_;
    while (!done() && isHttpTokenChar(s_[i_])) ++i_;
    return s_.substr(start, i_ - start);
  }
  // A quoted-string (cursor on the opening quote); false when unterminated
  // or holding a control character, escaped or not (RFC 9110 §5.6.4:
  // qdtext and quoted-pair both take HTAB, SP, VCHAR and obs-text only).
  bool quoted(std::string* out) {
    auto allowed = [](char c) {
      return !((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f);
    };
    ++i_;  // "
    while (!done()) {
      const char c = s_[i_++];
      if (c == '"') return true;
      if (c == '\\') {
        if (done() || !allowed(s_[i_])) return false;
        out->push_back(s_[i_++]);
        continue;
      }
      if (!allowed(c)) return false;
      out->push_back(c);
    }
    return false;
  }
  // Length of a token68 starting here, padding included, when what follows
  // it (after OWS) is a comma or the end; 0 otherwise.
  size_t token68Here() const {
    size_t j = i_;
    while (j < s_.size() && isToken68Char(s_[j])) ++j;
    if (j == i_) return 0;
    while (j < s_.size() && s_[j] == '=') ++j;
    size_t k = j;
    while (k < s_.size() && isSpaceOrTab(s_[k])) ++k;
    if (k < s_.size() && s_[k] != ',') return 0;
    return j - i_;
  }
  // Whether an auth-param (token BWS "=" BWS value) starts here.
  bool paramHere() const {
    size_t j = i_;
    while (j < s_.size() && isHttpTokenChar(s_[j])) ++j;
    if (j == i_) return false;
    while (j < s_.size() && isSpaceOrTab(s_[j])) ++j;
    if (j >= s_.size() || s_[j] != '=') return false;
    ++j;
    while (j < s_.size() && isSpaceOrTab(s_[j])) ++j;
    return j < s_.size() && (s_[j] == '"' || isHttpTokenChar(s_[j]));
  }
  std::string_view take(size_t n) {
    const std::string_view out = s_.substr(i_, n);
    i_ += n;
    return out;
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

// auth-params of one challenge, the cursor on the first; stops before the
// comma that starts the next challenge.
bool parseParams(Cursor& c, Challenge& ch) {
  for (;;) {
    std::string name(c.token());
    c.skipWs();
    c.take(1);  // '=' (paramHere() checked it)
    c.skipWs();
    std::string value;
    if (c.peek() == '"') {
      if (!c.quoted(&value)) return false;
    } else {
      value = std::string(c.token());
    }
    ch.params.emplace_back(std::move(name), std::move(value));
    c.skipWs();
    if (c.done()) return true;
    if (c.peek() != ',') return false;
    // Another param of this challenge, or the next challenge?
    const size_t comma = c.pos();
    c.skipWsAndCommas();
    if (c.done()) return true;
    if (!c.paramHere()) {
      c.seek(comma);
      return true;
    }
  }
}

}  // namespace

const std::string* Challenge::param(std::string_view name) const {
  for (const auto& [n, v] : params)
    if (iequals(n, name)) return &v;
  return nullptr;
}

bool parseChallenges(std::string_view value, std::vector<Challenge>* out) {
  Cursor c(value);
  for (;;) {
    c.skipWsAndCommas();
    if (c.done()) return true;
    Challenge ch;
    ch.scheme = std::string(c.token());
    if (ch.scheme.empty()) return false;
    if (c.done() || c.peek() == ',') {
      out->push_back(std::move(ch));
      continue;
    }
    if (!isSpaceOrTab(c.peek())) return false;
    c.skipWs();
    if (c.done() || c.peek() == ',') {
      out->push_back(std::move(ch));
      continue;
    }
    // "abc==" then the end or a comma is a token68; "a=b" or "a = \"b\"" a
    // param (a param's value is never empty, a token68 never has a
    // character after its padding).
    if (const size_t n = c.token68Here(); n > 0 && !c.paramHere()) {
      ch.token68 = std::string(c.take(n));
      out->push_back(std::move(ch));
      c.skipWs();
      if (!c.done() && c.peek() != ',') return false;
      continue;
    }
    if (!c.paramHere()) return false;
    if (!parseParams(c, ch)) return false;  // the malformed challenge is dropped
    out->push_back(std::move(ch));
  }
}

std::vector<Challenge> challengesOf(const Headers& headers, std::string_view header_name) {
  std::vector<Challenge> out;
  for (const Header& h : headers)
    if (iequals(h.name, header_name)) parseChallenges(h.value, &out);
  return out;
}

const Challenge* findChallenge(const std::vector<Challenge>& challenges, std::string_view scheme) {
  for (const Challenge& c : challenges)
    if (iequals(c.scheme, scheme)) return &c;
  return nullptr;
}

}  // namespace h2gate::upstream::auth
