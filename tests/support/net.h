// Sockets for tests: free ports, waiting for a server, a raw HTTP/1.1 client
// for requests curl will not send (oversized heads, garbage, half-close), and
// a tiny threaded TCP server for peers that need exact behaviour (reply after
// EOF, send slowly).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace h2gate::test {

using std::chrono::milliseconds;

// Binds 127.0.0.1:0, reads the port the kernel chose, closes. Another process
// may take it before the caller binds it: fixtures that cannot bind port 0
// themselves retry with a new port.
uint16_t freePort();

// True once a TCP connect to host:port succeeds (polling), false on timeout.
bool waitForPort(uint16_t port, milliseconds timeout, const std::string& host = "127.0.0.1");

struct HttpResponse {
  std::string status_line;  // "HTTP/1.1 200 OK"
  int status = 0;           // 0: no complete head arrived
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool body_complete = false;  // all of Content-Length / chunks, or EOF with neither
  std::string raw;             // the bytes of this response (head + body as received)

  // First header with this name, case-insensitive.
  std::optional<std::string> header(const std::string& name) const;
  bool hasHeader(const std::string& name) const { return header(name).has_value(); }
};

// A blocking TCP client with timeouts on every call.
class RawConnection {
 public:
  // Throws std::runtime_error when the connect fails.
  RawConnection(uint16_t port, const std::string& host = "127.0.0.1",
                milliseconds connect_timeout = milliseconds(5000));
  // Returns nullptr instead of throwing.
  static std::unique_ptr<RawConnection> tryConnect(uint16_t port,
                                                   const std::string& host = "127.0.0.1",
                                                   milliseconds timeout = milliseconds(2000));
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  // Writes all of `data`. False when the peer closed/reset (EPIPE etc.).
  bool send(const std::string& data, milliseconds timeout = milliseconds(10000));
  // shutdown(SHUT_WR): the peer sees EOF.
  void shutdownWrite();
  void close();

  // Reads one HTTP response: the head, then the body by Content-Length,
  // chunked encoding, or until EOF when the response has neither (and is not
  // 1xx/204/304, and `head_only` is false). Bytes after it stay buffered for
  // the next call. `status` is 0 when no full head came before EOF/timeout.
  // For a HEAD request or a CONNECT 2xx pass head_only = true.
  HttpResponse readResponse(milliseconds timeout = milliseconds(10000), bool head_only = false);

  // Reads until EOF or timeout; returns buffered + new bytes.
  std::string readUntilClose(milliseconds timeout = milliseconds(10000));
  // Reads until at least `n` bytes are buffered (or EOF/timeout); returns and
  // consumes up to n.
  std::string readExactly(size_t n, milliseconds timeout = milliseconds(10000));
  // True once the peer closed (EOF or reset) within `timeout`; any bytes read
  // meanwhile are buffered.
  bool waitForClose(milliseconds timeout);
  bool eof() const { return eof_; }
  int fd() const { return fd_; }

 private:
  // Reads more into buffer_. Returns bytes read; 0 on EOF, -1 on timeout or error.
  long fill(std::chrono::steady_clock::time_point deadline);

  int fd_ = -1;
  std::string buffer_;
  bool eof_ = false;
};

// A TCP server on 127.0.0.1:<ephemeral> running `handler(fd)` on its own
// thread per accepted connection. The handler owns nothing: the server closes
// the fd after it returns. The destructor stops accepting, shuts down open
// connections (so blocked handlers return) and joins every thread.
class TcpServer {
 public:
  using Handler = std::function<void(int fd)>;
  explicit TcpServer(Handler handler, int backlog = 64);
  ~TcpServer();
  TcpServer(const TcpServer&) = delete;
  TcpServer& operator=(const TcpServer&) = delete;

  uint16_t port() const { return port_; }
  int accepted() const { return accepted_.load(); }

  // Handlers: a server that reads until EOF and then writes `reply` and closes.
  static Handler replyAfterEof(std::string reply);
  // Echoes everything back until EOF, then closes.
  static Handler echo();
  // Writes `chunks` pieces of `chunk_size` bytes ('x'), sleeping `pause`
  // between them, then closes.
  static Handler slowSender(int chunks, size_t chunk_size, milliseconds pause);

  // Helpers for handlers.
  static bool writeAll(int fd, const std::string& data);
  static std::string readUntilEof(int fd, milliseconds timeout = milliseconds(30000));

 private:
  void acceptLoop();

  Handler handler_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::mutex mutex_;
  std::vector<int> open_fds_;
  std::vector<std::thread> threads_;
  std::thread accept_thread_;
};

// A listening socket that never accepts, with its accept queue filled, so
// further connects hang in SYN-SENT: a deterministic connect timeout on
// loopback (Linux drops SYNs when the accept queue is full).
class BlackholeListener {
 public:
  BlackholeListener();
  ~BlackholeListener();
  BlackholeListener(const BlackholeListener&) = delete;
  BlackholeListener& operator=(const BlackholeListener&) = delete;
  uint16_t port() const { return port_; }
  // True when a fresh non-blocking connect did not complete within 300 ms,
  // i.e. the trick works on this kernel.
  bool verify();

 private:
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::vector<int> fillers_;
};

// A loopback port bound and never listened on: connections to it are
// refused, and no test running beside this one can take it, as one could take
// a stopped peer's port (ctest -j).
class RefusingPort {
 public:
  RefusingPort();
  ~RefusingPort();
  RefusingPort(const RefusingPort&) = delete;
  RefusingPort& operator=(const RefusingPort&) = delete;
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace h2gate::test
