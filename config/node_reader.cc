#include "config/node_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <utility>

#include "gateway/base/ascii.h"

namespace h2gate::config {
namespace {

// yaml-cpp throws when asked for the position of an absent (zombie) node, and
// nodes built in code carry line -1: both mean "no position".
bool hasPosition(const YAML::Node& node) {
  if (!node.IsDefined()) return false;
  return node.Mark().line >= 0;
}

std::string joinQuoted(std::initializer_list<const char*> items) {
  std::string out;
  for (const char* item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

bool isEnvNameChar(char c, bool first) {
  return isAsciiAlpha(c) || c == '_' || (!first && isAsciiDigit(c));
}

}  // namespace

void sortByPosition(std::vector<Problem>& problems) {
  std::stable_sort(problems.begin(), problems.end(), [](const Problem& a, const Problem& b) {
    if (a.mark.line != b.mark.line) return a.mark.line < b.mark.line;
    return a.mark.column < b.mark.column;
  });
}

std::string escapeControls(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  auto hex = [&](unsigned char c) {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  };
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\t') {
      out += "\\t";
      ++i;
    } else if (c == '\n') {
      out += "\\n";
      ++i;
    } else if (c == '\r') {
      out += "\\r";
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      hex(c);
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else {
      // UTF-8: a well-formed sequence stays (names and reasons may be in
      // any script), except C1 controls (U+0080..U+009F: a terminal may
      // act on U+009B as on ESC [); any other byte is shown as \xNN.
      std::size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
      bool ok = len > 0 && i + len <= text.size();
      for (std::size_t k = 1; ok && k < len; ++k)
        ok = (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
      if (ok && len == 3) {
        const auto c1 = static_cast<unsigned char>(text[i + 1]);
        ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);  // overlong, surrogate
      }
      if (ok && len == 4) {
        const auto c1 = static_cast<unsigned char>(text[i + 1]);
        ok = !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);  // overlong, > U+10FFFF
      }
      if (ok && len == 2 && c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0) {
        out += "\\u00";
        out += kHex[static_cast<unsigned char>(text[i + 1]) >> 4];
        out += kHex[static_cast<unsigned char>(text[i + 1]) & 15];
        i += 2;
      } else if (ok) {
        out.append(text.substr(i, len));
        i += len;
      } else {
        hex(c);
        ++i;
      }
    }
  }
  return out;
}

std::string Problem::str() const {
  std::string out = mark.file;
  if (mark.line > 0) {
    out += ':' + std::to_string(mark.line) + ':' + std::to_string(mark.column);
  }
  if (!path.empty()) {
    if (!out.empty()) out += ": ";
    out += path;
  }
  if (!out.empty()) out += ": ";
  out += message;
  // The file's bytes (keys, values, its own name) end up in the message:
  // printed raw, an ESC sequence would drive the reader's terminal.
  return escapeControls(out);
}

void Diagnostics::error(const Mark& mark, std::string path, std::string message) {
  Mark m = mark;
  if (m.file.empty()) m.file = file_;
  problems_.push_back(Problem{std::move(m), std::move(path), std::move(message)});
}

Mark Diagnostics::markOf(const YAML::Node& node) const {
  Mark m{file_, 0, 0};
  if (hasPosition(node)) {
    const YAML::Mark ym = node.Mark();
    m.line = ym.line + 1;  // yaml-cpp counts from 0
    m.column = ym.column + 1;
  }
  return m;
}

NodeReader::NodeReader(YAML::Node node, std::string path, Diagnostics& diag, Mark fallback)
    : node_(std::move(node)), path_(std::move(path)), diag_(diag), fallback_(std::move(fallback)) {
  if (fallback_.file.empty()) fallback_.file = diag_.file();
}

Mark NodeReader::mark() const {
  // A null value's position is the next token's in yaml-cpp, which misleads;
  // the key (fallback) is where the user looks.
  if (!isNull() && hasPosition(node_)) return diag_.markOf(node_);
  return fallback_;
}

YAML::Node NodeReader::lookup(const char* key, Mark* key_mark) const {
  if (node_.IsDefined() && node_.IsMap()) {
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      if (it->first.IsScalar() && it->first.Scalar() == key) {
        if (key_mark != nullptr) {
          *key_mark = hasPosition(it->first) ? diag_.markOf(it->first) : mark();
        }
        return it->second;
      }
    }
  }
  if (key_mark != nullptr) *key_mark = mark();
  return YAML::Node(YAML::NodeType::Undefined);
}

