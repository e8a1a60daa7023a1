// Evaluates a PAC file off the event loop.
//
//   PacEvaluator pac(options, env);
//   pac.setScript(makeScript(text, "http://wpad.corp/wpad.dat"), ex, [](PacError e) {...});
//   pac.evaluate(PacQuery::forRequest("https", "www.example.com", 443, "/x", true), ex,
//                [](const PacResult& r) { ... r.proxies / r.error ... });
//
// Workers: `options.threads` threads, each driving one PAC worker process
// (gateway/pac_engine/worker.h) with its own JavaScript heap into which the
// current script is compiled once per version: when a new script loads,
// every idle worker recompiles it before taking more work. Evaluations wait
// in one FIFO queue (at most `max_queue`; beyond it they fail at once with
// Overloaded).
//
// Bounds. Every evaluation answers by its deadline (`timeout` after the
// call): the worker's JavaScript is cut off there (JsHeap), its DNS calls
// end there at the latest, a worker still busy kKillGrace later (in a
// native function, which no deadline check reaches) is killed and
// replaced, and a timer on the caller's executor answers Timeout if the
// worker still has not (all of them busy, say). A heap that timed out or
// ran out of memory is thrown away and rebuilt, so no half-run state
// survives. The DNS calls go to env.resolver from the evaluator's threads,
// each tagged with the query's host (PacResolver's owner).
//
// Cache. Answers (and, for `error_ttl`, errors) are kept per
// PacQuery::cache_key (the URL the PAC file was given: scheme, host and
// port for https, the whole URL for http, whose path PAC files route by)
// for `cache_ttl` (time-dependent PAC files change their answers; the TTL
// bounds how stale one can be), in an LRU cache bounded by `cache_entries`
// and `cache_bytes` that frees what expires (answer_cache.h). It is
// emptied when a new script loads and by networkChanged() (dnsResolve and
// myIpAddress answers may have changed). Concurrent evaluations of one key
// share one run.
//
// Callbacks are posted to the executor passed with each call, never run
// inside the call; what the evaluator keeps per caller (its timer) is only
// ever touched and destroyed on that executor, which must therefore be
// single-threaded (an io_context run by one thread, or a strand). Callbacks
// still pending when the evaluator is destroyed get a Shutdown error: the
// executors' io_contexts must outlive the evaluator (one destroyed later
// destroys such handlers unrun, which is fine).
//
// Destruction never waits for JavaScript: busy workers are killed, what is
// pending is answered Shutdown, and the threads end on their own shortly
// after (they keep what they use alive; nothing is posted and no env
// callback is called once the destructor has returned).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio.hpp>

#include "gateway/pac_engine/answer.h"
#include "gateway/pac_engine/pac_context.h"
#include "gateway/pac_engine/pac_error.h"

namespace h2gate::pac {

// A PAC file as loaded: its text and where it came from.
struct PacScript {
  std::string text;
  std::string origin;  // "/etc/h2gate/proxy.pac", "http://wpad.corp/wpad.dat (WPAD)", "system: ..."
  std::string sha256;  // hex, of text
  // Where it came from, as data (for the default of pac.proxies.
  // authenticate_to, filters/pac_routing_config.h): the URL it was
  // downloaded from (a url source, the WPAD candidate that answered, the
  // system's PAC URL); empty for a file and for text h2gate wrote itself.
  std::string url;
  // The system's manual settings: the entries they name ("PROXY h:p",
  // "HTTPS h:p"); empty otherwise.
  std::vector<std::string> manual_proxies;
  std::chrono::system_clock::time_point loaded_at;
  uint64_t version = 0;  // set by the evaluator: 1, 2, ... per setScript()
};

std::shared_ptr<PacScript> makeScript(std::string text, std::string origin);

// One question to the PAC file.
struct PacQuery {
  std::string url;        // FindProxyForURL's first argument
  std::string host;       // its second: the host, no brackets, no port
  std::string cache_key;  // answers are shared between queries with equal keys (see cacheKeyFor)
  uint64_t conn_id = 0;   // for log lines
  uint64_t stream_id = 0;

  // The query browsers make for a request: `scheme` "http", "https", "ws",
  // "wss"...; `path` the path and query of an http:// request ("" for a
  // tunnel). https and wss URLs are passed as "https://host[:port]/" (path
  // and query stripped, as Chromium and Firefox do since 2016, so the PAC
  // file never sees them); http ones whole. The port appears only when it
  // is not the scheme's default. IPv6 hosts get brackets in the URL only.
  static PacQuery forRequest(std::string_view scheme, std::string_view host, uint16_t port,
                             std::string_view path);

