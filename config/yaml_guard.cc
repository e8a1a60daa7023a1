#include "config/yaml_guard.h"

#include <cstddef>

namespace h2gate::config {
namespace {

bool isBlank(char c) {
  return c == ' ' || c == '\t';
}
bool isBreak(char c) {
  return c == '\n' || c == '\r';
}
bool isSpaceOrEnd(std::string_view s, std::size_t i) {
  return i >= s.size() || isBlank(s[i]) || isBreak(s[i]);
}

// Walks the text once, tracking line and column.
class Scanner {
 public:
  Scanner(std::string_view yaml, int max_depth) : s_(yaml), max_(max_depth) {}

  std::optional<NestingError> run() {
    while (i_ < s_.size()) {
      if (depth_ == 0 ? block() : flow()) return error_;
    }
    return std::nullopt;
  }

 private:
  char at(std::size_t k) const { return k < s_.size() ? s_[k] : '\0'; }

  void advance() {
    if (s_[i_] == '\n') {
      ++line_;
      line_start_ = i_ + 1;
    }
    ++i_;
  }
  void skipToEndOfLine() {
    while (i_ < s_.size() && !isBreak(s_[i_])) advance();
  }
  // A quoted scalar from its opening quote to past its closing one (or the
  // end of the text). '' in single quotes and \x in double quotes escape.
  void skipQuoted() {
    const char q = s_[i_];
    advance();
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (q == '"' && c == '\\') {
        advance();
        if (i_ < s_.size()) advance();
        continue;
      }
      advance();
      if (c == q) {
        if (q == '\'' && at(i_) == '\'') {
          advance();
          continue;
        }
        return;
      }
    }
  }
  // An anchor, alias or tag ("&a", "*a", "!t"): up to the next blank.
  void skipProperty() {
    while (i_ < s_.size() && !isBlank(s_[i_]) && !isBreak(s_[i_])) advance();
  }
  std::size_t indentOfLine(std::size_t start) const {
    std::size_t k = start;
    while (k < s_.size() && s_[k] == ' ') ++k;
    return k - start;
  }
  // After a block scalar indicator (| or >): the rest of its line, then
  // every following line that is blank or indented deeper than the line
  // that holds the indicator.
  void skipBlockScalar() {
    const std::size_t parent_indent = indentOfLine(line_start_);
    skipToEndOfLine();
    while (i_ < s_.size()) {
      // At a line break: look at the next line.
      std::size_t next = i_;
      if (s_[next] == '\r') ++next;
      if (next < s_.size() && s_[next] == '\n') ++next;
      std::size_t k = next;
      while (k < s_.size() && s_[k] == ' ') ++k;
      const bool blank = k >= s_.size() || isBreak(s_[k]);
      if (!blank && k - next <= parent_indent) return;
      while (i_ < next) advance();
      skipToEndOfLine();
    }
  }
  bool open() {
    ++depth_;
    if (depth_ > max_) {
      error_ = NestingError{depth_, line_, static_cast<int>(i_ - line_start_) + 1};
      return true;
    }
    advance();
    token_start_ = true;
    return false;
  }

  // Block context (outside any flow collection). Returns true on an error.
  bool block() {
    const char c = s_[i_];
    if (isBreak(c)) {
      token_start_ = true;
      advance();
      return false;
    }
    if (isBlank(c)) {
      advance();
      if (at(i_) == '#') skipToEndOfLine();
      return false;
    }
    if (c == '#' && (i_ == line_start_ || token_start_)) {
      skipToEndOfLine();
      return false;
    }
    if (!token_start_) {
      // Inside a plain scalar: only ": " ends its part of the line.
      if (c == ':' && isSpaceOrEnd(s_, i_ + 1)) token_start_ = true;
      advance();
      return false;
    }
    switch (c) {
      case '[':
      case '{':
        return open();
      case '"':
      case '\'':
        skipQuoted();
        token_start_ = false;
        return false;
      case '|':
      case '>':
        skipBlockScalar();
        return false;
      case '&':
      case '!':
      case '*':
        skipProperty();
        return false;
      case '-':
      case '?':
      case ':':
        if (isSpaceOrEnd(s_, i_ + 1)) {
          advance();
          return false;  // an indicator: a node may follow
        }
        if (c == '-' && i_ == line_start_ && at(i_ + 1) == '-' && at(i_ + 2) == '-' &&
            isSpaceOrEnd(s_, i_ + 3)) {
          advance();
          advance();
          advance();
          return false;  // "---": a document starts, a node may follow
        }
        break;
      default:
        break;
    }
    token_start_ = false;  // a plain scalar
    advance();
    return false;
  }

  // Inside a flow collection. Returns true on an error.
  bool flow() {
    const char c = s_[i_];
    switch (c) {
      case '[':
      case '{':
        return open();
      case ']':
      case '}':
        --depth_;
        advance();
        token_start_ = false;
        return false;
      case ',':
        advance();
        token_start_ = true;
        return false;
      case '#':
        if (token_start_) {
          skipToEndOfLine();
          return false;
        }
        break;
      case '"':
      case '\'':
        if (token_start_) {
          skipQuoted();
          token_start_ = false;
          return false;
        }
        break;
      case ':':
      case '?':
        advance();
        token_start_ = true;
        return false;
      default:
        if (isBlank(c) || isBreak(c)) {
          advance();
          token_start_ = true;
          return false;
        }
        break;
    }
    token_start_ = false;
    advance();
    return false;
  }

  std::string_view s_;
  int max_;
  std::size_t i_ = 0;
  std::size_t line_start_ = 0;
  int line_ = 1;
  int depth_ = 0;
  bool token_start_ = true;
  NestingError error_;
};

}  // namespace

std::optional<NestingError> checkFlowNesting(std::string_view yaml, int max_depth) {
  return Scanner(yaml, max_depth).run();
}

}  // namespace h2gate::config
