// `h2gate check [URL]`: walks the path a request for URL would take with
// this configuration, step by step, with the gateway's own code (the
// listener's filters choose the route; TlsContext, Transport, H2Connection /
// H2Stream and Http1Exchange carry it), and says what works or the first
// thing that fails and what to do about it. Needs no running daemon: it
// connects from this process.
#pragma once

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "config/config.h"

namespace h2gate::check {

// Used when no URL is given.
inline constexpr const char* kDefaultUrl = "https://example.com/";

struct Options {
  std::string url = kDefaultUrl;
  // The listener whose filters choose the route; empty: the first one.
  std::string listener;
  // Limit for each step that waits for the network (DNS, TCP and TLS to
  // the proxy use the cluster's connect_timeout instead, as the pool does).
  std::chrono::milliseconds step_timeout{10000};
  // Printed first, as WARN lines of the step "account": what the caller
  // knows of the account the daemon authenticates as (gateway/server/run_as.h:
  // LocalSystem with single sign-on), each what happens and what to do.
  struct Warning {
    std::string detail;
    std::string advice;
  };
  std::vector<Warning> warnings;
};

// Prints one line per step to `out` ("  ok    tls        4.2 ms  …"), then
// a last line "OK: …" or "FAIL (step): … — what to do". Returns the exit
// code: 0 when the request got an answer through the path, 1 otherwise.
// `bootstrap` MUST have been validated (config::validateAndBuild): its
// filters are used.
int run(const config::Bootstrap& bootstrap, const Options& options, std::ostream& out);

}  // namespace h2gate::check
