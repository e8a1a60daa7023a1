#include "tests/support/shape_server.h"

#include <chrono>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/support/h2gate.h"
#include "tests/support/origin.h"
#include "tests/support/util.h"

namespace h2gate::test {

ShapeServer::ShapeServer() : dir_("shapes") {
  Process::Options opts;
  opts.argv = {"python3", supportDir() + "/shape_server.py", "--port-file", dir_.file("port"),
               "--log",   dir_.file("requests.log")};
  opts.log_dir = dir_.path().string();
  opts.name = "shape_server";
  process_ = std::make_unique<Process>(std::move(opts));
  const auto deadline = std::chrono::steady_clock::now() + kPeerStartTimeout;
  while (std::chrono::steady_clock::now() < deadline && process_->running()) {
    const std::string p = readFile(dir_.file("port"));
    if (!p.empty()) {
      port_ = static_cast<uint16_t>(std::stoi(p));
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("shape_server.py did not start:\n" + process_->logTail());
}

ShapeServer::~ShapeServer() {
  if (process_) process_->stop(std::chrono::milliseconds(2000));
}

std::string ShapeServer::url(const std::string& shape) const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/s/" + shape;
}

std::string ShapeServer::logText() const {
  return readFile(dir_.file("requests.log")) + process_->logTail(10);
}

std::vector<std::map<std::string, std::string>> ShapeServer::requests() const {
  std::vector<std::map<std::string, std::string>> out;
  std::istringstream in(readFile(dir_.file("requests.log")));
  std::string line;
  while (std::getline(in, line))
    if (auto o = parseJsonObject(line)) out.push_back(std::move(*o));
  return out;
}

}  // namespace h2gate::test
