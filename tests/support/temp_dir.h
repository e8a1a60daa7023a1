// A throwaway directory for one fixture or test. Removed recursively when the
// TempDir is destroyed, unless the environment variable H2GATE_KEEP_TEST_DIRS
// is set (then its path is printed to stderr so a failing run can be
// inspected).
#pragma once

#include <filesystem>
#include <string>

namespace h2gate::test {

class TempDir {
 public:
  // Creates $TMPDIR/h2gate-<prefix>-XXXXXX (TMPDIR defaults to /tmp).
  // Throws std::runtime_error when it cannot.
  explicit TempDir(const std::string& prefix = "test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // path() / name, as a string (for argv and config files).
  std::string file(const std::string& name) const { return (path_ / name).string(); }

  // Writes `content` to path()/name and returns the full path.
  std::string write(const std::string& name, const std::string& content) const;

 private:
  std::filesystem::path path_;
};

// Whole file as a string ("" when it cannot be read).
std::string readFile(const std::string& path);

// True when H2GATE_KEEP_TEST_DIRS is set (to anything).
bool keepTestDirs();

}  // namespace h2gate::test
