#include "tests/support/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>

namespace h2gate::test {

namespace {

using Clock = std::chrono::steady_clock;

sockaddr_in loopback(uint16_t port, const std::string& host = "127.0.0.1") {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1)
    throw std::invalid_argument("not an IPv4 literal: " + host);
  return sa;
}

int msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

// Non-blocking connect with a timeout; returns a blocking fd or -1 (errno set).
int connectWithTimeout(uint16_t port, const std::string& host, milliseconds timeout) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_in sa = loopback(port, host);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    if (errno != EINPROGRESS) {
      int e = errno;
      ::close(fd);
      errno = e;
      return -1;
    }
    pollfd p{fd, POLLOUT, 0};
    int r = poll(&p, 1, static_cast<int>(timeout.count()));
    int err = 0;
    socklen_t len = sizeof err;
    if (r <= 0) {
      err = ETIMEDOUT;
    } else {
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err != 0) {
      ::close(fd);
      errno = err;
      return -1;
    }
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

}  // namespace

namespace {

// A port bound on 127.0.0.1 (`port` 0: the kernel's choice), then released;
// 0 when it could not be bound.
uint16_t boundPort(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  sockaddr_in sa = loopback(port);
  socklen_t len = sizeof sa;
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
                     getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0;
  ::close(fd);
  return bound ? ntohs(sa.sin_port) : 0;
}

}  // namespace

uint16_t freePort() {
  // A random free port below the kernel's ephemeral range, never one this
  // process was given before. Not bind(0): that hands out ports of the
  // ephemeral range, which outgoing connections take as their own (a server
  // then fails to bind the port it was given: squid "commBind ... Address
  // already in use"), and with tens of thousands of short connections in
  // TIME_WAIT (two test suites at once) it kept returning the few ports left,
  // all given before (seen: 100 in a row). Ports below the range are taken only
  // by listeners. bind(0) stays the last resort.
  static std::mutex mutex;
  static std::set<uint16_t> given;
  static std::mt19937 random{std::random_device{}()};
  static const int ephemeral_low = [] {
    int low = 32768, high = 60999;  // Linux's default
    std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
    return low;
  }();
  constexpr int kLowest = 20000;
  std::lock_guard<std::mutex> lock(mutex);
  if (ephemeral_low > kLowest + 1000) {
    std::uniform_int_distribution<int> pick(kLowest, ephemeral_low - 1);
    for (int attempt = 0; attempt < 1000; ++attempt) {
      const uint16_t port = boundPort(static_cast<uint16_t>(pick(random)));
      if (port != 0 && given.insert(port).second) return port;
    }
  }
  for (int attempt = 0; attempt < 100; ++attempt) {
    const uint16_t port = boundPort(0);
    if (port != 0 && given.insert(port).second) return port;
  }
  throw std::runtime_error("no port this test process has not used yet");
}

bool waitForPort(uint16_t port, milliseconds timeout, const std::string& host) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    int fd = connectWithTimeout(port, host, milliseconds(200));
    if (fd >= 0) {
      ::close(fd);
      return true;
    }
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
}

std::optional<std::string> HttpResponse::header(const std::string& name) const {
  std::string n = lower(name);
  for (const auto& [k, v] : headers)
    if (lower(k) == n) return v;
  return std::nullopt;
}

RawConnection::RawConnection(uint16_t port, const std::string& host, milliseconds timeout) {
  fd_ = connectWithTimeout(port, host, timeout);
  if (fd_ < 0)
    throw std::runtime_error("connect " + host + ":" + std::to_string(port) + ": " +
                             strerror(errno));
}

std::unique_ptr<RawConnection> RawConnection::tryConnect(uint16_t port, const std::string& host,
                                                         milliseconds timeout) {
  try {
    return std::make_unique<RawConnection>(port, host, timeout);
  } catch (const std::runtime_error&) {
    return nullptr;
  }
}

RawConnection::~RawConnection() {
  close();
}

