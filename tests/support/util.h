// Hashing, shared random test files and running curl.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace h2gate::test {

using std::chrono::milliseconds;

// POSIX extended regular expression search (not std::regex: GCC 12 gives
// false -Wmaybe-uninitialized errors for it in -O2 sanitizer builds).
// Returns the whole match and each capture group ("" for a group that did not
// take part), or nullopt when there is no match. Throws std::invalid_argument
// for a bad pattern. `^`/`$` match at line starts/ends.
std::optional<std::vector<std::string>> regexSearch(const std::string& text,
                                                    const std::string& ere);
// `text` with ERE metacharacters escaped, for building patterns from paths.
std::string regexEscape(const std::string& text);
// Number of non-overlapping occurrences of `needle` in `text`.
size_t countOccurrences(const std::string& text, const std::string& needle);
// Whether `text` contains `needle`.
inline bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}
inline std::string str(uint64_t n) {
  return std::to_string(n);
}
// "a, b, c".
inline std::string join(const std::set<std::string>& items) {
  std::string out;
  for (const auto& x : items) out += (out.empty() ? "" : ", ") + x;
  return out;
}

using Clock = std::chrono::steady_clock;
inline double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The size of the file at `path`; 0 when it cannot be read.
uint64_t fileSize(const std::string& path);

// Lower-case hex SHA-256.
std::string sha256Hex(const std::string& data);
// "" when the file cannot be read.
std::string sha256File(const std::string& path);

// The upload sink's pattern data (GET /chunked/N, /close/N): byte i is
// (i * 7 + i / 251) % 256. Not periodic with any small period, so shifted or
// dropped bytes change it.
std::string patternBytes(size_t n);

// Random files shared by every test of one test-binary run, in one directory
// (an nginx root): "1k" (1 KiB), "1m" (1 MiB), "10m" (10 MiB), "64m" (64 MiB).
// Each is generated on first use and its SHA-256 cached. The name is taken by
// value (a string_view): GCC 14's -Wdangling-reference takes a function that
// returns a reference and binds a temporary string to a reference parameter for
// one returning a part of that temporary.
struct TestFile {
  std::string name;  // URL path component, e.g. "1m"
  std::string path;
  uint64_t size = 0;
  std::string sha256;
};
const TestFile& testFile(std::string_view name);
// Directory holding the test files (created on first call).
const std::string& testDataDir();
// Makes a random file of `size` bytes at `path`; returns its SHA-256.
std::string makeRandomFile(const std::string& path, uint64_t size);

// How long a test waits for a peer it starts (nginx, squid, nghttpx, the
// KDC, Prometheus, the Python fixtures) to be ready. A bound against a peer
// that never starts, not a measure: each start returns as soon as its peer
// is ready. On 2 cores at load 20 (the integration suite in a loop beside
// the whole test command) python3 took over 10 s to print its first line.
inline constexpr std::chrono::seconds kPeerStartTimeout{60};
// How long a test waits for h2gate's first load of a PAC file ("using the
// PAC file from"): a fetch, a PAC worker process started and the script
// compiled. 10 s ran out in the ASan build at load 20 on 2 cores; as above,
// a bound that returns as soon as the file is in use.
inline constexpr std::chrono::seconds kPacLoadTimeout{60};

struct CommandResult {
  int exit_code = -1;  // -1 when killed (timeout or signal)
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs curl (from PATH, or the binary named by $H2GATE_TEST_CURL) with `args`,
// killing it after `timeout`. `-q` (ignore .curlrc) is passed first and the
// proxy environment variables are cleared, so only `args` decide. Stdout and
// stderr are captured (do not print 64 MiB to stdout: use -o).
CommandResult runCurl(const std::vector<std::string>& args,
                      milliseconds timeout = milliseconds(60000));

// Runs any program the same way (argv[0] from PATH).
CommandResult runCommand(const std::vector<std::string>& argv,
                         milliseconds timeout = milliseconds(60000));
// The same with variables set (or, with nullopt, unset) on top.
CommandResult runCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::optional<std::string>>& env,
                         milliseconds timeout = milliseconds(60000));

// Whether this process may make mount namespaces (root): H2gate::Options::hosts
// needs one of h2gate's own.
inline bool haveMountNamespaces() {
  return runCommand({"unshare", "-m", "true"}, std::chrono::milliseconds(5000)).exit_code == 0;
}

// The curl binary runCurl uses.
std::string curlBinary();

// Polls until the file at `path` has at least `bytes` bytes (a transfer is
// under way); false on timeout.
bool waitForFileSize(const std::string& path, uintmax_t bytes, milliseconds timeout);

}  // namespace h2gate::test
