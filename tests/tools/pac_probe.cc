// pac_probe: h2gate's PAC engine from the command line, for the tests that
// must run it inside a mount namespace (its own /etc/hosts and
// /etc/resolv.conf) or beside another engine.
//
//   pac_probe eval --pac FILE --queries FILE [--now-ms MS] [--my-ip A,B] [--timeout-ms MS]
//       Loads the PAC file into a PacEvaluator (system resolver, cache off)
//       and answers each "URL HOST" line of the queries file with one line:
//       what FindProxyForURL returned, or "ERROR <kind>: <message>".
//       --now-ms fixes Date's clock; --my-ip what myIpAddress() sees.
//
//   pac_probe source (wpad | system | url URL | file PATH) [--query "URL HOST"]...
//       Runs one attempt of that PAC source (gateway/pac_engine/source.h) and
//       prints "origin: ...", "sha256: ..." and "error: ..." lines, then
//       the answer to each --query, as `eval` does.
//
// Exit status: 0 when it ran (whatever the answers), 1 when the source
// found no PAC file, 2 on bad usage or when the PAC file does not load.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <asio.hpp>

#include "gateway/pac_engine/evaluator.h"
#include "gateway/pac_engine/resolver.h"
#include "gateway/pac_engine/source.h"
#include "gateway/pac_engine/worker.h"

namespace {

using namespace h2gate;
using namespace std::chrono_literals;

// The system resolver, with this machine's addresses replaced.
class FixedLocalResolver : public pac::PacResolver {
 public:
  explicit FixedLocalResolver(std::vector<net::IpAddress> local) : local_(std::move(local)) {}
  std::vector<net::IpAddress> resolve(const std::string& host, bool v4_only, pac::Deadline deadline,
                                      std::string_view owner) override {
    return system_.resolve(host, v4_only, deadline, owner);
  }
  std::vector<net::IpAddress> localAddresses(pac::Deadline) override { return local_; }

 private:
  pac::SystemResolver system_;
  std::vector<net::IpAddress> local_;
};

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int usage(const std::string& why) {
  std::cerr << "pac_probe: " << why << "\n"
            << "usage: pac_probe eval --pac FILE --queries FILE [--now-ms MS] [--my-ip A,B]"
               " [--timeout-ms MS]\n"
               "       pac_probe source (wpad | system | url URL | file PATH) [--query \"URL "
               "HOST\"]...\n";
  return 2;
}

template <typename Pred>
void runUntil(asio::io_context& io, Pred done) {
  while (!done()) {
    io.restart();
    io.run_for(10ms);
  }
}

int evalCommand(const std::vector<std::string>& args) {
  std::string pac_file, queries_file;
  double now_ms = 0;
  std::vector<net::IpAddress> my_ips;
  bool fixed_ips = false;
  long timeout_ms = 5000;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (i + 1 >= args.size()) return usage("missing value after " + a);
    const std::string& v = args[++i];
    if (a == "--pac") {
      pac_file = v;
    } else if (a == "--queries") {
      queries_file = v;
    } else if (a == "--now-ms") {
      now_ms = std::stod(v);
    } else if (a == "--timeout-ms") {
      timeout_ms = std::stol(v);
    } else if (a == "--my-ip") {
      fixed_ips = true;
      std::stringstream ss(v);
      std::string item;
      while (std::getline(ss, item, ',')) {
        std::optional<net::IpAddress> ip = net::parseIp(item);
        if (!ip) return usage("--my-ip: '" + item + "' is not an address");
        my_ips.push_back(*ip);
      }
    } else {
      return usage("unknown option " + a);
    }
  }
  if (pac_file.empty() || queries_file.empty()) return usage("--pac and --queries are required");

  pac::PacEnvironment env;
  if (fixed_ips)
    env.resolver = std::make_shared<FixedLocalResolver>(my_ips);
  else
    env.resolver = std::make_shared<pac::SystemResolver>();
  if (now_ms > 0) env.clock = [now_ms] { return now_ms; };
  pac::PacEvaluator::Options options;
  options.name = "probe";
  options.cache_entries = 0;
  options.timeout = std::chrono::milliseconds(timeout_ms);
  asio::io_context io;  // outlives the evaluator, which posts to it
  pac::PacEvaluator evaluator(options, env);

