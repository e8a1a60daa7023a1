#include "tests/support/hostile_server.h"

#include <stdexcept>

#include "tests/support/origin.h"
#include "tests/support/util.h"

namespace h2gate::test {
namespace {

const char* modeName(HostileServer::Mode m) {
  switch (m) {
    case HostileServer::Mode::Status:
      return "status";
    case HostileServer::Mode::Endless:
      return "endless";
    case HostileServer::Mode::Slow:
      return "slow";
    case HostileServer::Mode::Auth407:
      return "auth407";
  }
  return "status";
}

}  // namespace

HostileServer::HostileServer(Options options) : options_(std::move(options)), dir_("hostile") {
  Process::Options opts;
  opts.argv = {"python3",        supportDir() + "/hostile_server.py",
               "--mode",         modeName(options_.mode),
               "--status",       std::to_string(options_.status),
               "--reason-file",  dir_.write("reason", options_.reason),
               "--interval",     std::to_string(options_.interval_seconds),
               "--scheme-bytes", std::to_string(options_.scheme_bytes)};
  if (!options_.tls_cert.empty())
    opts.argv.insert(opts.argv.end(), {"--tls", options_.tls_cert, options_.tls_key});
  opts.log_dir = dir_.path().string();
  opts.name = "hostile_server";
  process_ = std::make_unique<Process>(std::move(opts));
  auto m = process_->waitForLog("listening on 127\\.0\\.0\\.1:([0-9]+)", kPeerStartTimeout,
                                Stream::Stdout);
  if (!m) throw std::runtime_error("hostile_server did not start:\n" + process_->logTail());
  port_ = static_cast<uint16_t>(std::stoi((*m)[1]));
}

HostileServer::~HostileServer() {
  if (process_) process_->stop(milliseconds(2000));
}

std::string HostileServer::url(const std::string& path) const {
  return std::string(options_.tls_cert.empty() ? "http" : "https") +
         "://127.0.0.1:" + std::to_string(port_) + path;
}

size_t HostileServer::requests() const {
  size_t n = 0;
  const std::string out = process_->stdoutText();
  for (size_t at = out.find("request "); at != std::string::npos; at = out.find("request ", at + 1))
    if (at == 0 || out[at - 1] == '\n') ++n;
  return n;
}

}  // namespace h2gate::test