Mark NodeReader::markAt(const char* key) const {
  Mark key_mark;
  const YAML::Node value = lookup(key, &key_mark);
  if (value.IsDefined() && !value.IsNull() && hasPosition(value)) return diag_.markOf(value);
  return key_mark;
}

std::string NodeReader::childPath(const char* key) const {
  const std::string_view k(key);
  // Keys such as envoy.extensions.upstreams.http.v3.HttpProtocolOptions would
  // make a dotted path ambiguous.
  const std::string part =
      k.find('.') == std::string_view::npos ? std::string(k) : "[\"" + std::string(k) + "\"]";
  if (path_.empty()) return part;
  if (part.front() == '[') return path_ + part;
  return path_ + "." + part;
}

bool NodeReader::has(const char* key) const {
  return lookup(key).IsDefined();
}

bool NodeReader::expectMap() {
  if (isNull() || node_.IsMap()) return true;
  error("expected a mapping");
  return false;
}

void NodeReader::allowOnly(std::initializer_list<const char*> keys) {
  if (isNull() || !node_.IsMap()) return;
  std::set<std::string> seen;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const Mark key_mark = hasPosition(it->first) ? diag_.markOf(it->first) : mark();
    if (!it->first.IsScalar()) {
      diag_.error(key_mark, path_, "expected a field name");
      continue;
    }
    const std::string& name = it->first.Scalar();
    const std::string p = childPath(name.c_str());
    const bool allowed =
        std::any_of(keys.begin(), keys.end(), [&](const char* k) { return name == k; });
    if (!allowed) {
      diag_.error(key_mark, p,
                  keys.size() == 0 ? "unknown field (this place takes no fields)"
                                   : "unknown field (expected one of: " + joinQuoted(keys) + ")");
    } else if (!seen.insert(name).second) {
      // yaml-cpp keeps both and returns the first: a silent surprise.
      diag_.error(key_mark, p, "duplicate field");
    }
  }
}

std::optional<std::string> NodeReader::scalar(const char* key, bool required, const char* what) {
  Mark key_mark;
  const YAML::Node value = lookup(key, &key_mark);
  if (!value.IsDefined() || value.IsNull()) {
    if (required) diag_.error(key_mark, childPath(key), "missing required field");
    return std::nullopt;
  }
  if (!value.IsScalar()) {
    diag_.error(markAt(key), childPath(key), std::string("expected ") + what);
    return std::nullopt;
  }
  return value.Scalar();
}

std::optional<std::string> NodeReader::string(const char* key, bool required) {
  auto raw = scalar(key, required, "a string");
  if (!raw) return std::nullopt;
  std::string missing;
  auto expanded = expandEnv(*raw, &missing);
  if (!expanded) {
    // Name the variable only: other parts of the value may be secrets.
    diag_.error(markAt(key), childPath(key), "environment variable " + missing + " is not set");
  }
  return expanded;
}

std::optional<bool> NodeReader::boolean(const char* key, bool required) {
  auto raw = scalar(key, required, "true or false");
  if (!raw) return std::nullopt;
  // YAML 1.2 core schema only: "yes"/"on" are strings, as in Envoy.
  if (*raw == "true" || *raw == "True" || *raw == "TRUE") return true;
  if (*raw == "false" || *raw == "False" || *raw == "FALSE") return false;
  diag_.error(markAt(key), childPath(key), "expected true or false");
  return std::nullopt;
}

