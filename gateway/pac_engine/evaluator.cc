#include "gateway/pac_engine/evaluator.h"

#include <openssl/evp.h>

#include <charconv>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "config/node_reader.h"
#include "gateway/base/ascii.h"
#include "gateway/base/log.h"
#include "gateway/pac_engine/answer_cache.h"
#include "gateway/pac_engine/worker.h"

namespace h2gate::pac {
namespace {

using Clock = std::chrono::steady_clock;

// How long after its deadline the caller's timer answers for a worker that
// has not (the worker's own cut-off comes first in every normal case).
constexpr auto kTimerGrace = std::chrono::milliseconds(20);
// Alerts logged at info per script version; the rest at debug.
constexpr int kAlertBudget = 20;
// At most this much of one alert() message is logged.
constexpr std::size_t kAlertBytes = 500;
// Distinct problems logged at warn per script version.
constexpr std::size_t kProblemBudget = 64;
// A worker process that could not be started (or died while compiling) is
// tried again this long after.
constexpr auto kRestartDelay = std::chrono::seconds(1);

std::string sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

bool secureScheme(std::string_view scheme) {
  return scheme == "https" || scheme == "wss";
}

// The URL's path as forRequest() writes it: "/" when empty, a '/' put first.
void appendPath(std::string_view path, std::string& out) {
  if (path.empty() || path.front() != '/') out += '/';
  out += path;
}

uint16_t defaultPort(std::string_view scheme) {
  if (scheme == "https" || scheme == "wss") return 443;
  if (scheme == "ftp") return 21;
  return 80;
}

bool cacheableError(PacError::Kind k) {
  return k == PacError::Kind::Exception || k == PacError::Kind::Timeout ||
         k == PacError::Kind::Memory || k == PacError::Kind::BadReturn ||
         k == PacError::Kind::UnusableAnswer;
}

}  // namespace

std::shared_ptr<PacScript> makeScript(std::string text, std::string origin) {
  auto s = std::make_shared<PacScript>();
  s->sha256 = sha256Hex(text);
  s->text = std::move(text);
  s->origin = std::move(origin);
  s->loaded_at = std::chrono::system_clock::now();
  return s;
}

PacQuery PacQuery::forRequest(std::string_view scheme_in, std::string_view host_in, uint16_t port,
                              std::string_view path) {
  PacQuery q;
  const std::string scheme = toLowerAscii(scheme_in);
  q.host = toLowerAscii(host_in);
  if (q.host.size() >= 2 && q.host.front() == '[' && q.host.back() == ']')
    q.host = q.host.substr(1, q.host.size() - 2);
  const std::string in_url = q.host.find(':') != std::string::npos ? "[" + q.host + "]" : q.host;
  q.url = scheme + "://" + in_url;
  if (port != 0 && port != defaultPort(scheme)) q.url += ":" + std::to_string(port);
  appendPath(secureScheme(scheme) ? std::string_view() : path, q.url);
  cacheKeyFor(scheme, q.host, port, path, q.cache_key);
  return q;
}

std::string_view PacQuery::cacheKeyFor(std::string_view scheme, std::string_view host,
                                       uint16_t port, std::string_view path, std::string& out) {
  out.clear();
  auto append_lowered = [&out](std::string_view s) {
    for (char c : s) out += lowerAscii(c);
  };
  append_lowered(scheme);
  if (port == 0) port = defaultPort(out);
  out += "://";
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const bool v6 = host.find(':') != std::string_view::npos;
  if (v6) out += '[';
  append_lowered(host);
  if (v6) out += ']';
  out += ':';
  char digits[8];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, port);
  out.append(digits, end);
  // `out` starts with the scheme, lowered.
  if (!secureScheme(std::string_view(out).substr(0, scheme.size()))) appendPath(path, out);
  return out;
}

// ---------------------------------------------------------------------------

// Set by whichever side first sees a run run out of time: the run itself
// (runEval) or a query's own timer. A run is one timeout in the stats, not
// one per side that saw it.
using TimeoutSeen = std::shared_ptr<std::atomic<bool>>;

