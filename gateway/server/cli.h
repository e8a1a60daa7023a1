// Command-line flags, and turning them into the same Bootstrap a YAML file
// would give. main.cc only wires these together, so everything here is
// unit-testable.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "config/loader.h"
#include "gateway/base/log.h"

namespace h2gate::cli {

struct Options {
  bool help = false;
  bool version = false;
  bool validate = false;  // --validate: check config, print every problem, exit 0/1
  bool check = false;     // `h2gate check [URL]`: diagnose the path (gateway/check/check.h)
  std::string check_url;  // its URL; empty: check::kDefaultUrl
  // --step-timeout DURATION (check only): how long one of its steps may wait
  // for a server in all (check::Options::step_timeout); unset: its default.
  std::optional<std::chrono::milliseconds> step_timeout;
  // `h2gate service ACTION`: "install", "uninstall" or "run" (what the
  // Windows service manager starts; gateway/server/service.h); empty otherwise.
  std::string service;
  // `h2gate autostart ACTION`: "install", "uninstall", "status" or "run"
  // (the per-user start at logon on Windows; gateway/server/autostart.h);
  // empty otherwise.
  std::string autostart;
  std::string log_file;  // --log-file FILE: log there (appended), not to stderr
  // --log-file-max-size SIZE (0: never rotate), --log-file-keep N: rotation
  // of the log file (log::setOutputFile).
  log::FileOptions log_file_options;
  std::string config_path;             // -c / --config FILE
  std::optional<std::string> listen;   // --listen HOST:PORT
  std::optional<std::string> admin;    // --admin HOST:PORT
  std::vector<std::string> upstreams;  // --upstream https://[user:pass@]HOST:PORT (repeatable)
  std::string cacert;                  // --cacert FILE
  bool insecure = false;               // --insecure (explicit only)
  // --proxy-auth SCHEME: auto, negotiate, ntlm or basic for the --upstream
  // cluster or the proxies the --pac/--wpad/--system-proxy PAC file names
  // (their proxy_authentication).
  std::optional<std::string> proxy_auth;
  // --pac URL|FILE, --wpad, --system-proxy: the default listener's route
  // follows a PAC file (a forward_proxy `pac:` route, as YAML would write
  // it; filters/pac_routing_config.h). At most one of them.
  enum class PacSource { None, Url, File, Wpad, System };
  PacSource pac = PacSource::None;
  std::string pac_flag;      // the flag that set it ("--pac", "--wpad", ...)
  std::string pac_location;  // --pac's URL, or its file as an absolute path
  // --proxy-auth-allow HOST|.SUFFIX|IP|* (repeatable, or a comma list): the
  // PAC route's proxies.authenticate_to; empty: its default (the PAC file's
  // own domain).
  std::vector<std::string> proxy_auth_allow;
  // --proxy-credentials keyring:NAME: --proxy-auth's user name and password
  // from keyring entry NAME (gateway/base/keyring.h), looked up with the
  // config (start, reload). The entry's name; empty: not given.
  std::string proxy_keyring;
  std::optional<uint32_t> concurrency;   // --concurrency N
  std::optional<std::string> log_level;  // --log-level LEVEL
  // --max-config-size SIZE: a larger config file is refused (start, reload).
  uint64_t max_config_bytes = config::kDefaultMaxConfigBytes;
  // --allow CIDR (repeatable): the first listener's source_prefix_ranges.
  std::vector<std::string> allow;
};

struct ParseResult {
  Options options;
  std::vector<std::string> errors;  // e.g. "--listen: expected HOST:PORT, got 'x'"
  bool ok() const { return errors.empty(); }
};

// `upstream_env`: $H2GATE_UPSTREAM is set (it may give the proxy that
// --proxy-auth is for).
ParseResult parse(int argc, const char* const* argv, bool upstream_env = false);
std::string usage();  // --help text

// Builds the Bootstrap: from -c FILE when given, else the built-in default.
// Then flags are applied on top (--listen replaces the first listener's
// address, --admin the admin address, --upstream adds a cluster per URL and
// routes the listeners' forward_proxy to it, --cacert/--insecure set the TLS
// of flag-made clusters, --proxy-auth their proxy_authentication; --pac,
// --wpad or --system-proxy give the first listener's forward_proxy a `pac:`
// route, with --cacert as its trusted_ca, --proxy-auth as its
// proxies.proxy_authentication and --proxy-auth-allow as its
// proxies.authenticate_to). --allow replaces the first listener's
// source_prefix_ranges.
// `upstream_env` is $H2GATE_UPSTREAM, used only when none of --upstream,
// --pac, --wpad, --system-proxy and
// -c was given. The result is validated and its filters built
// (gateway/server/load_config.h), as --validate, start-up and reload all need it.
config::LoadResult buildBootstrap(const Options& options,
                                  const std::optional<std::string>& upstream_env);

// Parses "https://[user:pass@]host:port" (port defaults to 443) into a
// cluster with TLS; "http://host[:port]" (default 80) gives a plain-TCP
// proxy cluster. Userinfo is percent-decoded into credentials. Returns an
// error message (never containing the password) or "" on success.
std::string parseUpstreamUrl(const std::string& url, config::Cluster* out);

// "HOST:PORT", "[v6]:PORT". Returns an error message or "".
std::string parseHostPort(const std::string& text, config::SocketAddress* out);

}  // namespace h2gate::cli