  std::optional<pac::PacError> loaded;
  evaluator.setScript(pac::makeScript(readAll(pac_file), pac_file), io.get_executor(),
                      [&](pac::PacError e) { loaded = std::move(e); });
  runUntil(io, [&] { return loaded.has_value(); });
  if (*loaded) {
    std::cerr << "pac_probe: " << pac_file << ": " << pac::kindName(loaded->kind) << ": "
              << loaded->message << "\n";
    return 2;
  }

  std::ifstream queries(queries_file);
  std::string line;
  while (std::getline(queries, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t space = line.find(' ');
    pac::PacQuery q;
    q.url = line.substr(0, space);
    q.host = space == std::string::npos ? "" : line.substr(space + 1);
    q.cache_key = line;
    std::optional<pac::PacResult> r;
    evaluator.evaluate(q, io.get_executor(), [&](pac::PacResult x) { r = std::move(x); });
    runUntil(io, [&] { return r.has_value(); });
    if (r->error && r->error.kind != pac::PacError::Kind::UnusableAnswer)
      std::cout << "ERROR " << pac::kindName(r->error.kind) << ": " << r->error.message << "\n";
    else
      std::cout << r->answer << "\n";  // the raw string, as pacparser prints it
  }
  return 0;
}

int sourceCommand(const std::vector<std::string>& args) {
  if (args.empty()) return usage("source: which one?");
  pac::PacSourceConfig config;
  config.name = "probe";
  config.refresh_interval = std::chrono::milliseconds(0);
  std::size_t i = 1;
  if (args[0] == "wpad") {
    config.kind = pac::PacSourceConfig::Kind::Wpad;
  } else if (args[0] == "system") {
    config.kind = pac::PacSourceConfig::Kind::System;
  } else if ((args[0] == "url" || args[0] == "file") && args.size() > 1) {
    config.kind =
        args[0] == "url" ? pac::PacSourceConfig::Kind::Url : pac::PacSourceConfig::Kind::File;
    config.location = args[1];
    i = 2;
  } else {
    return usage("source: unknown kind " + args[0]);
  }
  std::vector<std::string> queries;
  for (; i < args.size(); ++i) {
    if (args[i] != "--query" || i + 1 >= args.size()) return usage("unexpected " + args[i]);
    queries.push_back(args[++i]);
  }
  asio::io_context io;
  std::shared_ptr<pac::PacScript> script;
  pac::PacSource source(config, io.get_executor(),
                        [&](std::shared_ptr<pac::PacScript> s) { script = s; });
  source.start();
  runUntil(io, [&] {
    const pac::PacSourceStatus st = source.status();
    return script != nullptr || st.failures > 0;
  });
  const pac::PacSourceStatus st = source.status();
  std::cout << "origin: " << st.origin << "\n"
            << "sha256: " << st.sha256 << "\n"
            << "error: " << st.last_error << "\n";
  if (!script) return 1;

  pac::PacEnvironment env;
  env.resolver = std::make_shared<pac::SystemResolver>();
  pac::PacEvaluator::Options options;
  options.name = "probe";
  options.cache_entries = 0;
  pac::PacEvaluator evaluator(options, env);
  std::optional<pac::PacError> loaded;
  evaluator.setScript(script, io.get_executor(), [&](pac::PacError e) { loaded = std::move(e); });
  runUntil(io, [&] { return loaded.has_value(); });
  if (*loaded) {
    std::cout << "load error: " << pac::kindName(loaded->kind) << ": " << loaded->message << "\n";
    return 2;
  }
  for (const std::string& line : queries) {
    const std::size_t space = line.find(' ');
    pac::PacQuery q;
    q.url = line.substr(0, space);
    q.host = space == std::string::npos ? "" : line.substr(space + 1);
    q.cache_key = line;
    std::optional<pac::PacResult> r;
    evaluator.evaluate(q, io.get_executor(), [&](pac::PacResult x) { r = std::move(x); });
    runUntil(io, [&] { return r.has_value(); });
    std::cout << "answer: "
              << (r->error ? std::string("ERROR ") + pac::kindName(r->error.kind) : r->answer)
              << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Its PacEvaluator starts this binary again as its PAC worker processes.
  if (h2gate::pac::isPacWorker(argc, argv)) return h2gate::pac::runPacWorker();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usage("no command");
  const std::string command = args.front();
  args.erase(args.begin());
  try {
    if (command == "eval") return evalCommand(args);
    if (command == "source") return sourceCommand(args);
  } catch (const std::exception& e) {
    return usage(e.what());
  }
  return usage("unknown command " + command);
}