struct Waiter {
  asio::any_io_executor ex;
  std::function<void(PacResult)> done;
  std::unique_ptr<asio::steady_timer> timer;  // touched on `ex` only
  std::atomic<bool> delivered{false};
  TimeoutSeen timeout_seen;  // its flight's; null for an answer given at once
};

// One run of FindProxyForURL, shared by the queries with its cache key.
struct Flight {
  PacQuery query;
  Clock::time_point deadline;
  std::vector<std::shared_ptr<Waiter>> waiters;  // guarded by Impl::mutex
  TimeoutSeen timeout_seen = std::make_shared<std::atomic<bool>>(false);
};

// Counts the timeout of the run `seen` belongs to, once.
void countTimeout(std::atomic<uint64_t>& timeouts, const TimeoutSeen& seen) {
  if (!seen || !seen->exchange(true)) ++timeouts;
}

struct Job {
  std::shared_ptr<Flight> flight;     // an evaluation, or:
  std::shared_ptr<PacScript> script;  // a load
  asio::any_io_executor ex;
  std::function<void(PacError)> load_done;
};

// One evaluation thread and the worker process it drives.
struct WorkerSlot {
  std::thread thread;                 // detached by the evaluator's destructor; ends by itself
  std::unique_ptr<PacWorker> worker;  // used by `thread`; shutdown() from the destructor
  // A load under way: its callback, answered by whichever comes first, the
  // thread or the destructor (guarded by Impl::mutex).
  Job load;
  bool loading = false;
};

struct PacEvaluator::Impl : std::enable_shared_from_this<PacEvaluator::Impl> {
  Options options;
  PacEnvironment env;

  mutable std::mutex mutex;
  std::condition_variable cv;
  bool stop = false;
  std::deque<Job> queue;
  std::unordered_map<std::string, std::shared_ptr<Flight>> flights;
  std::shared_ptr<PacScript> current;
  uint64_t next_version = 0;
  std::vector<std::unique_ptr<WorkerSlot>> workers;

  // The results are immutable (from_cache set) and shared with the
  // callers of cachedAnswer(). Under `mutex`.
  std::unique_ptr<AnswerCache> cache;

  // Problems already logged for the current version.
  std::set<std::string> logged;
  uint64_t logged_version = 0;
  std::atomic<int> alerts{0};

  std::atomic<uint64_t> evaluations{0}, cache_hits{0}, coalesced{0}, timeouts{0}, errors{0},
      overloaded{0}, loads{0}, load_failures{0};

  // alert() from the workers reaches the log and env.alert under this, and
  // not at all once the evaluator is gone.
  std::mutex alert_mutex;
  bool alerts_stopped = false;

  // What a worker thread knows of its worker process's script.
  struct Compiled {
    uint64_t version = 0;  // the script it was given (0: none, or thrown away)
    bool ok = false;       // ...and it compiled there
    Clock::time_point retry_at{};
  };
  void workerMain(WorkerSlot& slot);
  void runLoad(Job& job, Compiled& compiled, WorkerSlot& slot);
  PacResult runEval(Flight& flight, PacWorker& worker, const Compiled& compiled, bool& discard);
  void complete(const std::shared_ptr<Flight>& flight, const PacResult& result);
  // Logs `what` at warn once per script version (then at debug).
  void logOnce(uint64_t conn, uint64_t stream, uint64_t version, const std::string& what);
  bool stopping() {
    std::lock_guard lock(mutex);
    return stop;
  }
  void onAlert(std::string_view message);

  // Cache, under `mutex`.
  std::shared_ptr<const PacResult> cacheGet(std::string_view key);
  void cachePut(const std::string& key, const PacResult& result);
  void cacheClear() { cache->clear(); }
};

void PacEvaluator::Impl::logOnce(uint64_t conn, uint64_t stream, uint64_t version,
                                 const std::string& what) {
  bool first = false;
  {
    std::lock_guard lock(mutex);
    if (logged_version != version) {
      logged.clear();
      logged_version = version;
    }
    if (logged.size() < kProblemBudget) first = logged.insert(what).second;
  }
  if (first)
    H2G_LOG(Warn, conn, stream,
            "pac " << options.name << " (version " << version << "): " << what
                   << " (said once per PAC version)");
  else
    H2G_LOG(Debug, conn, stream, "pac " << options.name << ": " << what);
}

