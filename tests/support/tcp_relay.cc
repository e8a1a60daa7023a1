#include "tests/support/tcp_relay.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace h2gate::test {

TcpRelay::TcpRelay(uint16_t target_port) : target_(target_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::listen(listen_fd_, 64) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      ::pipe(wake_) != 0)
    throw std::runtime_error("TcpRelay: cannot listen");
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { run(); });
}

TcpRelay::~TcpRelay() {
  stop_ = true;
  char c = 0;
  (void)!::write(wake_[1], &c, 1);
  thread_.join();
  for (const Pair& p : pairs_) {
    ::close(p.a);
    ::close(p.b);
  }
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void TcpRelay::blackholeExisting() {
  std::lock_guard lock(mu_);
  for (Pair& p : pairs_) p.blackholed = true;
}

void TcpRelay::run() {
  std::vector<char> buf(64 * 1024);
  while (!stop_) {
    std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    {
      std::lock_guard lock(mu_);
      for (const Pair& p : pairs_) {
        // A negative fd is ignored by poll(): finished sides are not polled.
        fds.push_back({p.eof[0] ? -1 : p.a, POLLIN, 0});
        fds.push_back({p.eof[1] ? -1 : p.b, POLLIN, 0});
      }
    }
    if (::poll(fds.data(), fds.size(), 200) <= 0) continue;
    if (fds[0].revents & POLLIN) {
      const int a = ::accept(listen_fd_, nullptr, nullptr);
      if (a >= 0) {
        const int b = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        to.sin_port = htons(target_);
        if (::connect(b, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) {
          std::lock_guard lock(mu_);
          pairs_.push_back(Pair{a, b, false, {false, false}});
          ++accepted_;
        } else {
          ::close(a);
          ::close(b);
        }
      }
    }
    std::lock_guard lock(mu_);
    for (size_t i = 2; i + 1 < fds.size(); i += 2) {
      const size_t k = (i - 2) / 2;
      if (k >= pairs_.size()) break;
      Pair& p = pairs_[k];
      for (int side = 0; side < 2; ++side) {
        const pollfd& f = fds[i + side];
        if (!(f.revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const int from = side == 0 ? p.a : p.b;
        const int to = side == 0 ? p.b : p.a;
        const ssize_t n = ::read(from, buf.data(), buf.size());
        if (n <= 0) {
          p.eof[side] = true;
          if (!p.blackholed) ::shutdown(to, SHUT_WR);
          continue;
        }
        if (p.blackholed) continue;  // silently dropped
        for (ssize_t off = 0; off < n;) {
          const ssize_t w = ::write(to, buf.data() + off, static_cast<size_t>(n - off));
          if (w <= 0) break;
          off += w;
        }
      }
    }
  }
}

}  // namespace h2gate::test
