#include "gateway/pac_engine/resolver.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <list>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>

#include "gateway/base/ascii.h"
#include "gateway/base/log.h"
#include "gateway/net/host_addresses.h"

namespace h2gate::pac {
namespace {

// An address myIpAddress() may answer: not loopback, "this network",
// unspecified or link-local.
bool usable(const asio::ip::address& a) {
  if (a.is_v4()) {
    const auto b = a.to_v4().to_bytes();
    return !(b[0] == 127 || b[0] == 0 || (b[0] == 169 && b[1] == 254));
  }
  const asio::ip::address_v6 v6 = a.to_v6();
  return !(v6.is_loopback() || v6.is_unspecified() || v6.is_link_local());
}

void addUsable(std::vector<net::IpAddress>& out, const asio::ip::address& a) {
  if (!usable(a)) return;
  const net::IpAddress ip = net::toIpAddress(a);
  if (std::find(out.begin(), out.end(), ip) == out.end()) out.push_back(ip);
}

}  // namespace

namespace {

using SteadyClock = std::chrono::steady_clock;

// How long a lookup thread waits for work before it ends.
constexpr auto kIdleThreadExit = std::chrono::seconds(10);
// At most one "lookups refused" warning per resolver this often.
constexpr auto kRefusalLogInterval = std::chrono::seconds(60);

// A name from a PAC file (or a request) for a log line: printable ASCII
// only, bounded.
std::string shown(std::string_view s) {
  std::string out(s.substr(0, 100));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  if (s.size() > 100) out += "...";
  return out;
}

std::string cacheKey(const std::string& host, bool v4_only) {
  return (v4_only ? "4 " : "* ") + toLowerAscii(host);
}

}  // namespace

// One getaddrinfo() call, shared by every caller of the same name (who may
// give up) and the lookup thread. Guarded by Pool::mutex.
struct Lookup {
  std::string key;
  std::string host;
  bool v4_only = false;
  std::string owner;
  uint64_t generation = 0;  // Pool::generation when it was asked
  bool started = false;     // a thread took it
  bool done = false;
  int waiters = 0;
  std::vector<net::IpAddress> result;
  std::condition_variable cv;  // with Pool::mutex
};

struct SystemResolver::Pool {
  Options options;
  LookupFunction lookup;
  mutable std::mutex mutex;
  std::condition_variable work;
  std::deque<std::shared_ptr<Lookup>> queue;
  std::unordered_map<std::string, std::shared_ptr<Lookup>> in_flight;  // by key
  std::unordered_map<std::string, std::size_t> owners;  // lookups under way per owner
  std::size_t threads = 0;
  std::size_t idle = 0;
  bool stop = false;
  uint64_t generation = 0;  // bumped by networkChanged()
  Stats stats;
  SteadyClock::time_point next_refusal_log{};

  // Cache, most recent first.
  struct Entry {
    std::string key;
    std::vector<net::IpAddress> addresses;
    SteadyClock::time_point expires;
  };
  std::list<Entry> lru;
  std::unordered_map<std::string, std::list<Entry>::iterator> index;

