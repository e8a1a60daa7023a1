#include "tests/support/prometheus.h"

#include <stdexcept>
#include <thread>

#include "tests/support/net.h"
#include "tests/support/util.h"

namespace h2gate::test {
namespace {

// Percent-encodes a query parameter value.
std::string urlEncode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace

PrometheusServer::PrometheusServer(uint16_t target_port, const std::string& path)
    : dir_("prometheus") {
  const std::string config =
      dir_.write("prometheus.yml",
                 "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                 "scrape_configs:\n  - job_name: h2gate\n    metrics_path: " +
                     path + "\n    static_configs:\n      - targets: ['127.0.0.1:" +
                     std::to_string(target_port) + "']\n");
  std::string last;
  for (int attempt = 0; attempt < 4; ++attempt) {
    port_ = freePort();
    Process::Options o;
    o.argv = {"prometheus", "--config.file=" + config, "--storage.tsdb.path=" + dir_.file("data"),
              "--web.listen-address=127.0.0.1:" + std::to_string(port_), "--log.level=warn"};
    o.log_dir = dir_.path().string();
    o.name = "prometheus";
    process_ = std::make_unique<Process>(std::move(o));
    const auto deadline = std::chrono::steady_clock::now() + kPeerStartTimeout;
    while (std::chrono::steady_clock::now() < deadline && process_->running()) {
      CommandResult r = runCurl({"-s", "-o", "/dev/null", "-w", "%{http_code}",
                                 "http://127.0.0.1:" + std::to_string(port_) + "/-/ready"},
                                std::chrono::milliseconds(5000));
      if (r.out == "200") return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    last = process_->logTail();
    process_->stop(std::chrono::milliseconds(2000));
    process_.reset();
    if (last.find("address already in use") == std::string::npos) break;
  }
  throw std::runtime_error("prometheus did not start:\n" + last);
}

PrometheusServer::~PrometheusServer() = default;

std::optional<double> PrometheusServer::query(const std::string& promql) {
  CommandResult r = runCurl({"-sS", "http://127.0.0.1:" + std::to_string(port_) +
                                        "/api/v1/query?query=" + urlEncode(promql)},
                            std::chrono::milliseconds(10000));
  if (r.exit_code != 0) {
    last_error_ = "curl: " + r.err;
    return std::nullopt;
  }
  if (r.out.find("\"status\":\"success\"") == std::string::npos) {
    last_error_ = r.out;
    return std::nullopt;
  }
  // {"status":"success","data":{"resultType":"vector","result":[{"metric":{…},
  //  "value":[1700000000.123,"4194304"]}]}}
  auto m = regexSearch(r.out, "\"value\":\\[[0-9.e+]+,\"([^\"]+)\"\\]");
  if (!m) {
    last_error_ = "empty result: " + r.out;
    return std::nullopt;
  }
  return std::strtod((*m)[1].c_str(), nullptr);
}

bool PrometheusServer::waitForTarget(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto v = query("up{job=\"h2gate\"}"); v && *v == 1) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return false;
}

std::string PrometheusServer::logTail() const {
  return process_ ? process_->logTail() : std::string();
}

}  // namespace h2gate::test
