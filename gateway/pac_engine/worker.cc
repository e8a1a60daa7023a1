#include "gateway/pac_engine/worker.h"

#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "gateway/base/ascii.h"
#include "gateway/pac_engine/worker_protocol.h"

namespace h2gate::pac {
namespace {

using SteadyClock = std::chrono::steady_clock;

int64_t remainingUs(Deadline deadline) {
  if (deadline == Deadline::max()) return INT64_MAX;
  return std::chrono::duration_cast<std::chrono::microseconds>(deadline - SteadyClock::now())
      .count();
}

Deadline fromUs(int64_t us) {
  // More than a day: no deadline worth the name (and no overflow).
  if (us > int64_t(86400) * 1000 * 1000) return Deadline::max();
  return SteadyClock::now() + std::chrono::microseconds(us);
}

// Kills the workers that have not answered by their time: one thread for
// the whole process, started on first use and never ended (as
// filters/pac_routing.cc's control executor), so that no evaluator waits for
// it and no worker outlives its bound because its evaluator is busy.
class KillTimer {
 public:
  static KillTimer& get() {
    // Reachable for ever through `timer`: no leak report.
    static KillTimer* const timer = new KillTimer;
    return *timer;
  }

  uint64_t arm(std::shared_ptr<WorkerProcess> proc, SteadyClock::time_point when) {
    std::lock_guard lock(mutex_);
    const uint64_t id = next_++;
    armed_.emplace(id, Entry{when, std::move(proc)});
    // Woken only when this one is due before what it waits for now (most
    // calls answer long before their deadline: no wake-up per call).
    if (when < wakes_at_) cv_.notify_one();
    return id;
  }

  // True when the timer came first: the worker is killed (or about to be).
  bool disarm(uint64_t id) {
    std::shared_ptr<WorkerProcess> keep;  // released after the lock
    std::lock_guard lock(mutex_);
    if (auto it = armed_.find(id); it != armed_.end()) {
      keep = std::move(it->second.proc);
      armed_.erase(it);
      return false;
    }
    return fired_.erase(id) > 0;
  }

 private:
  struct Entry {
    SteadyClock::time_point when;
    std::shared_ptr<WorkerProcess> proc;
  };

  KillTimer() {
    std::thread([this] { run(); }).detach();
  }