void PacEvaluator::Impl::onAlert(std::string_view message) {
  const int n = alerts.fetch_add(1, std::memory_order_relaxed);
  if (n == kAlertBudget) {
    H2G_LOG(Info, 0, 0,
            "pac " << options.name << ": more alert() calls; they are logged at debug level");
    return;
  }
  // The PAC file's own text, from whoever serves it: escaped as config
  // errors are (line breaks, ESC and the other control characters written
  // as \n, \x1b...), so it cannot forge log lines or drive a terminal.
  if (!log::enabled(n < kAlertBudget ? log::Level::Info : log::Level::Debug)) return;
  const bool cut = message.size() > kAlertBytes;
  const std::string shown =
      config::escapeControls(message.substr(0, kAlertBytes)) + (cut ? "... (cut)" : "");
  if (n < kAlertBudget)
    H2G_LOG(Info, 0, 0, "pac " << options.name << ": alert(): " << shown);
  else
    H2G_LOG(Debug, 0, 0, "pac " << options.name << ": alert(): " << shown);
}

std::shared_ptr<const PacResult> PacEvaluator::Impl::cacheGet(std::string_view key) {
  return cache->get(key, Clock::now());
}

void PacEvaluator::Impl::cachePut(const std::string& key, const PacResult& result) {
  if (options.cache_entries == 0 || !current || result.script_version != current->version) return;
  const auto ttl =
      result.error ? std::min(options.error_ttl, options.cache_ttl) : options.cache_ttl;
  if (ttl.count() <= 0) return;
  auto shared = std::make_shared<PacResult>(result);
  shared->from_cache = true;
  const Clock::time_point now = Clock::now();
  cache->put(key, std::move(shared), now + ttl, now);
}

void PacEvaluator::Impl::complete(const std::shared_ptr<Flight>& flight, const PacResult& result) {
  std::vector<std::shared_ptr<Waiter>> waiters;
  // Posted under the lock: the destructor, which answers what is left
  // under it too, then knows that no thread posts after it returned (the
  // callers' io_contexts need only outlive the evaluator).
  std::lock_guard lock(mutex);
  if (!result.error || cacheableError(result.error.kind)) cachePut(flight->query.cache_key, result);
  auto it = flights.find(flight->query.cache_key);
  if (it != flights.end() && it->second == flight) flights.erase(it);
  waiters.swap(flight->waiters);
  // The handlers take the only references this thread had: a Waiter (and
  // its timer) must be destroyed on its executor's thread, never here.
  for (auto& waiter : waiters) {
    asio::any_io_executor ex = waiter->ex;
    asio::post(ex, [w = std::move(waiter), result] {
      if (w->delivered.exchange(true)) return;
      if (w->timer) w->timer->cancel();
      w->done(result);
    });
  }
}

