// pac_bench: what a PAC evaluation costs, for a 50-rule PAC file.
// Figures, not a test: prints microseconds per evaluation
//
//   engine      FindProxyForURL in one Duktape heap, called directly
//               (PacContext::findProxy): the JavaScript alone
//   cold        PacEvaluator::evaluate with the cache off: a worker thread,
//               the JavaScript, the callback posted back, one at a time
//   cold x N    the same with N evaluations in flight (throughput per
//               evaluation across the worker threads)
//   cached      PacEvaluator::cached(): the answer cache, synchronously
//   cached+post PacEvaluator::evaluate() answered from the cache (the
//               callback posted to the caller's io_context)
//
//   build/tests/pac_bench [--iterations N] [--threads T]
//
// The rules use no DNS (names, shell patterns, literal addresses), as a
// company's domain list does; every query falls through all 50 rules or
// matches one of the last ones, the worst case.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <asio.hpp>

#include "gateway/pac_engine/evaluator.h"
#include "gateway/pac_engine/resolver.h"
#include "gateway/pac_engine/worker.h"

namespace {

using namespace h2gate;
using Clock = std::chrono::steady_clock;

std::string fiftyRules() {
  std::string s =
      "// 50 rules: internal domains direct, partners and regions to their proxies.\n"
      "function FindProxyForURL(url, host) {\n"
      "  host = host.toLowerCase();\n"
      "  if (isPlainHostName(host)) return \"DIRECT\";\n";
  for (int i = 0; i < 20; ++i)
    s += "  if (dnsDomainIs(host, \".dept" + std::to_string(i) +
         ".corp.example\")) return \"DIRECT\";\n";
  for (int i = 0; i < 15; ++i)
    s += "  if (shExpMatch(host, \"*.partner" + std::to_string(i) +
         ".example\")) return \"PROXY partner-gw.corp.example:3128\";\n";
  for (int i = 0; i < 10; ++i)
    s += "  if (/^\\d+\\.\\d+\\.\\d+\\.\\d+$/.test(host) && isInNet(host, \"10." +
         std::to_string(i) + ".0.0\", \"255.255.0.0\")) return \"DIRECT\";\n";
  for (int i = 0; i < 4; ++i)
    s += "  if (shExpMatch(url, \"http://*.region" + std::to_string(i) +
         ".example/*\")) return \"PROXY region" + std::to_string(i) + ".corp.example:8080\";\n";
  s += "  return \"PROXY proxy1.corp.example:8080; PROXY proxy2.corp.example:8080; DIRECT\";\n}\n";
  return s;
}

std::vector<pac::PacQuery> queries(int n) {
  std::vector<pac::PacQuery> out;
  for (int i = 0; i < n; ++i) {
    const std::string host = i % 3 == 0   ? "www.site" + std::to_string(i) + ".example"
                             : i % 3 == 1 ? "api.partner14.example"
                                          : "cdn.region3.example";
    pac::PacQuery q = pac::PacQuery::forRequest(i % 2 ? "https" : "http", host, i % 2 ? 443 : 80,
                                                "/path/" + std::to_string(i));
    out.push_back(q);
  }
  return out;
}

double usPer(Clock::duration d, long n) {
  return std::chrono::duration<double, std::micro>(d).count() / static_cast<double>(n);
}

template <typename Pred>
void runUntil(asio::io_context& io, Pred done) {
  while (!done()) {
    if (io.stopped()) io.restart();
    io.run_one();
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Its PacEvaluator starts this binary again as its PAC worker processes.
  if (h2gate::pac::isPacWorker(argc, argv)) return h2gate::pac::runPacWorker();
  long iterations = 20000;
  unsigned threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--iterations")
      iterations = std::stol(argv[i + 1]);
    else if (a == "--threads")
      threads = static_cast<unsigned>(std::stoul(argv[i + 1]));
  }
  const std::string script = fiftyRules();
  const std::vector<pac::PacQuery> qs = queries(1000);
  pac::PacEnvironment env;
  env.resolver = std::make_shared<pac::SystemResolver>();

  // The engine alone.
  pac::PacContext ctx(env);
  if (pac::PacError e = ctx.load(script, "bench.pac", Clock::now() + std::chrono::seconds(10))) {
    std::cerr << "pac_bench: " << e.message << "\n";
    return 1;
  }
  for (int i = 0; i < 1000; ++i)
    (void)ctx.findProxy(qs[i % qs.size()].url, qs[i % qs.size()].host, Clock::time_point::max());
  auto t0 = Clock::now();
  std::size_t sink = 0;
  for (long i = 0; i < iterations; ++i) {
    const pac::PacQuery& q = qs[static_cast<std::size_t>(i) % qs.size()];
    sink += ctx.findProxy(q.url, q.host, Clock::time_point::max()).text.size();
  }
  const double engine = usPer(Clock::now() - t0, iterations);

  asio::io_context io;
  auto load = [&](pac::PacEvaluator& ev) {
    std::optional<pac::PacError> loaded;
    ev.setScript(pac::makeScript(script, "bench.pac"), io.get_executor(),
                 [&](pac::PacError e) { loaded = e; });
    runUntil(io, [&] { return loaded.has_value(); });
    return loaded->ok();
  };

  // Cold: no cache, one at a time.
  pac::PacEvaluator::Options cold_opts;
  cold_opts.threads = threads;
  cold_opts.cache_entries = 0;
  cold_opts.max_queue = 100000;
  pac::PacEvaluator cold(cold_opts, env);
  if (!load(cold)) return 1;
  const long cold_n = std::max(1L, iterations / 4);
  t0 = Clock::now();
  for (long i = 0; i < cold_n; ++i) {
    bool done = false;
    pac::PacQuery q = qs[static_cast<std::size_t>(i) % qs.size()];
    q.cache_key += "#" + std::to_string(i);  // no coalescing either
    cold.evaluate(q, io.get_executor(), [&](pac::PacResult r) {
      sink += r.answer.size();
      done = true;
    });
    runUntil(io, [&] { return done; });
  }
  const double cold_serial = usPer(Clock::now() - t0, cold_n);

  // Cold, 64 in flight.
  t0 = Clock::now();
  long issued = 0, finished = 0;
  const long in_flight = 64;
  std::function<void()> issue = [&] {
    pac::PacQuery q = qs[static_cast<std::size_t>(issued) % qs.size()];
    q.cache_key += "#" + std::to_string(issued);
    ++issued;
    cold.evaluate(q, io.get_executor(), [&](pac::PacResult r) {
      sink += r.answer.size();
      ++finished;
      if (issued < cold_n) issue();
    });
  };
  for (long i = 0; i < in_flight && issued < cold_n; ++i) issue();
  runUntil(io, [&] { return finished == cold_n; });
  const double cold_parallel = usPer(Clock::now() - t0, cold_n);

  // Cached.
  pac::PacEvaluator::Options warm_opts;
  warm_opts.threads = threads;
  warm_opts.cache_ttl = std::chrono::hours(1);
  pac::PacEvaluator warm(warm_opts, env);
  if (!load(warm)) return 1;
  for (const pac::PacQuery& q : qs) {
    bool done = false;
    warm.evaluate(q, io.get_executor(), [&](pac::PacResult) { done = true; });
    runUntil(io, [&] { return done; });
  }
  t0 = Clock::now();
  long hits = 0;
  for (long i = 0; i < iterations; ++i)
    if (warm.cached(qs[static_cast<std::size_t>(i) % qs.size()])) ++hits;
  const double cached = usPer(Clock::now() - t0, iterations);
  t0 = Clock::now();
  for (long i = 0; i < iterations; ++i) {
    bool done = false;
    warm.evaluate(qs[static_cast<std::size_t>(i) % qs.size()], io.get_executor(),
                  [&](pac::PacResult r) {
                    sink += r.from_cache;
                    done = true;
                  });
    runUntil(io, [&] { return done; });
  }
  const double cached_post = usPer(Clock::now() - t0, iterations);

  std::printf("pac_bench: 50-rule PAC (%zu bytes), %u evaluation threads, %ld iterations\n",
              script.size(), threads, iterations);
  std::printf("  engine       %8.2f us per FindProxyForURL (one heap, direct call)\n", engine);
  std::printf("  cold         %8.2f us per evaluation (cache off, one at a time)\n", cold_serial);
  std::printf("  cold x %-3ld   %8.2f us per evaluation (cache off, %ld in flight)\n", in_flight,
              cold_parallel, in_flight);
  std::printf("  cached       %8.2f us per lookup (cached(), %ld/%ld hits)\n", cached, hits,
              iterations);
  std::printf(
      "  cached+post  %8.2f us per evaluation (evaluate() from the cache, callback posted)\n",
      cached_post);
  return sink == 0 ? 1 : 0;
}
