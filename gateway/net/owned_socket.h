// A listening socket handed from the Server to a worker. POSIX: each
// worker's acceptor owns a dup() of the listener's socket, so the workers
// accept on the same port in their own event loops (owned_socket_posix.cc).
// Windows: a socket (and every duplicate of it: they share one file
// object) joins exactly one I/O completion port, the one of the event loop
// that opened it, so no worker can take a duplicate; there the Server's
// loop accepts, each connection straight into a worker's event loop
// (listenerPerWorker() false, owned_socket_win.cc; gateway/README.md,
// Platform seams).
#pragma once

#include <string>
#include <utility>

#include <asio.hpp>

namespace h2gate::net {

// int on POSIX, SOCKET on Windows (where the acceptor's native_handle_type
// is a wrapper class that converts to and from it).
using NativeListener = asio::detail::socket_type;

// One owner: closed by the destructor unless release()d.
class OwnedSocket {
 public:
  OwnedSocket() = default;
  explicit OwnedSocket(NativeListener s) : s_(s), valid_(true) {}
  OwnedSocket(OwnedSocket&& o) noexcept : s_(o.s_), valid_(std::exchange(o.valid_, false)) {}
  OwnedSocket& operator=(OwnedSocket&& o) noexcept {
    if (this != &o) {
      reset();
      s_ = o.s_;
      valid_ = std::exchange(o.valid_, false);
    }
    return *this;
  }
  OwnedSocket(const OwnedSocket&) = delete;
  OwnedSocket& operator=(const OwnedSocket&) = delete;
  ~OwnedSocket() { reset(); }
  NativeListener get() const { return s_; }
  explicit operator bool() const { return valid_; }
  NativeListener release() {
    valid_ = false;
    return s_;
  }
  void reset();

 private:
  NativeListener s_{};
  bool valid_ = false;
};

// true: workers accept on duplicates (duplicateListener); false: the
// Server accepts for them (Worker::adopt).
bool listenerPerWorker();

// A duplicate of `acceptor`'s socket for another event loop; empty with
// `*error` set when the system refuses.
OwnedSocket duplicateListener(asio::ip::tcp::acceptor& acceptor, std::string* error);

}  // namespace h2gate::net
