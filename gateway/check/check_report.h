// `h2gate check`'s output: one line per step with its time and verdict
// (Report), and the text it gives for TLS (certificate chains, what to do
// about a failed verification). Used by gateway/check/check.cc only.
//
// Every line is printed through config::escapeControls (the escaping of
// config errors): what a server sent (a reason phrase, a status line, a
// certificate's subject) cannot move the cursor, set the terminal's title,
// clear the screen or forge a line of its own. serverText() also shortens it.
#pragma once

#include <openssl/ssl.h>

#include <chrono>
#include <cstdio>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace h2gate::check {

using Clock = std::chrono::steady_clock;

// At most this many bytes of one piece of a server's text are shown.
inline constexpr size_t kShownServerBytes = 256;

// `text` (a server's bytes) fit for one line: escaped, and cut after
// `max` bytes with "... (N bytes)" saying how long it was.
std::string serverText(std::string_view text, size_t max = kShownServerBytes);

// One line per step; remembers the first failure and the warnings.
class Report {
 public:
  explicit Report(std::ostream& out) : out_(out) {}
  void begin() { started_ = Clock::now(); }
  void ok(const std::string& step, const std::string& detail) { line("ok", step, detail); }
  void note(const std::string& step, const std::string& detail) { line("--", step, detail); }
  void warn(const std::string& step, const std::string& detail, const std::string& advice = "") {
    line("WARN", step, detail);
    warnings_.push_back(step);
    if (!advice.empty()) out_ << std::string(31, ' ') << "-> " << printable(advice) << "\n";
  }
  // Returns false, so that a step can `return report.fail(...)`.
  bool fail(const std::string& step, const std::string& detail, const std::string& advice) {
    line("FAIL", step, detail);
    if (failure_.empty()) {
      failed_step_ = step;
      failed_detail_ = printable(detail);
      failure_ = "FAIL (" + step + "): " + failed_detail_ + " — " + printable(advice);
    }
    return false;
  }
  // A FAIL line that is not the verdict: the cause is told by the fail()
  // that follows it.
  void failLine(const std::string& step, const std::string& detail) { line("FAIL", step, detail); }
  bool failed() const { return !failure_.empty(); }
  const std::string& failure() const { return failure_; }
  // The step of the first failure: "dns", "tcp", "tls"... ("" none).
  const std::string& failedStep() const { return failed_step_; }
  // The daemon goes on to another endpoint or route after this failure of
  // `what`: it is remembered, no longer the verdict.
  void recover(const std::string& what) {
    tried_.push_back(what + ": " + failed_step_ + ": " + failed_detail_);
    failure_.clear();
    failed_step_.clear();
    failed_detail_.clear();
  }
  const std::vector<std::string>& tried() const { return tried_; }
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  // config::escapeControls: also what check itself wrote is kept to one
  // line, whatever a server's bytes in it.
  static std::string printable(std::string_view text);
  void line(const char* verdict, const std::string& step, const std::string& detail) {
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - started_).count();
    char head[64];
    std::snprintf(head, sizeof head, "  %-5s %-11s %8.1f ms  ", verdict, step.c_str(), ms);
    out_ << head << printable(detail) << "\n" << std::flush;
    started_ = Clock::now();
  }
  std::ostream& out_;
  Clock::time_point started_ = Clock::now();
  std::string failure_;
  std::string failed_step_;
  std::string failed_detail_;
  std::vector<std::string> tried_;
  std::vector<std::string> warnings_;
};

// OpenSSL's error queue as text (and emptied).
std::string opensslErrors();
// "CN=proxy.example (issuer CN=Corp CA, until Jan  1 00:00:00 2030 GMT) <- …"
std::string chainText(SSL* ssl);
// What a user can do about a failed certificate verification (`result`:
// X509_V_ERR_*) of `host`.
std::string verifyAdvice(long result, const std::string& host);

}  // namespace h2gate::check
