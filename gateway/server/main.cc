// h2gate: a local forward proxy that carries apps' traffic to upstream HTTPS
// proxies over HTTP/2 (or, with no upstream configured, straight to the
// destinations). main() only wires flags, config and the server together.
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <nghttp2/nghttp2ver.h>
#include <openssl/opensslv.h>

#include "gateway/base/log.h"
#include "gateway/check/check.h"
#include "gateway/metrics/cells.h"
#include "gateway/net/fd_limit.h"
#include "gateway/pac_engine/worker.h"
#include "gateway/server/autostart.h"
#include "gateway/server/cli.h"
#include "gateway/server/credentials_command.h"
#include "gateway/server/run_as.h"
#include "gateway/server/server.h"
#include "gateway/server/server_signals.h"
#include "gateway/server/service.h"
#include "gateway/upstream/auth/mechanism.h"

int main(int argc, char** argv) {
  using namespace h2gate;
  // h2gate started again by itself to run PAC files (gateway/pac_engine/worker.h).
  if (pac::isPacWorker(argc, argv)) return pac::runPacWorker();
  ServerSignals::prepareProcess();
  // `h2gate credentials set|show|delete`: the keyring, no config, no server.
  if (credentials::isCommand(argc, argv))
    return credentials::run(std::vector<std::string>(argv + 2, argv + argc), std::cout, std::cerr);

  std::optional<std::string> upstream_env;
  if (const char* v = std::getenv("H2GATE_UPSTREAM"); v && *v) upstream_env = v;
  const cli::ParseResult parsed = cli::parse(argc, argv, upstream_env.has_value());
  if (!parsed.ok()) {
    for (const auto& e : parsed.errors) std::cerr << "h2gate: " << e << "\n";
    std::cerr << "Run 'h2gate --help' for usage.\n";
    return 2;
  }
  const cli::Options& opts = parsed.options;
  if (opts.help) {
    std::cout << cli::usage();
    return 0;
  }
  if (opts.version) {
    std::cout << "h2gate " << H2GATE_VERSION << " (nghttp2 " << NGHTTP2_VERSION << ", "
              << OPENSSL_VERSION_TEXT << ")"
              << (metrics::kCellsOn ? "" : ", built with H2GATE_METRICS=OFF") << "\n";
    return 0;
  }
  if (opts.log_level) {
    log::Level level;
    if (!log::parseLevel(*opts.log_level, &level)) {
      std::cerr << "h2gate: --log-level: unknown level '" << *opts.log_level
                << "' (trace, debug, info, warn, error, off)\n";
      return 2;
    }
    log::setLevel(level);
  }

  config::LoadResult loaded = cli::buildBootstrap(opts, upstream_env);

  if (opts.validate) {
    for (const auto& p : loaded.problems) std::cout << p.str() << "\n";
    if (loaded.ok()) {
      std::cout << loaded.bootstrap.source << ": OK\n";
      return 0;
    }
    std::cout << loaded.problems.size() << " problem(s) in " << loaded.bootstrap.source << "\n";
    return 1;
  }
  if (opts.check) {
    if (!loaded.ok()) {
      for (const auto& p : loaded.problems) std::cout << p.str() << "\n";
      std::cout << "FAIL (config): " << loaded.problems.size() << " problem(s) in "
                << loaded.bootstrap.source << " — fix them (h2gate --validate -c FILE)\n";
      return 1;
    }
    // The gateway code it uses logs at debug level; only warnings and errors here
    // unless --log-level says otherwise.
    if (!opts.log_level) log::setLevel(log::Level::Warn);
    // As the daemon: NTLMv2 only (gss-ntlmssp), before any thread starts.
    if (const std::string note = upstream::auth::initPlatformAuth(); !note.empty())
      H2G_LOG(Warn, 0, 0, note);
    check::Options o;
    if (!opts.check_url.empty()) o.url = opts.check_url;
    for (run_as::Warning& w : run_as::checkWarnings(loaded.bootstrap))
      o.warnings.push_back({std::move(w.detail), std::move(w.advice)});
    if (opts.step_timeout) o.step_timeout = *opts.step_timeout;
    return check::run(loaded.bootstrap, o, std::cout);
  }
  if (opts.service == "install") {
    // The service would fail at its start with a bad config: say it now.
    if (!loaded.ok()) {
      for (const auto& p : loaded.problems) std::cerr << "h2gate: " << p.str() << "\n";
      std::cerr << "h2gate: service not installed: " << loaded.problems.size()
                << " configuration problem(s)\n";
      return 1;
    }
    return service::install(std::vector<std::string>(argv + 3, argv + argc));
  }
  if (opts.service == "uninstall") return service::uninstall();
  if (opts.autostart == "install") {
    // As for the service: a config that would fail at logon is refused now.
    if (!loaded.ok()) {
      for (const auto& p : loaded.problems) std::cerr << "h2gate: " << p.str() << "\n";
      std::cerr << "h2gate: autostart not installed: " << loaded.problems.size()
                << " configuration problem(s)\n";
      return 1;
    }
    return autostart::install(std::vector<std::string>(argv + 3, argv + argc));
  }
  if (opts.autostart == "uninstall") return autostart::uninstall();
  if (opts.autostart == "status") return autostart::status();

  // Without a console (a service, the start at logon) the log goes to a file.
  std::string log_file = opts.log_file;
  if (log_file.empty() && opts.service == "run") log_file = service::defaultLogFile();
  if (log_file.empty() && opts.autostart == "run") log_file = autostart::defaultLogFile();
  if (!log_file.empty()) {
    // Open for the rest of the process. (Not stderr replaced: a Windows
    // service has no standard handles, and its stderr cannot be reopened.)
    std::string error;
    if (!log::setOutputFile(log_file, opts.log_file_options, &error)) {
      std::cerr << "h2gate: --log-file " << error << "\n";
      return 1;
    }
  }
  // Started at logon: the console window Windows opened goes (the log is
  // in the file now).
  if (opts.autostart == "run")
    if (const std::string why = autostart::detachConsole(); !why.empty())
      H2G_LOG(Warn, 0, 0, "autostart run: " << why);

  // Single sign-on as LocalSystem is the computer's account: said at start
  // and at each reload (gateway/server/run_as.h).
  const std::string user_sid = run_as::processUserSid();
  auto warnAccount = [user_sid](const config::Bootstrap& b) {
    if (!run_as::isLocalSystem(user_sid)) return;
    if (const run_as::Warning w =
            run_as::localSystemWarning(run_as::singleSignOnProxies(b), "h2gate runs");
        !w.empty())
      H2G_LOG(Warn, 0, 0, w.line());
  };

  auto serve = [&](const std::function<void()>& running) -> int {
    if (!loaded.ok()) {
      if (!log_file.empty()) {  // into the log file: no console may see stderr
        for (const auto& p : loaded.problems) H2G_LOG(Error, 0, 0, p.str());
        H2G_LOG(Error, 0, 0,
                "not starting: " << loaded.problems.size() << " configuration problem(s)");
        return 1;
      }
      for (const auto& p : loaded.problems) std::cerr << "h2gate: " << p.str() << "\n";
      std::cerr << "h2gate: not starting: " << loaded.problems.size()
                << " configuration problem(s)\n";
      return 1;
    }

    if (!metrics::kCellsOn)
      H2G_LOG(Warn, 0, 0,
              "built with H2GATE_METRICS=OFF (a benchmark build): every metric reads zero");
    net::raiseFdLimitAndLog(loaded.bootstrap);
    // Before any other thread of h2gate's starts (it may set an environment
    // variable; a service's only other thread is the service manager's).
    if (const std::string note = upstream::auth::initPlatformAuth(); !note.empty())
      H2G_LOG(Warn, 0, 0, note);
    // A reload builds the configuration exactly as now: the same file, with
    // the same flags applied on top. Without -c there is nothing to re-read.
    if (!user_sid.empty()) H2G_LOG(Debug, 0, 0, "running as the user SID " << user_sid);
    warnAccount(loaded.bootstrap);
    Server::Reloader reloader;
    if (!opts.config_path.empty())
      reloader = [opts, upstream_env, warnAccount] {
        config::LoadResult r = cli::buildBootstrap(opts, upstream_env);
        if (r.ok()) warnAccount(r.bootstrap);
        return r;
      };
    Server server(std::move(loaded.bootstrap), std::move(reloader));
    if (std::string err = server.start(); !err.empty()) {
      H2G_LOG(Error, 0, 0, err);
      return 1;
    }
    running();
    return server.run();
  };
  if (opts.service == "run") return service::run(serve);
  return serve([] {});
}
