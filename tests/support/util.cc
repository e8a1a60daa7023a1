#include "tests/support/util.h"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <regex.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace h2gate::test {

namespace {

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr);
  }
  void update(const void* data, size_t n) { EVP_DigestUpdate(ctx_.get(), data, n); }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_.get(), md, &len);
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < len; ++i) {
      out += digits[md[i] >> 4];
      out += digits[md[i] & 15];
    }
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

}  // namespace

std::optional<std::vector<std::string>> regexSearch(const std::string& text,
                                                    const std::string& ere) {
  regex_t re;
  int rc = regcomp(&re, ere.c_str(), REG_EXTENDED | REG_NEWLINE);
  if (rc != 0) {
    char buf[256];
    regerror(rc, &re, buf, sizeof buf);
    throw std::invalid_argument("bad regex '" + ere + "': " + buf);
  }
  std::vector<regmatch_t> m(re.re_nsub + 1);
  std::optional<std::vector<std::string>> out;
  if (regexec(&re, text.c_str(), m.size(), m.data(), 0) == 0) {
    out.emplace();
    for (const auto& g : m)
      out->push_back(g.rm_so < 0 ? std::string()
                                 : text.substr(static_cast<size_t>(g.rm_so),
                                               static_cast<size_t>(g.rm_eo - g.rm_so)));
  }
  regfree(&re);
  return out;
}

std::string regexEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::string_view(".[]{}()\\*+?^$|").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

size_t countOccurrences(const std::string& text, const std::string& needle) {
  if (needle.empty()) return 0;
  size_t n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos;
       pos = text.find(needle, pos + needle.size()))
    ++n;
  return n;
}

std::string patternBytes(size_t n) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>((i * 7 + i / 251) % 256);
  return out;
}

std::string sha256Hex(const std::string& data) {
  Sha256 h;
  h.update(data.data(), data.size());
  return h.hex();
}

std::string sha256File(const std::string& path) {
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) return "";
  Sha256 h;
  std::vector<char> buf(1 << 20);
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) h.update(buf.data(), n);
  fclose(f);
  return h.hex();
}

std::string makeRandomFile(const std::string& path, uint64_t size) {
  std::string tmp = path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + tmp);
  Sha256 h;
  std::vector<unsigned char> buf(1 << 20);
  for (uint64_t left = size; left > 0;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
    RAND_bytes(buf.data(), static_cast<int>(n));
    fwrite(buf.data(), 1, n, f);
    h.update(buf.data(), n);
    left -= n;
  }
  if (fclose(f) != 0) throw std::runtime_error("write failed: " + tmp);
  std::rename(tmp.c_str(), path.c_str());
  return h.hex();
}

const std::string& testDataDir() {
  // Destroyed at exit, with the files (unless H2GATE_KEEP_TEST_DIRS).
  static TempDir dir("data");
  static const std::string path = dir.path().string();
  return path;
}

const TestFile& testFile(std::string_view name_view) {
  static std::mutex mutex;
  static std::map<std::string, TestFile> files;
  static const std::map<std::string, uint64_t> sizes = {
      {"1k", 1024}, {"1m", 1 << 20}, {"10m", 10 << 20}, {"64m", 64 << 20}};
  const std::string name(name_view);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = files.find(name);
  if (it != files.end()) return it->second;
  auto size = sizes.find(name);
  if (size == sizes.end()) throw std::invalid_argument("no test file named " + name);
  TestFile f{name, testDataDir() + "/" + name, size->second, ""};
  f.sha256 = makeRandomFile(f.path, f.size);
  return files.emplace(name, f).first->second;
}

std::string curlBinary() {
  const char* env = std::getenv("H2GATE_TEST_CURL");
  return env && *env ? env : "curl";
}

CommandResult runCommand(const std::vector<std::string>& argv, milliseconds timeout) {
  return runCommand(argv, {}, timeout);
}

CommandResult runCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::optional<std::string>>& env,
                         milliseconds timeout) {
  TempDir dir("cmd");
  Process::Options opts;
  opts.argv = argv;
  opts.log_dir = dir.path().string();
  opts.name = "cmd";
  for (const char* v : {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy",
                        "ALL_PROXY", "no_proxy", "NO_PROXY", "H2GATE_UPSTREAM"})
    opts.env[v] = std::nullopt;
  for (const auto& [k, v] : env) opts.env[k] = v;
  Process p(std::move(opts));
  CommandResult r;
  auto status = p.wait(timeout);
  if (!status) {
    r.timed_out = true;
    status = p.stop(milliseconds(500));
  }
  if (status->exited && !r.timed_out) r.exit_code = status->code;
  r.out = p.stdoutText();
  r.err = p.stderrText();
  return r;
}

CommandResult runCurl(const std::vector<std::string>& args, milliseconds timeout) {
  std::vector<std::string> argv{curlBinary(), "-q"};
  argv.insert(argv.end(), args.begin(), args.end());
  return runCommand(argv, timeout);
}

bool waitForFileSize(const std::string& path, uintmax_t bytes, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::error_code ec;
    if (std::filesystem::file_size(path, ec) >= bytes && !ec) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return false;
}

uint64_t fileSize(const std::string& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : n;
}

}  // namespace h2gate::test