std::optional<uint64_t> NodeReader::uint(const char* key, uint64_t min, uint64_t max,
                                         bool required) {
  auto raw = scalar(key, required, "an integer");
  if (!raw) return std::nullopt;
  const std::string range = std::to_string(min) + ".." + std::to_string(max);
  if (raw->empty() ||
      !std::all_of(raw->begin(), raw->end(), [](char c) { return c >= '0' && c <= '9'; })) {
    diag_.error(markAt(key), childPath(key), "expected an integer in " + range);
    return std::nullopt;
  }
  uint64_t v = 0;
  bool overflow = false;
  for (char c : *raw) {
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
      overflow = true;
      break;
    }
    v = v * 10 + digit;
  }
  if (overflow || v < min || v > max) {
    diag_.error(markAt(key), childPath(key), "must be in " + range + ", got " + *raw);
    return std::nullopt;
  }
  return v;
}

std::optional<Duration> NodeReader::duration(const char* key, bool required) {
  Mark key_mark;
  const YAML::Node value = lookup(key, &key_mark);
  if (value.IsDefined() && value.IsMap()) {
    // protobuf's Duration message: {seconds: N, nanos: M}.
    NodeReader r = child(key);
    r.allowOnly({"seconds", "nanos"});
    const auto s = r.uint("seconds", 0, 315576000000ull);
    const auto n = r.uint("nanos", 0, 999999999);
    if (!r.has("seconds") && !r.has("nanos")) {
      r.error("expected a duration like 5s");
      return std::nullopt;
    }
    if ((r.has("seconds") && !s) || (r.has("nanos") && !n)) return std::nullopt;
    return std::chrono::seconds(s.value_or(0)) + std::chrono::nanoseconds(n.value_or(0));
  }
  auto raw = scalar(key, required, "a duration like 5s");
  if (!raw) return std::nullopt;
  auto d = parseDuration(*raw);
  if (!d) diag_.error(markAt(key), childPath(key), "expected a duration like 5s");
  return d;
}

