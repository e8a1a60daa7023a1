#include "gateway/base/log.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <system_error>

namespace h2gate::log {
namespace {
std::atomic<Level> g_level{Level::Info};
std::mutex g_mutex;
std::FILE* g_out = nullptr;  // nullptr: stderr

// The log file's state (setOutputFile), under g_mutex.
struct LogFile {
  std::string path;
  FileOptions options;
  uint64_t size = 0;        // bytes in the current file
  uint64_t next_check = 0;  // rotate when size reaches this
};
LogFile* g_file = nullptr;  // nullptr: not a rotated file

const char* name(Level l) {
  switch (l) {
    case Level::Trace:
      return "trace";
    case Level::Debug:
      return "debug";
    case Level::Info:
      return "info ";
    case Level::Warn:
      return "warn ";
    case Level::Error:
      return "error";
    case Level::Off:
      break;
  }
  return "off  ";
}
}  // namespace

void setOutput(std::FILE* out) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_file) {
    if (g_out) std::fclose(g_out);
    delete g_file;
    g_file = nullptr;
  }
  g_out = out;
}

bool setOutputFile(const std::string& path, const FileOptions& options, std::string* error) {
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (!f) {
    std::error_code ec(errno, std::generic_category());
    *error = path + ": cannot open for appending: " + ec.message();
    return false;
  }
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  setOutput(f);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_file = new LogFile{path, options, ec ? 0 : static_cast<uint64_t>(size), options.max_bytes};
  return true;
}

void setLevel(Level l) {
  g_level.store(l, std::memory_order_relaxed);
}
Level level() {
  return g_level.load(std::memory_order_relaxed);
}

bool parseLevel(std::string_view n, Level* out) {
  static constexpr std::pair<std::string_view, Level> kNames[] = {
      {"trace", Level::Trace}, {"debug", Level::Debug},  {"info", Level::Info},
      {"warn", Level::Warn},   {"warning", Level::Warn}, {"error", Level::Error},
      {"off", Level::Off}};
  for (const auto& [k, v] : kNames) {
    if (k == n) {
      *out = v;
      return true;
    }
  }
  return false;
}

namespace {

// UTC by the C++20 calendar: no gmtime_r (POSIX) / gmtime_s (Windows).
void formatUtc(std::chrono::system_clock::time_point t, char (&out)[32], int* millis) {
  using namespace std::chrono;
  const auto day = floor<days>(t);
  const year_month_day ymd{day};
  const hh_mm_ss hms{floor<milliseconds>(t - day)};
  *millis = static_cast<int>(hms.subseconds().count());
  std::snprintf(out, sizeof out, "%04d-%02u-%02uT%02d:%02d:%02d", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()));
}

// One line to the output, under g_mutex; the bytes written (< 0 on error).
int emit(Level l, uint64_t conn_id, uint64_t stream_id, std::string_view message) {
  char ts[32];
  int ms = 0;
  formatUtc(std::chrono::system_clock::now(), ts, &ms);
  char ids[48] = "";
  if (conn_id != 0 && stream_id != 0)
    std::snprintf(ids, sizeof ids, "[C%llu][S%llu] ", static_cast<unsigned long long>(conn_id),
                  static_cast<unsigned long long>(stream_id));
  else if (conn_id != 0)
    std::snprintf(ids, sizeof ids, "[C%llu] ", static_cast<unsigned long long>(conn_id));
  std::FILE* out = g_out ? g_out : stderr;
  const int n = std::fprintf(out, "%s.%03dZ %s %s%.*s\n", ts, ms, name(l), ids,
                             static_cast<int>(message.size()), message.data());
  std::fflush(out);
  return n;
}

std::string numbered(const std::string& path, unsigned n) {
  return path + "." + std::to_string(n);
}

// Under g_mutex, g_file set and full: path → path.1 → ... → path.keep (the
// last deleted), a new path opened. On failure the current file stays.
void rotate() {
  LogFile& lf = *g_file;
  namespace fs = std::filesystem;
  std::error_code ec;
  std::fclose(g_out);
  g_out = nullptr;
  bool renamed = false;
  if (lf.options.keep == 0) {
    renamed = fs::remove(lf.path, ec) && !ec;
  } else {
    fs::remove(numbered(lf.path, lf.options.keep), ec);
    for (unsigned i = lf.options.keep - 1; i >= 1; --i) {
      if (fs::exists(numbered(lf.path, i), ec))
        fs::rename(numbered(lf.path, i), numbered(lf.path, i + 1), ec);
    }
    ec.clear();
    fs::rename(lf.path, numbered(lf.path, 1), ec);
    renamed = !ec;
  }
  g_out = std::fopen(lf.path.c_str(), "a");
  if (renamed) {
    lf.size = 0;
    lf.next_check = lf.options.max_bytes;
  } else {
    // Try again after another max_bytes (not on every line).
    lf.next_check = lf.size + lf.options.max_bytes;
  }
  if (!g_out) {
    // Nowhere left but stderr (a service's goes nowhere): say so there.
    const std::string path = lf.path;
    delete g_file;
    g_file = nullptr;
    emit(Level::Error, 0, 0,
         "log file " + path + ": cannot reopen it after rotation: logging to stderr");
    return;
  }
  if (!renamed) {
    const int n = emit(Level::Warn, 0, 0,
                       "log file " + lf.path + " could not be renamed to " + numbered(lf.path, 1) +
                           " (" + ec.message() + "): appending; trying again in " +
                           std::to_string(lf.options.max_bytes) + " bytes");
    if (n > 0) lf.size += static_cast<uint64_t>(n);
  }
}

}  // namespace

std::string utcSeconds(std::chrono::system_clock::time_point t) {
  char ts[32];
  int ms = 0;
  formatUtc(t, ts, &ms);
  return std::string(ts) + "Z";
}

void write(Level l, uint64_t conn_id, uint64_t stream_id, std::string_view message) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const int n = emit(l, conn_id, stream_id, message);
  if (g_file && n > 0) {
    g_file->size += static_cast<uint64_t>(n);
    if (g_file->options.max_bytes != 0 && g_file->size >= g_file->next_check) rotate();
  }
}

}  // namespace h2gate::log
