// Reading h2gate's admin endpoints in tests: a GET with its status, and the
// Prometheus text exposition parsed into samples that can be summed by label.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace h2gate::test {

struct AdminReply {
  int status = 0;  // 0: no HTTP answer
  std::string body;
  std::string content_type;
  double seconds = 0;  // how long the answer took
};
AdminReply adminGet(uint16_t port, const std::string& path,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));
// The same with POST (e.g. POST /reload), as deploy/README.md's curl line sends it:
// with the header every admin POST needs (kAdminPostHeader).
AdminReply adminPost(uint16_t port, const std::string& path,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));
inline constexpr const char* kAdminPostHeader = "X-H2gate-Admin: 1";
// Waits until /clusters shows the endpoint 127.0.0.1:`proxy_port` in `state`
// ("up", "down", ...); false after `timeout`.
bool waitForEndpointState(uint16_t admin_port, uint16_t proxy_port, const std::string& state,
                          std::chrono::milliseconds timeout);
// Any method, with extra request headers ("Name: value", as curl -H takes
// them; "Host: x" replaces curl's own).
AdminReply adminRequest(const std::string& method, uint16_t port, const std::string& path,
                        const std::vector<std::string>& headers,
                        std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

struct Sample {
  std::string name;  // with _bucket/_sum/_count for histograms
  std::map<std::string, std::string> labels;
  double value = 0;
};

class Scrape {
 public:
  explicit Scrape(const std::string& text);
  // Sum of the samples named `name` whose labels include all of `match`.
  double sum(const std::string& name, const std::map<std::string, std::string>& match = {}) const;
  // Number of such samples.
  size_t count(const std::string& name, const std::map<std::string, std::string>& match = {}) const;
  bool has(const std::string& name) const { return count(name) > 0; }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::vector<Sample> samples_;
};

// GET /metrics and parse it (REQUIREs a 200).
Scrape scrapeMetrics(uint16_t admin_port);

}  // namespace h2gate::test