void RawConnection::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool RawConnection::send(const std::string& data, milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  size_t off = 0;
  while (off < data.size()) {
    pollfd p{fd_, POLLOUT, 0};
    if (poll(&p, 1, msLeft(deadline)) <= 0) return false;
    ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return true;
}

void RawConnection::shutdownWrite() {
  ::shutdown(fd_, SHUT_WR);
}

long RawConnection::fill(Clock::time_point deadline) {
  if (eof_) return 0;
  for (;;) {
    pollfd p{fd_, POLLIN, 0};
    int r = poll(&p, 1, msLeft(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    char buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // EOF or reset
      eof_ = true;
      return 0;
    }
    buffer_.append(buf, static_cast<size_t>(n));
    return n;
  }
}

HttpResponse RawConnection::readResponse(milliseconds timeout, bool head_only) {
  auto deadline = Clock::now() + timeout;
  HttpResponse resp;
  size_t head_end;
  while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
    if (fill(deadline) <= 0) {
      resp.raw = buffer_;
      buffer_.clear();
      return resp;
    }
  }
  std::string head = buffer_.substr(0, head_end);
  size_t pos = head.find("\r\n");
  resp.status_line = head.substr(0, pos);
  if (resp.status_line.rfind("HTTP/1.", 0) == 0 && resp.status_line.size() >= 12)
    resp.status = std::atoi(resp.status_line.c_str() + 9);
  while (pos != std::string::npos) {
    size_t next = head.find("\r\n", pos + 2);
    std::string line =
        head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
    size_t colon = line.find(':');
    if (colon != std::string::npos)
      resp.headers.emplace_back(trim(line.substr(0, colon)), trim(line.substr(colon + 1)));
    pos = next;
  }
  size_t body_start = head_end + 4;
  bool no_body = head_only || (resp.status >= 100 && resp.status < 200) || resp.status == 204 ||
                 resp.status == 304;
  auto te = resp.header("Transfer-Encoding");
  auto cl = resp.header("Content-Length");
  if (no_body) {
    resp.body_complete = true;
    resp.raw = buffer_.substr(0, body_start);
    buffer_.erase(0, body_start);
  } else if (te && lower(*te).find("chunked") != std::string::npos) {
    size_t p = body_start;
    for (;;) {
      size_t eol;
      while ((eol = buffer_.find("\r\n", p)) == std::string::npos)
        if (fill(deadline) <= 0) goto incomplete;
      size_t size = std::strtoul(buffer_.substr(p, eol - p).c_str(), nullptr, 16);
      if (size == 0) {  // trailers until an empty line
        size_t q = eol + 2;
        for (;;) {
          size_t e;
          while ((e = buffer_.find("\r\n", q)) == std::string::npos)
            if (fill(deadline) <= 0) goto incomplete;
          if (e == q) {
            p = e + 2;
            break;
          }
          q = e + 2;
        }
        resp.body_complete = true;
        resp.raw = buffer_.substr(0, p);
        buffer_.erase(0, p);
        return resp;
      }
      while (buffer_.size() < eol + 2 + size + 2)
        if (fill(deadline) <= 0) goto incomplete;
      resp.body.append(buffer_, eol + 2, size);
      p = eol + 2 + size + 2;
    }
  incomplete:
    resp.raw = buffer_;
    buffer_.clear();
  } else if (cl) {
    size_t n = std::strtoull(cl->c_str(), nullptr, 10);
    while (buffer_.size() < body_start + n)
      if (fill(deadline) <= 0) break;
    size_t have = std::min(buffer_.size(), body_start + n);
    resp.body = buffer_.substr(body_start, have - body_start);
    resp.body_complete = resp.body.size() == n;
    resp.raw = buffer_.substr(0, have);
    buffer_.erase(0, have);
  } else {
    while (fill(deadline) > 0) {
    }
    resp.body = buffer_.substr(body_start);
    resp.body_complete = eof_;
    resp.raw = buffer_;
    buffer_.clear();
  }
  return resp;
}

std::string RawConnection::readUntilClose(milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (fill(deadline) > 0) {
  }
  std::string out;
  out.swap(buffer_);
  return out;
}

std::string RawConnection::readExactly(size_t n, milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (buffer_.size() < n)
    if (fill(deadline) <= 0) break;
  std::string out = buffer_.substr(0, std::min(n, buffer_.size()));
  buffer_.erase(0, out.size());
  return out;
}

bool RawConnection::waitForClose(milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (!eof_)
    if (fill(deadline) < 0) return false;
  return true;
}

// ---- TcpServer

TcpServer::TcpServer(Handler handler, int backlog) : handler_(std::move(handler)) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa = loopback(0);
  socklen_t len = sizeof sa;
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      listen(listen_fd_, backlog) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error("TcpServer: bind/listen failed");
  }
  port_ = ntohs(sa.sin_port);
  accept_thread_ = std::thread([this] { acceptLoop(); });
}

