#include "gateway/pac/resolver.h"

#ifdef _WIN32
#include <winsock2.h>
#include <ws2tcpip.h>
#else
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#endif

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

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

void addUsable(std::vector<filters::IpAddress>& out, const asio::ip::address& a) {
  if (!usable(a)) return;
  const filters::IpAddress ip = net::toIpAddress(a);
  if (std::find(out.begin(), out.end(), ip) == out.end()) out.push_back(ip);
}

}  // namespace

// One lookup, shared by the caller (who may give up) and the lookup thread.
struct Lookup {
  std::string host;
  bool v4_only = false;
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::vector<filters::IpAddress> result;
};

struct SystemResolver::Pool {
  std::size_t max_threads;
  std::size_t max_waiting;
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Lookup>> queue;
  std::size_t threads = 0;
  std::size_t idle = 0;
  bool stop = false;
};

namespace {

std::vector<filters::IpAddress> getaddrinfoLookup(const std::string& host, bool v4_only) {
  std::vector<filters::IpAddress> out;
  addrinfo hints{};
  hints.ai_family = v4_only ? AF_INET : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return out;
  for (const addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    filters::IpAddress ip;
    if (ai->ai_family == AF_INET) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(ai->ai_addr);
      std::memcpy(ip.bytes.data(), &sin->sin_addr, 4);
    } else if (ai->ai_family == AF_INET6 && !v4_only) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(ai->ai_addr);
      ip.v6 = true;
      std::memcpy(ip.bytes.data(), &sin6->sin6_addr, 16);
    } else {
      continue;
    }
    bool seen = false;
    for (const filters::IpAddress& o : out) seen = seen || o == ip;
    if (!seen) out.push_back(ip);
  }
  freeaddrinfo(res);
  return out;
}

}  // namespace

void SystemResolver::lookupThread(std::shared_ptr<Pool> pool) {
  std::unique_lock lock(pool->mutex);
  while (true) {
    ++pool->idle;
    pool->cv.wait(lock, [&] { return pool->stop || !pool->queue.empty(); });
    --pool->idle;
    if (pool->queue.empty()) break;  // stopping
    std::shared_ptr<Lookup> job = std::move(pool->queue.front());
    pool->queue.pop_front();
    lock.unlock();
    std::vector<filters::IpAddress> result = getaddrinfoLookup(job->host, job->v4_only);
    {
      std::lock_guard jl(job->mutex);
      job->result = std::move(result);
      job->done = true;
    }
    job->cv.notify_all();
    lock.lock();
  }
  --pool->threads;
}

SystemResolver::SystemResolver(std::size_t threads, std::size_t max_waiting)
    : pool_(std::make_shared<Pool>()) {
  pool_->max_threads = threads == 0 ? 1 : threads;
  pool_->max_waiting = max_waiting;
}

SystemResolver::~SystemResolver() {
  {
    std::lock_guard lock(pool_->mutex);
    pool_->stop = true;
    pool_->queue.clear();  // their callers are gone with us
  }
  pool_->cv.notify_all();
  // The threads are detached: one may sit in getaddrinfo() for as long as
  // the system resolver takes; it exits when that returns.
}

std::vector<filters::IpAddress> SystemResolver::resolve(const std::string& host, bool v4_only,
                                                        Deadline deadline) {
  if (host.empty() || host.size() > 255 || host.find('\0') != std::string::npos) return {};
  // Literals need no thread.
  if (std::optional<filters::IpAddress> ip = filters::parseIp(host);
      ip && host.find('%') == std::string::npos && host.front() != '[') {
    if (v4_only && ip->v6) return {};
    return {*ip};
  }
  if (std::chrono::steady_clock::now() >= deadline) return {};
  auto job = std::make_shared<Lookup>();
  job->host = host;
  job->v4_only = v4_only;
  {
    std::lock_guard lock(pool_->mutex);
    if (pool_->queue.size() >= pool_->max_waiting) return {};
    pool_->queue.push_back(job);
    if (pool_->idle < pool_->queue.size() && pool_->threads < pool_->max_threads) {
      ++pool_->threads;
      std::thread(lookupThread, pool_).detach();
    }
  }
  pool_->cv.notify_one();
  std::unique_lock jl(job->mutex);
  if (!job->cv.wait_until(jl, deadline, [&] { return job->done; })) {
    // Given up: drop it from the queue if no thread has taken it yet.
    jl.unlock();
    std::lock_guard lock(pool_->mutex);
    for (auto it = pool_->queue.begin(); it != pool_->queue.end(); ++it) {
      if (*it == job) {
        pool_->queue.erase(it);
        break;
      }
    }
    return {};
  }
  return std::move(job->result);
}

std::vector<filters::IpAddress> SystemResolver::localAddresses(Deadline) {
  std::vector<filters::IpAddress> out;
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
  std::stable_partition(out.begin(), out.end(),
                        [](const filters::IpAddress& ip) { return !ip.v6; });
  return out;
}

}  // namespace h2gate::pac
