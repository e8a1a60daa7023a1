// One send() or recv() on a non-blocking stream socket, the platform's way:
// POSIX send with MSG_NOSIGNAL and errno (socket_io_posix.cc), WinSock send
// and WSAGetLastError (socket_io_win.cc). For code that drives a socket
// itself below asio (upstream/transport.cc's TLS BIO).
#pragma once

#include <cstddef>
#include <cstdint>

namespace h2gate::net {

// The socket handle as asio's native_handle() gives it (int on POSIX,
// SOCKET on Windows), widened.
using NativeSocket = uint64_t;

struct SocketIoResult {
  // Bytes moved; 0 from recv is the peer's FIN. -1: failed (see below).
  long long n = 0;
  // The call failed only because it would have to wait (EAGAIN,
  // WSAEWOULDBLOCK) or was interrupted: retry after a readiness wait.
  bool would_block = false;
  // The system error when n < 0 and !would_block (errno / WSA error), in
  // asio's system category.
  int error = 0;
};

SocketIoResult socketSend(NativeSocket s, const void* data, size_t len);
SocketIoResult socketRecv(NativeSocket s, void* out, size_t len);

}  // namespace h2gate::net