  void run() {
    std::unique_lock lock(mutex_);
    while (true) {
      auto earliest = SteadyClock::time_point::max();
      for (const auto& [id, e] : armed_) earliest = std::min(earliest, e.when);
      wakes_at_ = earliest;
      if (earliest == SteadyClock::time_point::max())
        cv_.wait(lock);
      else
        cv_.wait_until(lock, earliest);
      wakes_at_ = SteadyClock::time_point::min();  // awake: arm() need not wake it
      const auto now = SteadyClock::now();
      std::vector<std::shared_ptr<WorkerProcess>> due;
      for (auto it = armed_.begin(); it != armed_.end();) {
        if (it->second.when <= now) {
          due.push_back(std::move(it->second.proc));
          fired_.insert(it->first);
          it = armed_.erase(it);
        } else {
          ++it;
        }
      }
      if (due.empty()) continue;
      lock.unlock();
      for (auto& p : due) p->kill();
      due.clear();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<uint64_t, Entry> armed_;
  std::set<uint64_t> fired_;
  uint64_t next_ = 1;
  SteadyClock::time_point wakes_at_ = SteadyClock::time_point::min();
};

// A label for a command line: printable ASCII without quotes, bounded.
std::string commandLineLabel(std::string_view label) {
  std::string out;
  for (char c : label.substr(0, 120)) {
    const bool plain =
        isAsciiAlnum(c) || std::string_view("/_-.[]:").find(c) != std::string_view::npos;
    out += plain ? c : '_';
  }
  return out.empty() ? std::string("pac") : out;
}

}  // namespace

struct PacWorker::Reply {
  enum class Kind { Ok, Ended, Garbled };
  Kind kind = Kind::Ended;
  wire::Type type = wire::Type::Hello;
  std::string payload;
  bool killed_by_timer = false;
};

PacWorker::PacWorker(const PacEnvironment& env, std::string label)
    : env_(env), label_(commandLineLabel(label)) {}

PacWorker::~PacWorker() {
  stop();
}

long PacWorker::pid() const {
  std::lock_guard lock(mutex_);
  return proc_ ? proc_->pid() : 0;
}

void PacWorker::drop() {
  std::shared_ptr<WorkerProcess> gone;
  {
    std::lock_guard lock(mutex_);
    gone = std::move(proc_);
  }
  reader_.reset();
  // Its destructor (here, or in the kill timer if that still holds it)
  // kills and reaps it.
}

void PacWorker::stop() {
  std::shared_ptr<WorkerProcess> p;
  {
    std::lock_guard lock(mutex_);
    p = std::move(proc_);
  }
  reader_.reset();
  if (p) p->stop(std::chrono::milliseconds(200));
}

void PacWorker::shutdown() {
  std::lock_guard lock(mutex_);
  shut_ = true;
  if (proc_) proc_->kill();
}

PacError PacWorker::ended(bool killed_by_timer, const char* doing) {
  {
    std::lock_guard lock(mutex_);
    if (shut_) return {PacError::Kind::Shutdown, "the PAC evaluator was shut down"};
  }
  if (killed_by_timer) {
    timed_out_kills_.fetch_add(1, std::memory_order_relaxed);
    return {PacError::Kind::Timeout,
            "ran past its time limit in a native function or the compiler (its worker process "
            "was killed)"};
  }
  const std::string how = proc_ ? proc_->howItEnded() : std::string();
  return {PacError::Kind::Exception, std::string("the PAC worker process ended while ") + doing +
                                         (how.empty() ? std::string() : " (" + how + ")")};
}

PacError PacWorker::start(Deadline deadline) {
  {
    std::lock_guard lock(mutex_);
    if (shut_) return {PacError::Kind::Shutdown, "the PAC evaluator was shut down"};
  }
  std::string error;
  std::shared_ptr<WorkerProcess> p = WorkerProcess::start(label_, &error);
  if (!p)
    return {PacError::Kind::Exception, "the PAC worker process could not be started: " + error};
  {
    std::lock_guard lock(mutex_);
    if (shut_) {
      p->kill();
      return {PacError::Kind::Shutdown, "the PAC evaluator was shut down"};
    }
    proc_ = p;
  }
  reader_ = std::make_unique<wire::FrameReader>(wire::kMaxFromWorker);
  const uint64_t timer = KillTimer::get().arm(p, deadline + kKillGrace);
  wire::Type type{};
  std::string_view payload;
  const auto got =
      reader_->next([&p](void* b, std::size_t n) { return p->read(b, n); }, type, payload);
  wire::Hello hello;
  bool ok = got == wire::FrameReader::Result::Frame && type == wire::Type::Hello &&
            wire::decode(payload, hello) && hello.version == wire::kProtocolVersion;
  const bool greeted = ok;
  if (ok) {
    wire::Setup setup;
    setup.heap_limit = env_.heap_limit;
    setup.dns_timeout_us =
        std::chrono::duration_cast<std::chrono::microseconds>(env_.dns_timeout).count();
    setup.own_clock = static_cast<bool>(env_.clock);
    const std::string frame = wire::encode(setup);
    ok = p->write(frame.data(), frame.size());
  }
  const bool fired = KillTimer::get().disarm(timer);
  if (ok && !fired) return {};
  PacError e;
  if (!greeted && got == wire::FrameReader::Result::Frame)
    e = {PacError::Kind::Exception,
         "the PAC worker process did not start as one (its main() must call runPacWorker(), "
         "gateway/pac_engine/worker.h)"};
  else
    e = ended(fired, "starting");
  drop();
  return e;
}

PacWorker::Reply PacWorker::exchange(const std::string& request, Deadline deadline,
                                     const std::string& owner) {
  std::shared_ptr<WorkerProcess> p = proc_;
  Reply reply;
  const uint64_t timer = KillTimer::get().arm(p, deadline + kKillGrace);
  auto reply_with = [&p](const std::string& frame) { return p->write(frame.data(), frame.size()); };
  // A DNS call's bound: the worker's own (its DNS timeout, or its run's
  // deadline, which it measures from when it read the query, a moment
  // after ours: so a lookup cut short by the run's deadline ends after the
  // worker's deadline too, and the script sees the deadline passed rather
  // than "not found"), but never past the moment the worker is killed.
  auto dnsDeadline = [&deadline](int64_t timeout_us) {
    return std::min(deadline + kKillGrace, fromUs(timeout_us));
  };
  auto read = [&p](void* b, std::size_t n) { return p->read(b, n); };
  bool alive = reply_with(request);
  while (alive) {
    wire::Type type{};
    std::string_view payload;
    const auto got = reader_->next(read, type, payload);
    if (got != wire::FrameReader::Result::Frame) {
      reply.kind =
          got == wire::FrameReader::Result::End || got == wire::FrameReader::Result::Truncated
              ? Reply::Kind::Ended
              : Reply::Kind::Garbled;
      break;
    }
    bool good = true;
    switch (type) {
      case wire::Type::Resolve: {
        wire::Resolve q;
        good = wire::decode(payload, q);
        if (!good) break;
        wire::Addresses a;
        if (env_.resolver)
          a.addresses = env_.resolver->resolve(q.host, q.v4_only, dnsDeadline(q.timeout_us), owner);
        alive = reply_with(wire::encode(a));
        break;
      }
      case wire::Type::Local: {
        wire::Local q;
        good = wire::decode(payload, q);
        if (!good) break;
        wire::Addresses a;
        if (env_.resolver) a.addresses = env_.resolver->localAddresses(dnsDeadline(q.timeout_us));
        alive = reply_with(wire::encode(a));
        break;
      }
      case wire::Type::Now: {
        wire::Now q;
        good = wire::decode(payload, q);
        if (!good) break;
        wire::Time t;
        if (env_.clock) {
          t.ms = env_.clock();
        } else {
          using namespace std::chrono;
          t.ms = static_cast<double>(
              duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count());
        }
        alive = reply_with(wire::encode(t));
        break;
      }
      case wire::Type::Alert: {
        wire::Alert a;
        good = wire::decode(payload, a);
        if (good && env_.alert) env_.alert(a.text);
        break;
      }
      case wire::Type::Loaded:
      case wire::Type::Answer:
        reply.kind = Reply::Kind::Ok;
        reply.type = type;
        reply.payload.assign(payload);
        alive = false;
        break;
      default:
        good = false;
        break;
    }
    if (!good) {
      reply.kind = Reply::Kind::Garbled;
      break;
    }
  }
  reply.killed_by_timer = KillTimer::get().disarm(timer);
  return reply;
}

PacError PacWorker::load(const std::string& text, const std::string& name, Deadline deadline,
                         unsigned* lookups_refused) {
  if (lookups_refused) *lookups_refused = 0;
  if (!proc_)
    if (PacError e = start(deadline)) return e;
  wire::Load request;
  request.timeout_us = remainingUs(deadline);
  request.name = name;
  request.text = text;
  const Reply r = exchange(wire::encode(request), deadline, "");
  wire::Loaded loaded;
  if (r.kind == Reply::Kind::Ok && !r.killed_by_timer && r.type == wire::Type::Loaded &&
      wire::decode(r.payload, loaded)) {
    if (lookups_refused) *lookups_refused = loaded.lookups_refused;
    return loaded.error;
  }
  PacError e = r.kind == Reply::Kind::Ended || r.killed_by_timer
                   ? ended(r.killed_by_timer, "loading the PAC file")
                   : PacError{PacError::Kind::Exception,
                              "the PAC worker process answered out of turn while loading"};
  drop();
  return e;
}

RawAnswer PacWorker::findProxy(const std::string& url, const std::string& host, Deadline deadline) {
  RawAnswer out;
  if (!proc_) {
    out.error = {PacError::Kind::NoScript, "no PAC worker process runs"};
    return out;
  }
  wire::Eval request;
  request.timeout_us = remainingUs(deadline);
  request.url = url;
  request.host = host;
  const Reply r = exchange(wire::encode(request), deadline, host);
  wire::Answer answer;
  if (r.kind == Reply::Kind::Ok && !r.killed_by_timer && r.type == wire::Type::Answer &&
      wire::decode(r.payload, answer))
    return std::move(answer.answer);
  out.error = r.kind == Reply::Kind::Ended || r.killed_by_timer
                  ? ended(r.killed_by_timer, "running FindProxyForURL")
                  : PacError{PacError::Kind::Exception,
                             "the PAC worker process answered out of turn while running "
                             "FindProxyForURL"};
  drop();
  return out;
}

// ---------------------------------------------------------------------------
// The worker's side.

namespace {

// The worker's channel: frames in from the evaluator, frames out. When the
// evaluator is gone there is nobody to answer: the worker ends at once.
class Channel {
 public:
  void send(const std::string& frame) {
    if (!worker_channel::write(frame.data(), frame.size())) std::_Exit(0);
  }
  // The next frame, End when the evaluator closed the channel, or exits
  // (status 2) on anything that is not a frame.
  bool next(wire::Type& type, std::string_view& payload) {
    const auto got = reader_.next([](void* b, std::size_t n) { return worker_channel::read(b, n); },
                                  type, payload);
    if (got == wire::FrameReader::Result::End) return false;
    if (got != wire::FrameReader::Result::Frame) std::_Exit(2);
    return true;
  }
  // The answer to a question: a frame of type `want`; exits when the
  // evaluator is gone (0) or says something else (2).
  std::string_view expect(wire::Type want) {
    wire::Type type{};
    std::string_view payload;
    if (!next(type, payload)) std::_Exit(0);
    if (type != want) std::_Exit(2);
    return payload;
  }

