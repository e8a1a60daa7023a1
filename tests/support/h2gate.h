// Runs the h2gate binary for a test and reads what it says.
//
// Ports: h2gate is started with port 0 and the fixture parses the bound ports
// from its stderr ("listening on 127.0.0.1:PORT (listener NAME)",
// "admin listening on 127.0.0.1:PORT"). Access log lines (one JSON object per
// line) are read from its stdout.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/peer_logs.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace h2gate::test {

// One access log line: field name -> value (strings unquoted, numbers and
// literals as written).
struct AccessLogEntry {
  std::map<std::string, std::string> fields;
  std::string line;
  std::string get(const std::string& key) const;
  long long num(const std::string& key) const;  // -1 when absent or not a number
};

// Parses one flat JSON object; nullopt when it is not one.
std::optional<std::map<std::string, std::string>> parseJsonObject(const std::string& text);

class H2gate {
 public:
  struct Options {
    // $H2GATE_TEST_BINARY, when set, wins (to run the suite against another
    // build or an installed h2gate); else this; else $H2GATE_BINARY; else
    // "h2gate" from PATH.
    std::string binary;
    // YAML config written to <dir>/h2gate.yaml and passed with -c. Empty: no -c.
    std::string yaml;
    // Used when `yaml` is empty and `args` is empty:
    //   --listen 127.0.0.1:0 --admin 127.0.0.1:0 --log-level debug
    std::vector<std::string> args;
    std::map<std::string, std::optional<std::string>> env;
    // /etc/hosts lines for h2gate alone ("127.0.0.1 web.internal.test"):
    // h2gate then runs in a mount namespace of its own with this file bound
    // over /etc/hosts (unshare -m; needs root). Empty: the machine's.
    std::string hosts;
    // /etc/resolv.conf for h2gate alone (e.g. "search corp.example.test\n"),
    // bound the same way. Empty: the machine's.
    std::string resolv_conf;
    // Listener names to wait for; empty: wait for the first listener line.
    std::vector<std::string> listeners;
    bool expect_admin = true;
    milliseconds start_timeout{10000};
    // At destruction: SIGTERM, then CHECK (Catch2) that h2gate exited 0
    // within 10 s and printed no sanitizer report. Tests that kill it on
    // purpose reap it themselves (then nothing is checked).
    bool check_clean_exit = true;
  };

  H2gate();  // default Options: direct mode on ephemeral ports
  explicit H2gate(Options options);
  ~H2gate();

  // Port of the named listener (default: the first one that logged).
  uint16_t port(const std::string& listener = "") const;
  uint16_t adminPort() const { return admin_port_; }
  // "http://127.0.0.1:PORT" for curl -x.
  std::string proxyUrl(const std::string& listener = "") const;

  Process& process() { return *process_; }
  const TempDir& dir() const { return dir_; }
  std::string stderrText() const { return process_->stderrText(); }

  // Access log lines so far (stdout), parsed; lines that are not JSON are skipped.
  std::vector<AccessLogEntry> accessLog() const;
  // Polls until at least `n` access log lines exist; returns them (maybe fewer
  // on timeout).
  std::vector<AccessLogEntry> waitForAccessLog(size_t n, milliseconds timeout = milliseconds(5000));

  // Sanitizer reports (ASan, LSan, UBSan) and illegal phase transitions
  // (gateway/upstream/phase.h) in its stderr, "" when none.
  std::string sanitizerReport() const;
  // Whether the running h2gate is an AddressSanitizer build (GCC's: libasan in
  // its memory map; clang's, linked in statically: its runtime's name in the
  // executable): its shadow memory and quarantine make RSS bounds meaningless.
  // Asked of the process, not of the test program's own build, since the ASan
  // stage runs the release test programs against an ASan h2gate.
  bool sanitized() const;

  // SIGTERM to the h2gate process; returns its exit status (SIGKILL after `timeout`).
  ExitStatus terminate(milliseconds timeout = milliseconds(10000));

  // Writes a YAML file next to the fixture's files (for --validate tests).
  std::string writeFile(const std::string& name, const std::string& content) const {
    return dir_.write(name, content);
  }

  // Resolves the binary the same way the fixture does.
  static std::string binaryPath(const std::string& configured);
  // The PAC probe (tests/tools/pac_probe.cc): $H2GATE_TEST_PAC_PROBE when
  // set (the ASan stage's), else `configured`.
  static std::string pacProbePath(const std::string& configured);

 private:
  bool check_clean_exit_ = true;
  TempDir dir_;  // outlives the process (its logs live here)
  PeerLog stderr_log_{"h2gate stderr", dir_.file("h2gate.stderr")};
  std::unique_ptr<Process> process_;
  std::map<std::string, uint16_t> ports_;
  std::string first_listener_;
  uint16_t admin_port_ = 0;
};

// A direct-mode config: admin and one listener "local_proxy" on 127.0.0.1:0
// with the access_log + forward_proxy filters. `h2gate_section` is inserted
// under the top-level `h2gate:` key (e.g. "  drain_timeout: 2s\n");
// `listener_fields` under the listener, indented 4 (e.g.
// "    max_connections: 5\n").
std::string directModeYaml(const std::string& h2gate_section = "",
                           const std::string& listener_fields = "");

// One item of static_resources.listeners: `name` on 127.0.0.1:0 with
// `listener_fields` (indented 4, e.g. "    max_connections: 5\n"), its one
// filter chain the access_log filter and then `filters` (lines of
// filter_chains[0].filters, indented 6).
std::string listenerYaml(const std::string& name, const std::string& filters,
                         const std::string& listener_fields = "");

}  // namespace h2gate::test
