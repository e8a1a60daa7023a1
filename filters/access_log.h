// h2gate.filters.access_log: one JSON line per request or tunnel, written when
// it completes.
//
//   - name: h2gate.filters.access_log
//     typed_config:
//       "@type": type.googleapis.com/h2gate.filters.access_log.v1.Config  # optional
//       path: /var/log/h2gate/access.log   # optional; default stdout
//
// {"time":"2026-11-22T00:15:28.123Z","listener":"local_proxy","connection_id":7,
//  "stream_id":1,"client":"127.0.0.1:50312","method":"CONNECT","target":"example.com:443",
//  "status":200,"bytes_up":123,"bytes_down":456,"duration_ms":12.3,
//  "cluster":"","upstream":"93.184.215.14:443","protocol":"direct","result":"ok","reason":""}
//
// "cluster" is the cluster that carried the request ("" for DIRECT): after a
// route fallback, the one it fell back to.
//
// Headers are never logged (Proxy-Authorization, cookies), and user:password@
// in an absolute-form target is replaced by "***@". Every line is valid JSON
// whatever bytes the app sent: invalid UTF-8 becomes U+FFFD.
#pragma once

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

#include "config/node_reader.h"
#include "filters/filter.h"
#include "filters/registry.h"

namespace h2gate::filters {

inline constexpr const char* kAccessLogType =
    "type.googleapis.com/h2gate.filters.access_log.v1.Config";

class AccessLogFilter : public Filter {
 public:
  struct Config {
    std::string path;  // empty or /dev/stdout: stdout; /dev/stderr: stderr
  };

  explicit AccessLogFilter(Config config) : config_(std::move(config)) {}
  ~AccessLogFilter() override;
  AccessLogFilter(const AccessLogFilter&) = delete;
  AccessLogFilter& operator=(const AccessLogFilter&) = delete;

  // Opens the file for append. Lines completed before init() are dropped.
  std::string init() override;
  // Thread-safe: one fwrite + fflush per line under a mutex, so lines from
  // several workers never interleave.
  void onComplete(const RequestHead& head, const StreamInfo& info) const override;

  // The line without its newline; `now` gives duration_ms.
  static std::string formatLine(const RequestHead& head, const StreamInfo& info,
                                std::chrono::steady_clock::time_point now);

  const Config& config() const { return config_; }

 private:
  Config config_;
  mutable std::mutex mutex_;  // guards writes to out_
  std::FILE* out_ = nullptr;
  bool owned_ = false;  // false for stdout/stderr, which we never close
};

// Appends `s` as a JSON string literal (with quotes).
void appendJsonString(std::string& out, std::string_view s);
// "http://user:pass@host/x" → "http://***@host/x"; anything else unchanged.
std::string redactUserinfo(std::string_view target);

FilterPtr createAccessLog(config::NodeReader& typed_config, const FactoryContext& ctx);

}  // namespace h2gate::filters