 private:
  wire::FrameReader reader_{wire::kMaxToWorker};
};

// The script's DNS questions, asked of the evaluator.
class EvaluatorResolver : public PacResolver {
 public:
  explicit EvaluatorResolver(Channel& channel) : channel_(channel) {}
  std::vector<net::IpAddress> resolve(const std::string& host, bool v4_only, Deadline deadline,
                                      std::string_view) override {
    wire::Resolve q;
    q.v4_only = v4_only;
    q.timeout_us = remainingUs(deadline);
    q.host = host;
    channel_.send(wire::encode(q));
    return addresses();
  }
  std::vector<net::IpAddress> localAddresses(Deadline deadline) override {
    wire::Local q;
    q.timeout_us = remainingUs(deadline);
    channel_.send(wire::encode(q));
    return addresses();
  }

 private:
  std::vector<net::IpAddress> addresses() {
    wire::Addresses a;
    if (!wire::decode(channel_.expect(wire::Type::Addresses), a)) std::_Exit(2);
    return std::move(a.addresses);
  }
  Channel& channel_;
};

}  // namespace

bool isPacWorker(int argc, char** argv) {
  return argc >= 2 && argv[1] != nullptr && std::string_view(argv[1]) == kWorkerFlag;
}

int runPacWorker() {
  worker_channel::prepare();
  Channel channel;
  channel.send(wire::encode(wire::Hello{}));
  wire::Setup setup;
  if (!wire::decode(channel.expect(wire::Type::Setup), setup)) return 2;
  PacEnvironment env;
  env.resolver = std::make_shared<EvaluatorResolver>(channel);
  env.heap_limit = static_cast<std::size_t>(setup.heap_limit);
  env.dns_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::microseconds(setup.dns_timeout_us));
  if (setup.own_clock)
    env.clock = [&channel] {
      channel.send(wire::encode(wire::Now{}));
      wire::Time t;
      if (!wire::decode(channel.expect(wire::Type::Time), t)) std::_Exit(2);
      return t.ms;
    };
  env.alert = [&channel](std::string_view message) {
    wire::Alert a;
    a.text.assign(message.substr(0, wire::kMaxAlert));
    channel.send(wire::encode(a));
  };

