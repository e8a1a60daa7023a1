// Downloads a PAC file: one GET over http:// or https:// (TLS verified
// against the system's trust store or `trusted_ca`), never through a proxy
// (as browsers fetch PAC files), following at most `max_redirects`
// redirects, reading at most `max_bytes` of body, all within `timeout`.
//
// Asynchronous on the executor given (the PAC source's own thread, not an
// event loop that carries traffic); the callback runs there, exactly once.
// A fetch keeps itself alive until then; cancel() ends it early with an
// error.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <asio.hpp>

namespace h2gate::pac {

struct FetchOptions {
  std::chrono::milliseconds timeout{10000};  // the whole fetch, redirects included
  std::size_t max_bytes = 8u << 20;
  int max_redirects = 5;
  std::string trusted_ca;  // PEM file for https://; empty: the system's trust store
};

struct FetchResult {
  bool ok = false;  // a 200 with the whole body within the limits
  int status = 0;   // the last HTTP status (0: none arrived)
  std::string body;
  std::string error;      // why not ok, for logs: "wpad.corp:80: Connection refused"
  std::string final_url;  // after redirects
};

// A URL split for fetching. Only http and https; userinfo is refused (a
// PAC file is not fetched with credentials).
struct FetchUrl {
  bool https = false;
  std::string host;  // no brackets
  uint16_t port = 0;
  std::string target;  // path and query, "/" at least
};
// Returns "" or why `url` cannot be fetched.
std::string parseFetchUrl(std::string_view url, FetchUrl* out);

class PacFetch {
 public:
  using Callback = std::function<void(FetchResult)>;
  // Starts at once.
  static std::shared_ptr<PacFetch> start(asio::any_io_executor ex, std::string url,
                                         FetchOptions options, Callback done);
  virtual ~PacFetch() = default;
  virtual void cancel() = 0;
};

}  // namespace h2gate::pac
