#include "filters/access_log.h"

#include <cerrno>
#include <cstring>

namespace h2gate::filters {
namespace {

constexpr std::size_t kBufferSize = 64 * 1024;  // lines up to this size go out in one write(2)

void appendHex4(std::string& out, unsigned v) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\u";
  out += kHex[(v >> 12) & 0xf];
  out += kHex[(v >> 8) & 0xf];
  out += kHex[(v >> 4) & 0xf];
  out += kHex[v & 0xf];
}

// Length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlongs,
// no surrogates, nothing above U+10FFFF), or 0.
std::size_t utf8Length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  }
  return n;
}

void appendField(std::string& out, const char* name, std::string_view value) {
  out += ",\"";
  out += name;
  out += "\":";
  appendJsonString(out, value);
}

void appendField(std::string& out, const char* name, uint64_t value) {
  out += ",\"";
  out += name;
  out += "\":";
  out += std::to_string(value);
}

std::string isoMillis(std::chrono::system_clock::time_point tp) {
  using namespace std::chrono;
  const auto day = floor<days>(tp);
  const year_month_day ymd{day};
  const hh_mm_ss hms{floor<milliseconds>(tp - day)};
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ",
                static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                static_cast<unsigned>(ymd.day()), static_cast<int>(hms.hours().count()),
                static_cast<int>(hms.minutes().count()), static_cast<int>(hms.seconds().count()),
                static_cast<int>(hms.subseconds().count()));
  return buf;
}

}  // namespace

void appendJsonString(std::string& out, std::string_view s) {
  out += '"';
  std::size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          if (c < 0x20 || c == 0x7f) {
            appendHex4(out, c);
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    if (const std::size_t n = utf8Length(s, i); n != 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      appendHex4(out, 0xFFFD);  // one replacement per bad byte
      ++i;
    }
  }
  out += '"';
}

std::string redactUserinfo(std::string_view target) {
  const std::size_t scheme_end = target.find("://");
  if (scheme_end == std::string_view::npos) return std::string(target);
  const std::size_t start = scheme_end + 3;
  std::size_t end = target.find_first_of("/?#", start);
  if (end == std::string_view::npos) end = target.size();
  const std::size_t at = target.substr(start, end - start).rfind('@');
  if (at == std::string_view::npos) return std::string(target);
  std::string out(target.substr(0, start));
  out += "***";
  out += target.substr(start + at);
  return out;
}

AccessLogFilter::~AccessLogFilter() {
  if (owned_ && out_ != nullptr) std::fclose(out_);
}

std::string AccessLogFilter::init() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (out_ != nullptr) return {};
  const std::string& path = config_.path;
  if (path.empty() || path == "/dev/stdout") {
    out_ = stdout;
  } else if (path == "/dev/stderr") {
    out_ = stderr;
  } else {
    std::FILE* f = std::fopen(path.c_str(), "ab");
    if (f == nullptr) {
      return std::string(kAccessLog) + ": cannot open '" + path +
             "' for append: " + std::strerror(errno);
    }
    std::setvbuf(f, nullptr, _IOFBF, kBufferSize);
    out_ = f;
    owned_ = true;
  }
  return {};
}

std::string AccessLogFilter::formatLine(const RequestHead& head, const StreamInfo& info,
                                        std::chrono::steady_clock::time_point now) {
  std::string line;
  line.reserve(256 + head.target.size());
  line += "{\"time\":";
  appendJsonString(line, isoMillis(info.start_wall));
  appendField(line, "listener", info.listener_name);
  appendField(line, "connection_id", info.connection_id);
  appendField(line, "stream_id", info.stream_id);
  appendField(line, "client", info.client);
  appendField(line, "method", head.method);
  appendField(line, "target", redactUserinfo(head.target));
  line += ",\"status\":" + std::to_string(info.status);
  appendField(line, "bytes_up", info.bytes_up);
  appendField(line, "bytes_down", info.bytes_down);
  const double ms = std::chrono::duration<double, std::milli>(now - info.start).count();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", ms > 0 ? ms : 0.0);
  line += ",\"duration_ms\":";
  line += buf;
  appendField(line, "cluster", info.cluster);  // "": DIRECT (or no route)
  appendField(line, "upstream", info.upstream);
  appendField(line, "protocol", info.protocol);
  appendField(line, "result", resultName(info.result));
  appendField(line, "reason", info.reason);
  line += '}';
  return line;
}

void AccessLogFilter::onComplete(const RequestHead& head, const StreamInfo& info) const {
  std::string line = formatLine(head, info, std::chrono::steady_clock::now());
  line += '\n';
  std::lock_guard<std::mutex> lock(mutex_);
  if (out_ == nullptr) return;
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

FilterPtr createAccessLog(config::NodeReader& r, const FactoryContext&) {
  if (!r.expectMap()) return nullptr;
  const std::size_t before = r.diagnostics().problems().size();
  r.allowOnly({"@type", "path"});
  r.expectType(kAccessLogType);
  AccessLogFilter::Config config;
  if (auto path = r.string("path")) {
    if (path->empty()) r.errorAt("path", "must not be empty (omit it for stdout)");
    config.path = *path;
  }
  if (r.diagnostics().problems().size() != before) return nullptr;
  return std::make_shared<AccessLogFilter>(std::move(config));
}

}  // namespace h2gate::filters
