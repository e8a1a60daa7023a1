#include "tests/support/temp_dir.h"

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace h2gate::test {

bool keepTestDirs() {
  return std::getenv("H2GATE_KEEP_TEST_DIRS") != nullptr;
}

TempDir::TempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string base = (tmp && *tmp) ? tmp : "/tmp";
  std::string templ = base + "/h2gate-" + prefix + "-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data()))
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + templ);
  path_ = buf.data();
}

TempDir::~TempDir() {
  if (keepTestDirs()) {
    std::cerr << "H2GATE_KEEP_TEST_DIRS: kept " << path_ << "\n";
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::write(const std::string& name, const std::string& content) const {
  std::string p = file(name);
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  if (!out) throw std::runtime_error("cannot write " + p);
  return p;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace h2gate::test
