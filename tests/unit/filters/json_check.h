// A strict little JSON reader for tests: parses one flat object of strings
// and numbers (what the access log writes) and fails on anything RFC 8259
// forbids (raw control characters, bad escapes, invalid UTF-8, trailing text).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace h2gate::testing {

class FlatJson {
 public:
  // Values: strings decoded (escapes resolved, \uXXXX as UTF-8), numbers as text.
  static std::optional<std::map<std::string, std::string>> parse(std::string_view text) {
    FlatJson p(text);
    std::map<std::string, std::string> out;
    if (!p.eat('{')) return std::nullopt;
    if (p.eat('}')) return p.atEnd() ? std::optional(out) : std::nullopt;
    do {
      auto key = p.string();
      if (!key || !p.eat(':')) return std::nullopt;
      std::optional<std::string> value;
      if (p.peek() == '"') {
        value = p.string();
      } else {
        value = p.number();
      }
      if (!value || out.count(*key) != 0) return std::nullopt;
      out[*key] = *value;
    } while (p.eat(','));
    if (!p.eat('}') || !p.atEnd()) return std::nullopt;
    return out;
  }

 private:
  explicit FlatJson(std::string_view t) : t_(t) {}
  char peek() const { return i_ < t_.size() ? t_[i_] : '\0'; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }
  bool atEnd() const { return i_ == t_.size(); }

  static void appendUtf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::optional<std::string> string() {
    if (!eat('"')) return std::nullopt;
    std::string out;
    while (true) {
      if (atEnd()) return std::nullopt;
      const unsigned char c = static_cast<unsigned char>(t_[i_++]);
      if (c == '"') return out;
      if (c < 0x20) return std::nullopt;
      if (c == '\\') {
        const char e = peek();
        ++i_;
        switch (e) {
          case '"':
            out += '"';
            break;
          case '\\':
            out += '\\';
            break;
          case '/':
            out += '/';
            break;
          case 'b':
            out += '\b';
            break;
          case 'f':
            out += '\f';
            break;
          case 'n':
            out += '\n';
            break;
          case 'r':
            out += '\r';
            break;
          case 't':
            out += '\t';
            break;
          case 'u': {
            if (i_ + 4 > t_.size()) return std::nullopt;
            uint32_t cp = 0;
            for (int k = 0; k < 4; ++k) {
              const char h = t_[i_++];
              cp <<= 4;
              if (h >= '0' && h <= '9')
                cp |= h - '0';
              else if (h >= 'a' && h <= 'f')
                cp |= h - 'a' + 10;
              else if (h >= 'A' && h <= 'F')
                cp |= h - 'A' + 10;
              else
                return std::nullopt;
            }
            if (cp >= 0xD800 && cp <= 0xDFFF) return std::nullopt;  // we never write surrogates
            appendUtf8(out, cp);
            break;
          }
          default:
            return std::nullopt;
        }
        continue;
      }
      if (c < 0x80) {
        out += static_cast<char>(c);
        continue;
      }
      // Raw UTF-8 must be well formed.
      int n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
      if (n == 0 || c > 0xF4 || i_ + n - 1 > t_.size()) return std::nullopt;
      const unsigned char c1 = static_cast<unsigned char>(t_[i_]);
      if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) ||
          (c == 0xF4 && c1 > 0x8F)) {
        return std::nullopt;
      }
      out += static_cast<char>(c);
      for (int k = 1; k < n; ++k) {
        const unsigned char cc = static_cast<unsigned char>(t_[i_++]);
        if (cc < 0x80 || cc > 0xBF) return std::nullopt;
        out += static_cast<char>(cc);
      }
    }
  }

  std::optional<std::string> number() {
    const std::size_t start = i_;
    eat('-');
    if (peek() == '0') {
      ++i_;
    } else if (peek() >= '1' && peek() <= '9') {
      while (peek() >= '0' && peek() <= '9') ++i_;
    } else {
      return std::nullopt;
    }
    if (eat('.')) {
      if (!(peek() >= '0' && peek() <= '9')) return std::nullopt;
      while (peek() >= '0' && peek() <= '9') ++i_;
    }
    return std::string(t_.substr(start, i_ - start));
  }

  std::string_view t_;
  std::size_t i_ = 0;
};

}  // namespace h2gate::testing
