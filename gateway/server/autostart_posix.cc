#include <iostream>

#include "gateway/server/autostart.h"

namespace h2gate::autostart {
namespace {

int unsupported() {
  std::cerr << "h2gate: autostart: Windows only; on Linux a systemd user unit starts h2gate "
               "as you (deploy/README.md)\n";
  return 2;
}

}  // namespace

int install(const std::vector<std::string>&) {
  return unsupported();
}

int uninstall() {
  return unsupported();
}

int status() {
  return unsupported();
}

std::string detachConsole() {
  return {};
}

std::string defaultLogFile() {
  return {};
}

}  // namespace h2gate::autostart