PacResult PacEvaluator::Impl::runEval(Flight& flight, PacWorker& worker, const Compiled& compiled,
                                      bool& discard) {
  PacResult r;
  const uint64_t conn = flight.query.conn_id, stream = flight.query.stream_id;
  {
    std::lock_guard lock(mutex);
    r.script_version = current ? current->version : 0;
  }
  if (Clock::now() >= flight.deadline) {
    r.error = {PacError::Kind::Timeout, "waited for a free PAC thread past the deadline"};
    countTimeout(timeouts, flight.timeout_seen);
    return r;
  }
  if (!compiled.ok || compiled.version != r.script_version || !worker.running()) {
    r.error = {PacError::Kind::NoScript,
               r.script_version == 0 ? "no PAC file has loaded"
                                     : "the PAC file could not be compiled in this PAC worker"};
    ++errors;
    return r;
  }
  ++evaluations;
  RawAnswer raw = worker.findProxy(flight.query.url, flight.query.host, flight.deadline);
  if (raw.lookups_refused > 0 && !stopping())
    logOnce(conn, stream, r.script_version,
            "FindProxyForURL asked DNS for more than " + std::to_string(kMaxLookupsPerRun) +
                " names in one run; the others got 'not found' without a lookup");
  if (raw.error) {
    r.error = raw.error;
    if (r.error.kind == PacError::Kind::Shutdown) return r;  // the destructor answers
    discard = raw.error.kind == PacError::Kind::Timeout ||
              raw.error.kind == PacError::Kind::Memory || !worker.running();
    if (raw.error.kind == PacError::Kind::Timeout) {
      countTimeout(timeouts, flight.timeout_seen);
      r.error.message = "FindProxyForURL " + r.error.message + " (" +
                        std::to_string(options.timeout.count()) + " ms)";
    } else {
      ++errors;
    }
    logOnce(conn, stream, r.script_version,
            std::string(kindName(r.error.kind)) + ": " + r.error.message);
    return r;
  }
  r.answer = std::move(raw.text);
  r.proxies = parseProxyList(r.answer);
  for (const SkippedEntry& s : r.proxies.skipped)
    logOnce(conn, stream, r.script_version, "answer entry '" + s.text + "' skipped: " + s.reason);
  if (r.proxies.entries.empty()) {
    ++errors;
    std::string why =
        r.proxies.skipped.empty() ? std::string("it is empty") : r.proxies.skipped.front().reason;
    std::string shown = r.answer.substr(0, 200);
    for (char& c : shown)
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    r.error = {PacError::Kind::UnusableAnswer,
               "FindProxyForURL returned \"" + shown + "\": no usable entry (" + why + ")"};
  }
  return r;
}

void PacEvaluator::Impl::runLoad(Job& job, Compiled& compiled, WorkerSlot& slot) {
  {
    std::lock_guard lock(mutex);
    slot.load = std::move(job);
    slot.loading = true;
  }
  const std::shared_ptr<PacScript> script = slot.load.script;
  unsigned refused = 0;
  PacError err = slot.worker->load(script->text, script->origin,
                                   Clock::now() + options.load_timeout, &refused);
  if (refused > 0 && !stopping())
    logOnce(0, 0, script->version,
            "the top-level code asked DNS for more than " + std::to_string(kMaxLookupsPerRun) +
                " names; the others got 'not found' without a lookup");
  if (err) {
    if (err.kind != PacError::Kind::Shutdown) ++load_failures;
    if (err.kind == PacError::Kind::Timeout)
      err.message = "its top-level code " + err.message + " (" +
                    std::to_string(options.load_timeout.count()) + " ms)";
    // A worker that is gone took the script it had with it.
    if (!slot.worker->running()) compiled = {};
  } else {
    ++loads;
    {
      std::lock_guard lock(mutex);
      if (!current || script->version > current->version) {
        current = script;
        cacheClear();
        alerts = 0;
      }
    }
    cv.notify_all();
    compiled.version = script->version;
    compiled.ok = true;
  }
  std::lock_guard lock(mutex);
  if (!slot.loading) return;  // the destructor answered it
  slot.loading = false;
  Job done = std::move(slot.load);
  if (done.load_done) asio::post(done.ex, [cb = std::move(done.load_done), err] { cb(err); });
}

void PacEvaluator::Impl::workerMain(WorkerSlot& slot) {
  PacWorker& worker = *slot.worker;
  Compiled compiled;
  while (true) {
    std::shared_ptr<PacScript> recompile;
    Job job;
    {
      std::unique_lock lock(mutex);
      auto stale = [&] { return current && current->version != compiled.version; };
      while (!stop && queue.empty() && !(stale() && Clock::now() >= compiled.retry_at)) {
        if (stale())
          cv.wait_until(lock, compiled.retry_at);
        else
          cv.wait(lock);
      }
      if (stop) break;
      if (stale() && Clock::now() >= compiled.retry_at) {
        recompile = current;
      } else {
        job = std::move(queue.front());
        queue.pop_front();
      }
    }
    if (recompile) {
      // The script every other thread already runs: compile it here too
      // (in a new worker process when this one is gone).
      const PacError err =
          worker.load(recompile->text, recompile->origin, Clock::now() + options.load_timeout);
      compiled.version = recompile->version;
      compiled.ok = !err;
      if (err && !worker.running()) {
        // No process (it could not start, or died compiling): again later.
        compiled.version = 0;
        compiled.retry_at = Clock::now() + kRestartDelay;
      }
      if (err && !stopping())  // cancelled by the destructor: no failure of the script
        logOnce(0, 0, recompile->version,
                std::string("compiling in a PAC worker failed: ") + err.message);
      continue;
    }
    if (job.script) {
      runLoad(job, compiled, slot);
      continue;
    }
    bool discard = false;
    const PacResult result = runEval(*job.flight, worker, compiled, discard);
    if (discard) {
      // Cut off mid-run: compile the file again rather than trust the
      // heap's state (or start a new process, when it was killed).
      compiled.version = 0;
      compiled.ok = false;
    }
    complete(job.flight, result);
  }
  // Asked to exit, or killed already by the destructor; reaped either way.
  worker.stop();
}