  // The cache_key forRequest() gives a request: "scheme://host:port"
  // (scheme and host in lower case, an IPv6 host in brackets, the port
  // always written), followed for the schemes whose URL keeps its path
  // (all but https and wss) by `path` as the URL has it ("/" when empty):
  // two URLs the PAC file sees differently never share an answer. Written
  // into `out`, which is cleared first and whose capacity is reused, so
  // that a caller keeping `out` allocates nothing; the result views `out`.
  static std::string_view cacheKeyFor(std::string_view scheme, std::string_view host, uint16_t port,
                                      std::string_view path, std::string& out);
};

struct PacResult {
  std::string answer;  // what FindProxyForURL returned ("" on error)
  ProxyList proxies;   // parsed; at least one entry unless error
  PacError error;      // kind None on success
  bool from_cache = false;
  uint64_t script_version = 0;  // 0: no script
};

struct PacStats {
  uint64_t evaluations = 0;  // runs of FindProxyForURL (cache misses that reached a worker)
  uint64_t cache_hits = 0;
  uint64_t coalesced = 0;  // queries answered by another query's run
  // Runs that ran out of time (in JavaScript, a native function, or waiting
  // for a free thread), each once, whether the run or a query's own timer
  // saw it first.
  uint64_t timeouts = 0;
  uint64_t errors = 0;  // every other failed run (exception, bad return, memory...)
  uint64_t overloaded = 0;
  uint64_t loads = 0;  // scripts that loaded
  uint64_t load_failures = 0;
  // Worker processes killed because they ran past their deadline in a
  // native function or the compiler (JavaScript itself stops in time).
  uint64_t workers_killed = 0;
  // The answer cache now (expired answers freed first).
  uint64_t cache_entries = 0;
  uint64_t cache_bytes = 0;
};

class PacEvaluator {
 public:
  struct Options {
    std::string name = "pac";                       // for logs: the route using it
    unsigned threads = 2;                           // worker processes, one heap each
    std::chrono::milliseconds timeout{2000};        // per evaluation, from the call
    std::chrono::milliseconds load_timeout{10000};  // compile + top-level code
    std::size_t max_queue = 1024;
    std::size_t cache_entries = 10000;  // 0: no cache
    // What the cached answers may hold in all, estimated (answer_cache.h).
    std::size_t cache_bytes = 16u << 20;
    std::chrono::milliseconds cache_ttl{60000};
    std::chrono::milliseconds error_ttl{5000};  // failed evaluations are cached this long
  };

  PacEvaluator(Options options, PacEnvironment env);
  ~PacEvaluator();
  PacEvaluator(const PacEvaluator&) = delete;
  PacEvaluator& operator=(const PacEvaluator&) = delete;

  // Loads `script` on a worker. When it loads, it becomes the script every
  // later evaluation uses and the cache is emptied; when it fails (syntax
  // error, no FindProxyForURL, its top-level code throws or loops), the
  // previous script stays. `done` is posted to `ex` with the outcome.
  void setScript(std::shared_ptr<PacScript> script, asio::any_io_executor ex,
                 std::function<void(PacError)> done);

  // Answers from the cache, or nullopt (then call evaluate()). Never blocks
  // on JavaScript; for callers that can use an answer at once.
  std::optional<PacResult> cached(const PacQuery& query);
  // The same for a key from PacQuery::cacheKeyFor, without a copy: the
  // cached result itself (immutable, from_cache set; it stays valid while
  // held even after the cache drops it), or null. Allocates nothing and
  // holds the evaluator's lock only for the lookup: made for the event loop,
  // once per request.
  std::shared_ptr<const PacResult> cachedAnswer(std::string_view cache_key);

  // Answers `query`; `done` is posted to `ex` exactly once, at the latest
  // `timeout` (plus a few milliseconds) after this call.
  void evaluate(PacQuery query, asio::any_io_executor ex, std::function<void(PacResult)> done);

  // The network changed: forget cached answers.
  void networkChanged();

  // The script evaluations use now (null before the first load).
  std::shared_ptr<const PacScript> script() const;
  PacStats stats() const;
  const Options& options() const { return options_; }

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;  // shared with the workers and the pending timers
  Options options_;
};

}  // namespace h2gate::pac
