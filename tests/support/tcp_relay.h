// A TCP relay on 127.0.0.1 for fault injection: forwards every connection
// it accepts to 127.0.0.1:target, both ways. blackholeExisting() makes the
// connections open so far go silent without closing (bytes are read and
// dropped, nothing is forwarded), like a NAT or firewall that forgot them;
// connections accepted afterwards are forwarded normally.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace h2gate::test {

class TcpRelay {
 public:
  explicit TcpRelay(uint16_t target_port);
  ~TcpRelay();
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  uint16_t port() const { return port_; }
  void blackholeExisting();
  size_t accepted() const { return accepted_.load(); }

 private:
  struct Pair {
    int a = -1;  // accepted
    int b = -1;  // to the target
    bool blackholed = false;
    bool eof[2] = {false, false};  // a, b: read side finished (not polled any more)
  };
  void run();

  uint16_t target_;
  uint16_t port_ = 0;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::atomic<size_t> accepted_{0};
  std::mutex mu_;
  std::vector<Pair> pairs_;
  std::thread thread_;
};

}  // namespace h2gate::test
