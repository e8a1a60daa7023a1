#include "tests/support/origin.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/support/net.h"
#include "tests/support/util.h"

namespace h2gate::test {

std::string supportDir() {
  if (const char* env = std::getenv("H2GATE_TEST_SUPPORT_DIR"); env && *env) return env;
  return std::filesystem::path(__FILE__).parent_path().string();
}

UploadSink::UploadSink(const std::string& dir) {
  Process::Options opts;
  opts.argv = {"python3", supportDir() + "/upload_sink.py", "--port", "0"};
  opts.log_dir = dir;
  opts.name = "upload_sink";
  log_ = std::make_unique<PeerLog>("upload sink stderr", dir + "/upload_sink.stderr");
  process_ = std::make_unique<Process>(std::move(opts));
  auto m = process_->waitForLog("listening on 127\\.0\\.0\\.1:([0-9]+)", kPeerStartTimeout,
                                Stream::Stdout);
  if (!m) throw std::runtime_error("upload_sink did not start:\n" + process_->logTail());
  port_ = static_cast<uint16_t>(std::stoi((*m)[1]));
}

Nginx::Nginx() : Nginx(Options{}) {}

Nginx::Nginx(Options options) : options_(std::move(options)), dir_("nginx") {
  if (!options_.ca) {
    own_ca_ = std::make_unique<TestCA>(dir_.path().string());
    options_.ca = own_ca_.get();
  }
  ca_path_ = options_.ca->caCertPath();
  cert_ = options_.ca->issueServer(
      "nginx-" + std::to_string(getpid()) + "-" + dir_.path().filename().string(),
      options_.dns_names);
  testFile("1k");
  testFile("1m");
  if (options_.with_sink) sink_ = std::make_unique<UploadSink>(dir_.path().string());
  start();
}

Nginx::~Nginx() = default;

std::string Nginx::httpsUrl(const std::string& path) const {
  return "https://127.0.0.1:" + std::to_string(tls_port_) + path;
}
std::string Nginx::httpUrl(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(http_port_) + path;
}

std::string Nginx::accessLog() const {
  return readFile(dir_.file("access.log"));
}

size_t Nginx::waitForAccessCount(const std::string& needle, size_t n,
                                 std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const size_t count = countOccurrences(accessLog(), needle);
    if (count >= n || std::chrono::steady_clock::now() >= deadline) return count;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void Nginx::start() {
  const std::string d = dir_.path().string();
  std::string last_error;
  for (int attempt = 0; attempt < 3; ++attempt) {
    tls_port_ = freePort();
    http_port_ = options_.http_port != 0 ? options_.http_port : freePort();
    std::ostringstream headers;
    for (const char* h : kEchoedHeaders) {
      std::string var = h;
      for (auto& c : var)
        if (c == '-') c = '_';
      headers << h << "=$http_" << var << "\\n";
    }
    std::ostringstream locations;
    locations << "    root " << testDataDir() << ";\n"
              << "    location /slow/ { alias " << testDataDir() << "/; limit_rate 512k; }\n"
              << "    location = /headers { default_type text/plain; return 200 \"" << headers.str()
              << "\"; }\n";
    if (sink_) {
      locations << "    location /upload {\n"
                << "      proxy_pass http://127.0.0.1:" << sink_->port() << ";\n"
                << "      proxy_http_version 1.1;\n"
                << "      proxy_set_header Connection \"\";\n"
                << "      proxy_request_buffering off;\n"
                << "      proxy_buffering off;\n"
                << "      client_max_body_size 0;\n"
                << "    }\n";
    }
    locations << options_.extra_server_config << "\n";

    std::ostringstream conf;
    if (geteuid() == 0) conf << "user root root;\n";  // workers must read the 0700 temp dirs
    conf << "daemon off;\n"
         << "master_process on;\n"
         << "worker_processes 1;\n"
         << "pid " << d << "/nginx.pid;\n"
         << "error_log " << d << "/error.log info;\n"
         << "events { worker_connections 4096; }\n"
         << "http {\n"
         << "  access_log " << d << "/access.log combined;\n"
         << "  client_body_temp_path " << d << "/client_body;\n"
         << "  proxy_temp_path " << d << "/proxy;\n"
         << "  fastcgi_temp_path " << d << "/fastcgi;\n"
         << "  uwsgi_temp_path " << d << "/uwsgi;\n"
         << "  scgi_temp_path " << d << "/scgi;\n"
         << "  default_type application/octet-stream;\n"
         << "  sendfile on;\n"
         << "  keepalive_requests 10000;\n"
         << "  keepalive_timeout 120s;\n"
         << "  server {\n"
         << "    listen 127.0.0.1:" << tls_port_ << " ssl" << (options_.http2 ? " http2" : "")
         << ";\n"
         << "    server_name _;\n"
         << "    ssl_certificate " << cert_.cert << ";\n"
         << "    ssl_certificate_key " << cert_.key << ";\n"
         << locations.str() << "  }\n"
         << "  server {\n"
         << "    listen 127.0.0.1:" << http_port_ << " default_server;\n";
    for (const std::string& a : options_.http_addresses)
      conf << "    listen " << a << ":" << http_port_ << " default_server;\n";
    conf << "    server_name _;\n" << locations.str() << "  }\n";
    for (const std::string& name : options_.virtual_hosts)
      conf << "  server {\n"
           << "    listen 127.0.0.1:" << http_port_ << ";\n"
           << "    server_name " << name << ";\n"
           << "    location / { default_type text/plain; return 200 \"virtual host " << name
           << "\\n\"; }\n"
           << "  }\n";
    conf << "}\n";
    std::string conf_path = dir_.write("nginx.conf", conf.str());
    std::string pid_path = d + "/nginx.pid";
    std::filesystem::remove(pid_path);

    Process::Options opts;
    opts.argv = {"nginx", "-p", d + "/", "-c", conf_path, "-e", d + "/error.log"};
    opts.log_dir = d;
    opts.name = "nginx";
    process_ = std::make_unique<Process>(std::move(opts));
    // The pid file is written after the listening sockets are bound.
    auto deadline = std::chrono::steady_clock::now() + kPeerStartTimeout;
    bool bound = false;
    while (std::chrono::steady_clock::now() < deadline && process_->running()) {
      if (std::filesystem::exists(pid_path)) {
        bound = true;
        break;
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
    if (bound && waitForPort(tls_port_, milliseconds(5000)) &&
        waitForPort(http_port_, milliseconds(5000)))
      return;
    last_error = readFile(d + "/error.log") + process_->logTail();
    process_->stop(milliseconds(1000));
    process_.reset();
    if (last_error.find("Address already in use") == std::string::npos) break;
  }
  throw std::runtime_error("nginx did not start:\n" + last_error);
}

}  // namespace h2gate::test
