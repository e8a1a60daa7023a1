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

// Where lines go: stderr unless set (--log-file). `out` stays open for the
// rest of the process; call before other threads log.
void setOutput(std::FILE* out);

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