TcpServer::~TcpServer() {
  stopping_ = true;
  accept_thread_.join();
  ::close(listen_fd_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  for (auto& t : threads_) t.join();
}

void TcpServer::acceptLoop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    ++accepted_;
    std::lock_guard<std::mutex> lock(mutex_);
    open_fds_.push_back(fd);
    threads_.emplace_back([this, fd] {
      handler_(fd);
      std::lock_guard<std::mutex> inner(mutex_);
      open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), fd), open_fds_.end());
      ::close(fd);
    });
  }
}

bool TcpServer::writeAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string TcpServer::readUntilEof(int fd, milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  std::string out;
  char buf[16384];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int r = poll(&p, 1, msLeft(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return out;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

TcpServer::Handler TcpServer::replyAfterEof(std::string reply) {
  return [reply](int fd) {
    readUntilEof(fd);
    writeAll(fd, reply);
  };
}

TcpServer::Handler TcpServer::echo() {
  return [](int fd) {
    char buf[16384];
    for (;;) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || !writeAll(fd, std::string(buf, static_cast<size_t>(n)))) return;
    }
  };
}

TcpServer::Handler TcpServer::slowSender(int chunks, size_t chunk_size, milliseconds pause) {
  return [=](int fd) {
    std::string chunk(chunk_size, 'x');
    for (int i = 0; i < chunks; ++i) {
      if (i > 0) std::this_thread::sleep_for(pause);
      if (!writeAll(fd, chunk)) return;
    }
  };
}

// ---- BlackholeListener

BlackholeListener::BlackholeListener() {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa = loopback(0);
  socklen_t len = sizeof sa;
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      listen(listen_fd_, 0) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error("BlackholeListener: bind/listen failed");
  }
  port_ = ntohs(sa.sin_port);
  // Fill the accept queue: connect until one connect no longer completes.
  for (int i = 0; i < 16; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in to = loopback(port_);
    int r = connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to);
    fillers_.push_back(fd);
    if (r == 0) continue;
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, 200) == 0) break;  // hanging: the queue is full
  }
}

BlackholeListener::~BlackholeListener() {
  for (int fd : fillers_) ::close(fd);
  ::close(listen_fd_);
}

bool BlackholeListener::verify() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in to = loopback(port_);
  int r = connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to);
  bool hangs = false;
  if (r != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    hangs = poll(&p, 1, 300) == 0;
  }
  ::close(fd);
  return hangs;
}

RefusingPort::RefusingPort() : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
  if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a = loopback(0);
  socklen_t n = sizeof a;
  if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n) != 0) {
    const int e = errno;
    close(fd_);
    throw std::runtime_error(std::string("bind 127.0.0.1:0: ") + std::strerror(e));
  }
  port_ = ntohs(a.sin_port);
}

RefusingPort::~RefusingPort() {
  close(fd_);
}

}  // namespace h2gate::test
