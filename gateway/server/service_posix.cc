#include <iostream>

#include "gateway/server/service.h"

namespace h2gate::service {
namespace {

int unsupported() {
  std::cerr << "h2gate: service: Windows only; on Linux systemd runs h2gate "
               "(deploy/debian/h2gate.service)\n";
  return 2;
}

}  // namespace

int install(const std::vector<std::string>&) {
  return unsupported();
}

int uninstall() {
  return unsupported();
}

int run(const Serve&) {
  return unsupported();
}

std::optional<Installed> installed() {
  return std::nullopt;
}

std::string defaultLogFile() {
  return {};
}

}  // namespace h2gate::service
