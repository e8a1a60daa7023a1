// A real Prometheus server (Debian's `prometheus`) for tests: scrapes one
// target every second, listens on an ephemeral loopback port, keeps its
// data in a temporary directory, answers PromQL through its HTTP API.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace h2gate::test {

class PrometheusServer {
 public:
  // Scrapes http://127.0.0.1:<target_port><path> as job "h2gate".
  explicit PrometheusServer(uint16_t target_port, const std::string& path = "/metrics");
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  uint16_t port() const { return port_; }
  // The first value of an instant query's result vector; nullopt when the
  // result is empty or the query failed (then lastError() says why).
  std::optional<double> query(const std::string& promql);
  const std::string& lastError() const { return last_error_; }
  // Polls until `up{job="h2gate"}` is 1 (the target was scraped).
  bool waitForTarget(std::chrono::milliseconds timeout);
  std::string logTail() const;

 private:
  TempDir dir_;
  std::unique_ptr<Process> process_;
  uint16_t port_ = 0;
  std::string last_error_;
};

}  // namespace h2gate::test