// ---------------------------------------------------------------------------

PacEvaluator::PacEvaluator(Options options, PacEnvironment env)
    : impl_(std::make_shared<Impl>()), options_(options) {
  impl_->options = options;
  impl_->cache = std::make_unique<AnswerCache>(options.cache_entries, options.cache_bytes);
  impl_->env = std::move(env);
  std::function<void(std::string_view)> user_alert = impl_->env.alert;
  Impl* raw = impl_.get();
  impl_->env.alert = [raw, user_alert](std::string_view m) {
    std::lock_guard lock(raw->alert_mutex);
    if (raw->alerts_stopped) return;
    raw->onAlert(m);
    if (user_alert) user_alert(m);
  };
  const unsigned n = options.threads == 0 ? 1 : options.threads;
  for (unsigned i = 0; i < n; ++i) {
    auto slot = std::make_unique<WorkerSlot>();
    slot->worker = std::make_unique<PacWorker>(impl_->env, options.name);
    impl_->workers.push_back(std::move(slot));
  }
  // Each thread keeps the Impl alive: the destructor does not wait for them.
  for (auto& w : impl_->workers) {
    WorkerSlot* slot = w.get();
    slot->thread = std::thread([impl = impl_, slot] { impl->workerMain(*slot); });
  }
}

PacEvaluator::~PacEvaluator() {
  // Nothing here waits for JavaScript: busy workers are killed, the threads
  // are left to notice and end (each holds the Impl), and what is pending is
  // answered Shutdown now.
  {
    std::lock_guard lock(impl_->alert_mutex);
    impl_->alerts_stopped = true;
  }
  std::deque<Job> left;
  std::unordered_map<std::string, std::shared_ptr<Flight>> flying;
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stop = true;
    left.swap(impl_->queue);
    flying.swap(impl_->flights);
    for (auto& w : impl_->workers) {
      w->worker->shutdown();
      if (w->loading) {
        w->loading = false;
        left.push_back(std::move(w->load));
      }
    }
  }
  impl_->cv.notify_all();
  for (auto& w : impl_->workers) w->thread.detach();
  H2G_LOG(Debug, 0, 0, "pac " << options_.name << ": evaluator stopped; its worker processes end");
  PacResult shutdown;
  shutdown.error = {PacError::Kind::Shutdown, "the PAC evaluator was shut down"};
  for (auto& [key, flight] : flying) impl_->complete(flight, shutdown);
  for (Job& job : left) {
    if (job.script && job.load_done)
      asio::post(job.ex, [done = std::move(job.load_done), e = shutdown.error] { done(e); });
  }
}

void PacEvaluator::setScript(std::shared_ptr<PacScript> script, asio::any_io_executor ex,
                             std::function<void(PacError)> done) {
  {
    std::lock_guard lock(impl_->mutex);
    script->version = ++impl_->next_version;
    Job job;
    job.script = std::move(script);
    job.ex = std::move(ex);
    job.load_done = std::move(done);
    // Loads jump the queue: evaluations behind them should use the new file.
    impl_->queue.push_front(std::move(job));
  }
  impl_->cv.notify_one();
}

