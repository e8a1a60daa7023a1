// Logging: one line per event to stderr, with a level, the connection id and
// the stream id where there is one, so a 3 a.m. reader can follow one app
// connection through the log:
//   2026-11-22T00:15:28.123Z info  [C7][S2] direct connect to 93.184.215.14:443 failed: Connection
//   refused
// Secrets (credentials, Proxy-Authorization values) MUST NOT be passed here.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <string_view>

namespace h2gate::log {

enum class Level { Trace = 0, Debug, Info, Warn, Error, Off };

void setLevel(Level level);
Level level();
// "trace", "debug", "info", "warn", "error", "off"; false when unknown.
bool parseLevel(std::string_view name, Level* out);

// Where lines go: stderr unless set. `out` stays open for the rest of the
// process; call before other threads log. nullptr: back to stderr.
void setOutput(std::FILE* out);

// A log file (--log-file): lines are appended to `path`; when it has reached
// `max_bytes` (0: never) it is renamed to `path`.1 (an older .1 to .2, and so
// on; the one beyond `keep` is deleted) and a new `path` is started, so a
// service that runs for months keeps at most (keep + 1) × max_bytes of log.
// A line is never split across files. When the rename fails (another program
// holds the file without sharing deletion) h2gate goes on appending and tries
// again after the next `max_bytes`. Returns false (with `*error`) when `path`
// cannot be opened for appending.
struct FileOptions {
  uint64_t max_bytes = 10ull << 20;
  unsigned keep = 5;
};
bool setOutputFile(const std::string& path, const FileOptions& options, std::string* error);

void write(Level level, uint64_t conn_id, uint64_t stream_id, std::string_view message);

// `t` in UTC as "2026-11-25T20:41:07Z" (whole seconds), on every platform.
std::string utcSeconds(std::chrono::system_clock::time_point t);
inline bool enabled(Level l) {
  return l >= level();
}

}  // namespace h2gate::log

// Usage: H2G_LOG(Info, conn_id, stream_id, "connected to " << addr);
// conn_id/stream_id 0 mean "none". The message is only formatted when enabled.
#define H2G_LOG(LEVEL, CONN, STREAM, EXPR)                                                    \
  do {                                                                                        \
    if (::h2gate::log::enabled(::h2gate::log::Level::LEVEL)) {                                \
      std::ostringstream h2g_log_os_;                                                         \
      h2g_log_os_ << EXPR;                                                                    \
      ::h2gate::log::write(::h2gate::log::Level::LEVEL, (CONN), (STREAM), h2g_log_os_.str()); \
    }                                                                                         \
  } while (0)
