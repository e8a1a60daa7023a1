#include "gateway/upstream/auth/token_threads.h"

namespace h2gate::upstream::auth {

TokenThreads& TokenThreads::instance() {
  static TokenThreads pool(kThreads);
  return pool;
}

TokenThreads::TokenThreads(size_t threads) {
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

TokenThreads::~TokenThreads() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void TokenThreads::post(std::function<void()> job) {
  {
    std::lock_guard lock(mu_);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void TokenThreads::run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

void LoopMailbox::post(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  if (io_) asio::post(*io_, std::move(fn));
}

void LoopMailbox::close() {
  std::lock_guard lock(mu_);
  io_ = nullptr;
}

}  // namespace h2gate::upstream::auth