std::optional<std::vector<std::string>> NodeReader::stringList(const char* key, bool required) {
  Mark key_mark;
  const YAML::Node value = lookup(key, &key_mark);
  if (!value.IsDefined() || value.IsNull()) {
    if (required) diag_.error(key_mark, childPath(key), "missing required field");
    return std::nullopt;
  }
  if (!value.IsSequence()) {
    diag_.error(markAt(key), childPath(key), "expected a list of strings");
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const YAML::Node item = value[i];
    const std::string p = childPath(key) + "[" + std::to_string(i) + "]";
    const Mark m = hasPosition(item) && !item.IsNull() ? diag_.markOf(item) : markAt(key);
    if (!item.IsScalar()) {
      diag_.error(m, p, "expected a string");
      ok = false;
      continue;
    }
    std::string missing;
    auto expanded = expandEnv(item.Scalar(), &missing);
    if (!expanded) {
      diag_.error(m, p, "environment variable " + missing + " is not set");
      ok = false;
      continue;
    }
    out.push_back(std::move(*expanded));
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<std::string> NodeReader::choice(const char* key,
                                              std::initializer_list<const char*> allowed,
                                              bool required) {
  auto raw = scalar(key, required, "a string");
  if (!raw) return std::nullopt;
  auto value = string(key);  // the same value, ${ENV} expanded (errors recorded there)
  if (!value) return std::nullopt;
  for (const char* a : allowed) {
    if (*value == a) return value;
  }
  // Quote what the file says, not the expansion: the variable may hold a secret.
  diag_.error(markAt(key), childPath(key),
              "expected one of " + joinQuoted(allowed) + ", got '" + *raw + "'");
  return std::nullopt;
}

void NodeReader::expectType(std::string_view type_url) {
  auto raw = scalar("@type", false, "a type URL");
  if (raw && *raw != type_url) {
    diag_.error(markAt("@type"), childPath("@type"),
                "expected " + std::string(type_url) + ", got '" + *raw + "'");
  }
}

NodeReader NodeReader::child(const char* key, bool required) {
  Mark key_mark;
  YAML::Node value = lookup(key, &key_mark);
  if (!value.IsDefined()) {
    if (required) diag_.error(key_mark, childPath(key), "missing required field");
    return NodeReader(YAML::Node(YAML::NodeType::Null), childPath(key), diag_, key_mark);
  }
  if (value.IsNull() && required) diag_.error(key_mark, childPath(key), "missing required field");
  return NodeReader(value, childPath(key), diag_, key_mark);
}

std::vector<NodeReader> NodeReader::list(const char* key, bool required) {
  Mark key_mark;
  const YAML::Node value = lookup(key, &key_mark);
  std::vector<NodeReader> out;
  if (!value.IsDefined() || value.IsNull()) {
    if (required) diag_.error(key_mark, childPath(key), "missing required field");
    return out;
  }
  if (!value.IsSequence()) {
    diag_.error(markAt(key), childPath(key), "expected a list");
    return out;
  }
  for (std::size_t i = 0; i < value.size(); ++i) {
    const YAML::Node item = value[i];
    const Mark m = hasPosition(item) && !item.IsNull() ? diag_.markOf(item) : key_mark;
    out.emplace_back(item, childPath(key) + "[" + std::to_string(i) + "]", diag_, m);
  }
  return out;
}

void NodeReader::error(std::string message) const {
  diag_.error(mark(), path_, std::move(message));
}

void NodeReader::errorAt(const char* key, std::string message) const {
  diag_.error(markAt(key), childPath(key), std::move(message));
}

std::optional<Duration> parseDuration(std::string_view text) {
  std::size_t i = 0;
  uint64_t whole = 0;
  const std::size_t digits_start = i;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (whole > 1000000000000ull) return std::nullopt;  // far beyond any sane timeout
    whole = whole * 10 + static_cast<uint64_t>(text[i] - '0');
    ++i;
  }
  if (i == digits_start) return std::nullopt;
  double fraction = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    const std::size_t frac_start = i;
    double scale = 0.1;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      fraction += scale * (text[i] - '0');
      scale /= 10;
      ++i;
    }
    if (i == frac_start) return std::nullopt;
  }
  const std::string_view unit = text.substr(i);
  int64_t unit_ns = 0;
  if (unit == "ns") {
    unit_ns = 1;
  } else if (unit == "us") {
    unit_ns = 1000;
  } else if (unit == "ms") {
    unit_ns = 1000000;
  } else if (unit == "s") {
    unit_ns = 1000000000;
  } else if (unit == "m") {
    unit_ns = 60ll * 1000000000;
  } else if (unit == "h") {
    unit_ns = 3600ll * 1000000000;
  } else {
    return std::nullopt;
  }
  if (whole > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / unit_ns) - 1) {
    return std::nullopt;
  }
  const int64_t ns = static_cast<int64_t>(whole) * unit_ns +
                     static_cast<int64_t>(std::llround(fraction * static_cast<double>(unit_ns)));
  return Duration(ns);
}

std::optional<std::string> expandEnv(std::string_view text, std::string* missing) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '$' && i + 1 < text.size() && text[i + 1] == '{') {
      // Only a well-formed name counts; anything else stays literal text.
      std::size_t close = i + 2;
      while (close < text.size() && isEnvNameChar(text[close], close == i + 2)) ++close;
      if (close < text.size() && text[close] == '}' && close > i + 2) {
        const std::string name(text.substr(i + 2, close - i - 2));
        const char* value = std::getenv(name.c_str());
        if (value == nullptr) {
          if (missing != nullptr) *missing = name;
          return std::nullopt;
        }
        out += value;
        i = close + 1;
        continue;
      }
    }
    out += text[i];
    ++i;
  }
  return out;
}

}  // namespace h2gate::config