  std::unique_ptr<PacContext> ctx;
  wire::Type type{};
  std::string_view payload;
  while (channel.next(type, payload)) {
    if (type == wire::Type::Load) {
      wire::Load m;
      if (!wire::decode(payload, m)) return 2;
      auto fresh = std::make_unique<PacContext>(env);
      wire::Loaded out;
      out.error = fresh->load(m.text, m.name, fromUs(m.timeout_us));
      out.lookups_refused = fresh->lookupsRefused();
      if (!out.error) {
        ctx = std::move(fresh);
      } else {
        fresh.reset();
        worker_channel::releaseMemory();
      }
      channel.send(wire::encode(out));
    } else if (type == wire::Type::Eval) {
      wire::Eval m;
      if (!wire::decode(payload, m)) return 2;
      wire::Answer out;
      if (ctx) {
        out.answer = ctx->findProxy(m.url, m.host, fromUs(m.timeout_us));
      } else {
        out.answer.error = {PacError::Kind::NoScript, "no PAC file is loaded"};
      }
      // Cut off mid-run: the evaluator loads the file again rather than
      // trust this heap's state; give its memory back meanwhile.
      if (out.answer.error.kind == PacError::Kind::Timeout ||
          out.answer.error.kind == PacError::Kind::Memory) {
        ctx.reset();
        worker_channel::releaseMemory();
      }
      channel.send(wire::encode(out));
    } else {
      return 2;
    }
  }
  return 0;
}

}  // namespace h2gate::pac
