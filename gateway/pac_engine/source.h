// Where a route's PAC file comes from, kept fresh: a file, a URL, WPAD by
// DNS (gateway/pac_engine/wpad.h) or the platform's own setting
// (gateway/pac_engine/system_proxy.h).
//
//   PacSource source(config, loop.get_executor(), [&](std::shared_ptr<PacScript> s) {
//     evaluator.setScript(s, ...);
//   });
//   source.start();
//
// The first attempt starts at start(); after a success the next comes
// `refresh_interval` later, after a failure `retry_interval` later (the
// shorter of the two). A script is handed over only when its text changed
// (SHA-256), so an unchanged file does not empty the answer cache. A
// failure never takes a script away: the last good one stays in use and
// status() says since when and why (for /ready and /pac); the log says so
// once per distinct error and again when it recovers.
//
// Threads: everything blocking or slow (file reads, downloads, DNS for
// WPAD, gsettings) runs on the source's own thread; `on_script` is posted
// to the owner's executor. Destroying the source stops its thread (an
// attempt in progress is abandoned) and no callback runs after that.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <asio.hpp>

#include "gateway/pac_engine/evaluator.h"
#include "gateway/pac_engine/fetch.h"

namespace h2gate::pac {

struct PacSourceConfig {
  enum class Kind { File, Url, Wpad, System };
  Kind kind = Kind::File;
  std::string location;      // File: the path; Url: the http:// or https:// URL
  std::string name = "pac";  // for logs: the route
  std::chrono::milliseconds refresh_interval{std::chrono::minutes(10)};  // 0: never
  std::chrono::milliseconds retry_interval{std::chrono::seconds(30)};
  // Downloads (URL, WPAD, system AutoConfigURL); max_bytes bounds files too.
  FetchOptions fetch;
  // Each WPAD candidate gets at most this long (a dead name must not eat
  // the whole fetch timeout of the next).
  std::chrono::milliseconds wpad_candidate_timeout{std::chrono::seconds(5)};
};

const char* kindName(PacSourceConfig::Kind kind);

struct PacSourceStatus {
  bool have_script = false;
  std::string origin;  // of the script in use: "http://wpad.corp/wpad.dat (WPAD)", ...
  std::string sha256;
  std::chrono::system_clock::time_point changed_at;  // when its text first arrived
  std::chrono::system_clock::time_point fetched_at;  // the last successful attempt
  std::chrono::system_clock::time_point attempted_at;
  std::string last_error;  // of the last attempt; "" when it worked
  uint64_t consecutive_failures = 0;
  uint64_t attempts = 0;
  uint64_t failures = 0;
};

class PacSource {
 public:
  using OnScript = std::function<void(std::shared_ptr<PacScript>)>;

  PacSource(PacSourceConfig config, asio::any_io_executor owner, OnScript on_script);
  ~PacSource();
  PacSource(const PacSource&) = delete;
  PacSource& operator=(const PacSource&) = delete;

  void start();
  // An attempt now (the network changed, an operator asked), unless one is
  // running; the refresh schedule restarts from it.
  void refreshNow();
  PacSourceStatus status() const;
  const PacSourceConfig& config() const { return config_; }

 private:
  struct Attempt;
  void attempt();
  void attemptSystem();
  // Downloads `url`; its script's origin is `origin` (PacScript).
  void fetchUrl(std::string url, std::string origin);
  void runWpad(std::string origin_prefix);
  void wpadNext(std::shared_ptr<std::vector<std::string>> urls, std::size_t i,
                std::shared_ptr<std::string> errors, std::string origin_prefix);
  // `url` and `manual_proxies`: PacScript's.
  void succeed(std::string text, std::string origin, std::string url = {},
               std::vector<std::string> manual_proxies = {});
  void fail(std::string error);
  void schedule(std::chrono::milliseconds after);

  PacSourceConfig config_;
  asio::any_io_executor owner_;
  OnScript on_script_;
  asio::io_context io_;  // the source's own thread runs it
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  asio::steady_timer timer_;
  std::shared_ptr<PacFetch> fetch_;
  bool running_ = false;      // an attempt is in progress (source thread only)
  std::string logged_error_;  // the last error logged at warn (source thread only)
  std::string logged_notes_;
  mutable std::mutex mutex_;
  PacSourceStatus status_;  // guarded by mutex_
  // Shared with posted callbacks: false once the source is destroyed.
  std::shared_ptr<std::atomic<bool>> alive_ = std::make_shared<std::atomic<bool>>(true);
  std::thread thread_;
};

}  // namespace h2gate::pac
