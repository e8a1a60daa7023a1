#include "tests/support/temp_dir.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
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
#ifdef _WIN32
  // No mkdtemp in the Windows C runtime (the Windows unit tests under wine):
  // a random name, created only if it does not exist yet.
  std::random_device rd;
  for (int attempt = 0;; ++attempt) {
    char suffix[16];
    std::snprintf(suffix, sizeof suffix, "%08x", rd());
    std::string p = templ.substr(0, templ.size() - 6) + suffix;
    std::error_code ec;
    if (std::filesystem::create_directory(p, ec)) {
      path_ = p;
      break;
    }
    if (attempt == 100) throw std::system_error(ec, "create_directory " + p);
  }
#else
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data()))
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + templ);
  path_ = buf.data();
#endif
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
