// What went wrong with a PAC file, in a form the caller can act on (apply the
// route's fallback, count it, log it once) rather than a bare string.
#pragma once

#include <string>

namespace h2gate::pac {

struct PacError {
  enum class Kind {
    None,
    NoScript,        // no PAC file has loaded yet (none configured, or every load failed)
    Syntax,          // the file does not compile (at load)
    NoFunction,      // it compiles but defines no FindProxyForURL (at load)
    Exception,       // the script threw (at load: its top-level code; or in FindProxyForURL)
    Timeout,         // ran past its time limit (an endless loop, slow DNS calls)
    Memory,          // its heap reached the memory limit
    BadReturn,       // FindProxyForURL returned something other than a string
    UnusableAnswer,  // a string with no entry h2gate can use ("SOCKS5 x:1080", "nonsense")
    Overloaded,      // too many evaluations waiting: not even queued
    TooLarge,        // the file is larger than the configured limit (at load)
    Shutdown,        // the evaluator was destroyed first
  };
  Kind kind = Kind::None;
  // One line for logs, e.g. "SyntaxError: parse error (line 3)".
  std::string message;

  bool ok() const { return kind == Kind::None; }
  explicit operator bool() const { return !ok(); }
};

// "syntax", "timeout", ... (for metrics labels and logs).
inline const char* kindName(PacError::Kind kind) {
  switch (kind) {
    case PacError::Kind::None:
      return "none";
    case PacError::Kind::NoScript:
      return "no_script";
    case PacError::Kind::Syntax:
      return "syntax";
    case PacError::Kind::NoFunction:
      return "no_function";
    case PacError::Kind::Exception:
      return "exception";
    case PacError::Kind::Timeout:
      return "timeout";
    case PacError::Kind::Memory:
      return "memory";
    case PacError::Kind::BadReturn:
      return "bad_return";
    case PacError::Kind::UnusableAnswer:
      return "unusable_answer";
    case PacError::Kind::Overloaded:
      return "overloaded";
    case PacError::Kind::TooLarge:
      return "too_large";
    case PacError::Kind::Shutdown:
      return "shutdown";
  }
  return "unknown";
}

}  // namespace h2gate::pac