std::optional<PacResult> PacEvaluator::cached(const PacQuery& query) {
  std::shared_ptr<const PacResult> r = cachedAnswer(query.cache_key);
  if (!r) return std::nullopt;
  return *r;
}

std::shared_ptr<const PacResult> PacEvaluator::cachedAnswer(std::string_view cache_key) {
  if (options_.cache_entries == 0) return nullptr;
  std::shared_ptr<const PacResult> r;
  {
    std::lock_guard lock(impl_->mutex);
    r = impl_->cacheGet(cache_key);
  }
  if (r) impl_->cache_hits.fetch_add(1, std::memory_order_relaxed);
  return r;
}

void PacEvaluator::evaluate(PacQuery query, asio::any_io_executor ex,
                            std::function<void(PacResult)> done) {
  auto waiter = std::make_shared<Waiter>();
  waiter->ex = ex;
  waiter->done = std::move(done);
  const Clock::time_point deadline = Clock::now() + options_.timeout;
  std::optional<PacResult> immediate;
  {
    std::lock_guard lock(impl_->mutex);
    if (options_.cache_entries != 0)
      if (std::shared_ptr<const PacResult> hit = impl_->cacheGet(query.cache_key)) immediate = *hit;
    if (immediate) {
      ++impl_->cache_hits;
    } else if (auto it = impl_->flights.find(query.cache_key); it != impl_->flights.end()) {
      ++impl_->coalesced;
      waiter->timeout_seen = it->second->timeout_seen;
      it->second->waiters.push_back(waiter);
    } else if (impl_->queue.size() >= options_.max_queue) {
      ++impl_->overloaded;
      immediate.emplace();
      immediate->error = {
          PacError::Kind::Overloaded,
          std::to_string(impl_->queue.size()) + " PAC evaluations are already waiting (max_queue)"};
    } else {
      auto flight = std::make_shared<Flight>();
      flight->query = std::move(query);
      flight->deadline = deadline;
      waiter->timeout_seen = flight->timeout_seen;
      flight->waiters.push_back(waiter);
      impl_->flights.emplace(flight->query.cache_key, flight);
      Job job;
      job.flight = std::move(flight);
      impl_->queue.push_back(std::move(job));
    }
  }
  if (immediate) {
    asio::post(ex, [waiter, r = std::move(*immediate)] {
      waiter->delivered = true;
      waiter->done(r);
    });
    return;
  }
  impl_->cv.notify_one();
  // The caller's own bound, for a worker that cannot answer in time.
  asio::post(ex, [waiter, deadline, impl = impl_, timeout = options_.timeout] {
    if (waiter->delivered) return;
    waiter->timer = std::make_unique<asio::steady_timer>(waiter->ex, deadline + kTimerGrace);
    waiter->timer->async_wait([waiter, impl, timeout](const asio::error_code& ec) {
      if (ec == asio::error::operation_aborted || waiter->delivered.exchange(true)) return;
      countTimeout(impl->timeouts, waiter->timeout_seen);
      PacResult r;
      r.error = {PacError::Kind::Timeout, "no answer from the PAC threads within " +
                                              std::to_string(timeout.count()) + " ms"};
      waiter->done(r);
    });
  });
}

void PacEvaluator::networkChanged() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->cacheClear();
  }
  if (impl_->env.resolver) impl_->env.resolver->networkChanged();
}

std::shared_ptr<const PacScript> PacEvaluator::script() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->current;
}

PacStats PacEvaluator::stats() const {
  PacStats s;
  s.evaluations = impl_->evaluations;
  s.cache_hits = impl_->cache_hits;
  s.coalesced = impl_->coalesced;
  s.timeouts = impl_->timeouts;
  s.errors = impl_->errors;
  s.overloaded = impl_->overloaded;
  s.loads = impl_->loads;
  s.load_failures = impl_->load_failures;
  for (const auto& w : impl_->workers) s.workers_killed += w->worker->timedOutKills();
  std::lock_guard lock(impl_->mutex);
  impl_->cache->sweep(Clock::now());
  s.cache_entries = impl_->cache->entries();
  s.cache_bytes = impl_->cache->bytes();
  return s;
}

}  // namespace h2gate::pac
