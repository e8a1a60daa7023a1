#include <sys/socket.h>

#include <cerrno>

#include "gateway/net/socket_io.h"
#include "gateway/net/socket_wait.h"

namespace h2gate::net {
namespace {

SocketIoResult resultOf(ssize_t n) {
  SocketIoResult r;
  r.n = n;
  if (n < 0) {
    r.would_block = errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    r.error = errno;
  }
  return r;
}

}  // namespace

SocketIoResult socketSend(NativeSocket s, const void* data, size_t len) {
  // MSG_NOSIGNAL: a peer that closed is EPIPE, not a SIGPIPE.
  return resultOf(::send(static_cast<int>(s), data, len, MSG_NOSIGNAL));
}

SocketIoResult socketRecv(NativeSocket s, void* out, size_t len) {
  return resultOf(::recv(static_cast<int>(s), out, len, 0));
}

// epoll reports writability natively (gateway/net/socket_wait.h).
bool sendWaitsForWritable() {
  return true;
}

}  // namespace h2gate::net
