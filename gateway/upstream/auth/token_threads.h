// Off the event loops: a small pool of threads for authentication work that
// may block on the network — the first leg of Negotiate, which asks a KDC
// for a service ticket the first time a proxy's principal is used (and when
// tickets expire); 8.6 ms against a KDC on loopback, seconds and retries
// against a slow one. The event loop hands the job over and gets the result
// back through a LoopMailbox, never waiting.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <asio.hpp>

namespace h2gate::upstream::auth {

class TokenThreads {
 public:
  static constexpr size_t kThreads = 2;
  // The process's pool, started on first use, joined at exit.
  static TokenThreads& instance();

  explicit TokenThreads(size_t threads);
  ~TokenThreads();
  TokenThreads(const TokenThreads&) = delete;
  TokenThreads& operator=(const TokenThreads&) = delete;

  // Runs `job` on one of the threads, in order of posting.
  void post(std::function<void()> job);

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// Where results go back to: a worker's event loop, for as long as its owner
// lives. post() may be called from any thread; after close() (the owner's
// destructor, on the loop's thread, before the io_context goes) results
// are dropped.
class LoopMailbox {
 public:
  explicit LoopMailbox(asio::io_context& io) : io_(&io) {}
  void post(std::function<void()> fn);
  void close();

 private:
  std::mutex mu_;
  asio::io_context* io_;
};

}  // namespace h2gate::upstream::auth