  const Entry* cacheGet(const std::string& key) {
    auto it = index.find(key);
    if (it == index.end()) return nullptr;
    if (SteadyClock::now() >= it->second->expires) {
      lru.erase(it->second);
      index.erase(it);
      return nullptr;
    }
    lru.splice(lru.begin(), lru, it->second);
    return &*it->second;
  }
  void cachePut(const std::string& key, const std::vector<net::IpAddress>& addresses) {
    if (options.cache_entries == 0) return;
    const auto ttl = addresses.empty() ? options.negative_ttl : options.ttl;
    if (ttl.count() <= 0) return;
    if (auto it = index.find(key); it != index.end()) {
      lru.erase(it->second);
      index.erase(it);
    }
    lru.push_front({key, addresses, SteadyClock::now() + ttl});
    index[key] = lru.begin();
    while (lru.size() > options.cache_entries) {
      index.erase(lru.back().key);
      lru.pop_back();
    }
  }
  void release(const Lookup& job) {
    auto it = owners.find(job.owner);
    if (it != owners.end() && --it->second == 0) owners.erase(it);
    auto f = in_flight.find(job.key);
    if (f != in_flight.end() && f->second.get() == &job) in_flight.erase(f);
  }
};

// getaddrinfo() through asio's synchronous resolver (no flags, as a bare
// getaddrinfo call: no AI_ADDRCONFIG), in the calling lookup thread. The
// io_context exists only for the resolver's sake (nothing runs on it); making
// one needs descriptors, so a process out of them gets a failed lookup, as
// getaddrinfo itself would give, not an exception in the lookup thread.
std::vector<net::IpAddress> getaddrinfoLookup(const std::string& host, bool v4_only) {
  std::vector<net::IpAddress> out;
  try {
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    asio::error_code ec;
    const asio::ip::tcp::resolver::results_type results =
        v4_only
            ? resolver.resolve(asio::ip::tcp::v4(), host, "", asio::ip::resolver_base::flags(), ec)
            : resolver.resolve(host, "", asio::ip::resolver_base::flags(), ec);
    if (ec) return out;
    for (const asio::ip::tcp::resolver::results_type::value_type& entry : results) {
      const net::IpAddress ip = net::toIpAddress(entry.endpoint().address());
      if (std::find(out.begin(), out.end(), ip) == out.end()) out.push_back(ip);
    }
  } catch (const std::system_error& e) {
    H2G_LOG(Warn, 0, 0, "pac: DNS lookup of '" << shown(host) << "' not made: " << e.what());
    out.clear();
  }
  return out;
}

void SystemResolver::lookupThread(std::shared_ptr<Pool> pool) {
  std::unique_lock lock(pool->mutex);
  while (true) {
    ++pool->idle;
    const bool work = pool->work.wait_for(lock, kIdleThreadExit,
                                          [&] { return pool->stop || !pool->queue.empty(); });
    --pool->idle;
    if (!work || pool->stop) break;
    std::shared_ptr<Lookup> job = std::move(pool->queue.front());
    pool->queue.pop_front();
    job->started = true;
    lock.unlock();
    std::vector<net::IpAddress> result = pool->lookup(job->host, job->v4_only);
    lock.lock();
    if (!pool->stop && job->generation == pool->generation) pool->cachePut(job->key, result);
    job->result = std::move(result);
    job->done = true;
    pool->release(*job);
    job->cv.notify_all();
  }
  --pool->threads;
}

SystemResolver::SystemResolver() : SystemResolver(Options{}) {}

SystemResolver::SystemResolver(Options options, LookupFunction lookup)
    : pool_(std::make_shared<Pool>()) {
  pool_->options = std::move(options);
  if (pool_->options.max_threads == 0) pool_->options.max_threads = 1;
  if (pool_->options.per_owner == 0) pool_->options.per_owner = 1;
  pool_->lookup = lookup ? std::move(lookup) : LookupFunction(getaddrinfoLookup);
}

SystemResolver::~SystemResolver() {
  {
    std::lock_guard lock(pool_->mutex);
    pool_->stop = true;
    pool_->queue.clear();  // their callers are gone with us
  }
  pool_->work.notify_all();
  // The threads are detached: one may sit in getaddrinfo() for as long as
  // the system resolver takes; it exits when that returns.
}

std::vector<net::IpAddress> SystemResolver::resolve(const std::string& host, bool v4_only,
                                                    Deadline deadline, std::string_view owner) {
  if (host.empty() || host.size() > 255 || host.find('\0') != std::string::npos) return {};
  // Literals need no thread.
  if (std::optional<net::IpAddress> ip = net::parseIp(host);
      ip && host.find('%') == std::string::npos && host.front() != '[') {
    if (v4_only && ip->v6) return {};
    return {*ip};
  }
  const std::string key = cacheKey(host, v4_only);
  Pool& pool = *pool_;
  std::unique_lock lock(pool.mutex);
  if (const Pool::Entry* hit = pool.cacheGet(key)) {
    ++pool.stats.cache_hits;
    return hit->addresses;
  }
  std::shared_ptr<Lookup> job;
  if (auto it = pool.in_flight.find(key); it != pool.in_flight.end()) {
    job = it->second;
    ++pool.stats.joined;
  } else {
    if (SteadyClock::now() >= deadline) return {};
    const auto mine = pool.owners.find(std::string(owner));
    const std::size_t under_way = mine == pool.owners.end() ? 0 : mine->second;
    const bool no_thread = pool.threads >= pool.options.max_threads && pool.idle == 0;
    if (under_way >= pool.options.per_owner ||
        (no_thread && pool.queue.size() >= pool.options.max_waiting)) {
      ++pool.stats.refused;
      const auto now = SteadyClock::now();
      if (now >= pool.next_refusal_log) {
        pool.next_refusal_log = now + kRefusalLogInterval;
        const std::string who =
            owner.empty() ? std::string("the PAC file's top-level code") : "'" + shown(owner) + "'";
        if (under_way >= pool.options.per_owner)
          H2G_LOG(Warn, 0, 0,
                  "pac " << pool.options.name << ": DNS lookup of '" << shown(host) << "' for "
                         << who << " not made: " << under_way
                         << " of its lookups are still under way (does the DNS server answer?); "
                            "lookups for other requests go on (said at most once a minute)");
        else
          H2G_LOG(Warn, 0, 0,
                  "pac " << pool.options.name << ": DNS lookup of '" << shown(host) << "' for "
                         << who << " not made: " << pool.options.max_threads << " lookups run and "
                         << pool.queue.size()
                         << " wait (does the DNS server answer?) (said at most once a minute)");
      }
      return {};
    }
    job = std::make_shared<Lookup>();
    job->key = key;
    job->host = host;
    job->v4_only = v4_only;
    job->owner = std::string(owner);
    job->generation = pool.generation;
    pool.in_flight.emplace(key, job);
    ++pool.owners[job->owner];
    pool.queue.push_back(job);
    ++pool.stats.lookups;
    if (pool.idle < pool.queue.size() && pool.threads < pool.options.max_threads) {
      ++pool.threads;
      std::thread(lookupThread, pool_).detach();
    }
    pool.work.notify_one();
  }
  ++job->waiters;
  const bool done = job->cv.wait_until(lock, deadline, [&] { return job->done; });
  --job->waiters;
  if (done) return job->result;
  ++pool.stats.timed_out;
  if (!job->started && job->waiters == 0) {
    // Nobody wants it any more and no thread has taken it: drop it.
    for (auto it = pool.queue.begin(); it != pool.queue.end(); ++it) {
      if (*it == job) {
        pool.queue.erase(it);
        pool.release(*job);
        break;
      }
    }
  }
  return {};
}

void SystemResolver::networkChanged() {
  std::lock_guard lock(pool_->mutex);
  pool_->lru.clear();
  pool_->index.clear();
  ++pool_->generation;
}

SystemResolver::Stats SystemResolver::stats() const {
  std::lock_guard lock(pool_->mutex);
  Stats s = pool_->stats;
  s.threads = pool_->threads;
  return s;
}

std::vector<net::IpAddress> SystemResolver::localAddresses(Deadline) {
  std::vector<net::IpAddress> out;
  // Public resolvers' addresses only pick the route; private ranges cover
  // networks without a default route.
  for (const char* dest : {"8.8.8.8", "10.0.0.0", "172.16.0.0", "192.168.0.0"}) {
    const auto source = net::routeSourceAddress(asio::ip::make_address(dest));
    if (source && usable(*source)) {
      addUsable(out, *source);
      break;
    }
  }
  if (const auto source = net::routeSourceAddress(asio::ip::make_address("2001:4860:4860::8888")))
    addUsable(out, *source);
  if (!out.empty()) return out;
  for (const asio::ip::address& a : net::interfaceAddresses(net::Interfaces::kUp))
    addUsable(out, a);
  // IPv4 first: myIpAddress() answers with the first IPv4 address.
  std::stable_partition(out.begin(), out.end(), [](const net::IpAddress& ip) { return !ip.v6; });
  return out;
}

}  // namespace h2gate::pac
