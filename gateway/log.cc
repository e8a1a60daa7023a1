#include "gateway/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace h2gate::log {
namespace {
std::atomic<Level> g_level{Level::Info};
std::mutex g_mutex;
std::FILE* g_out = nullptr;  // nullptr: stderr

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
  g_out = out;
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

}  // namespace

std::string utcSeconds(std::chrono::system_clock::time_point t) {
  char ts[32];
  int ms = 0;
  formatUtc(t, ts, &ms);
  return std::string(ts) + "Z";
}

void write(Level l, uint64_t conn_id, uint64_t stream_id, std::string_view message) {
  char ts[32];
  int ms = 0;
  formatUtc(std::chrono::system_clock::now(), ts, &ms);
  char ids[48] = "";
  if (conn_id != 0 && stream_id != 0)
    std::snprintf(ids, sizeof ids, "[C%llu][S%llu] ", static_cast<unsigned long long>(conn_id),
                  static_cast<unsigned long long>(stream_id));
  else if (conn_id != 0)
    std::snprintf(ids, sizeof ids, "[C%llu] ", static_cast<unsigned long long>(conn_id));
  std::lock_guard<std::mutex> lock(g_mutex);
  std::FILE* out = g_out ? g_out : stderr;
  std::fprintf(out, "%s.%03dZ %s %s%.*s\n", ts, ms, name(l), ids, static_cast<int>(message.size()),
               message.data());
  std::fflush(out);
}

}  // namespace h2gate::log
