#include <winsock2.h>

#include <algorithm>
#include <climits>

#include "gateway/net/socket_io.h"
#include "gateway/net/socket_wait.h"

namespace h2gate::net {
namespace {

SocketIoResult resultOf(int n) {
  SocketIoResult r;
  r.n = n;
  if (n == SOCKET_ERROR) {
    r.n = -1;
    const int e = WSAGetLastError();
    r.would_block = e == WSAEWOULDBLOCK || e == WSAEINTR;
    r.error = e;  // asio's system category on Windows is the WSA/Win32 one
  }
  return r;
}

int clampLen(size_t len) {
  return static_cast<int>(std::min<size_t>(len, INT_MAX));
}

}  // namespace

SocketIoResult socketSend(NativeSocket s, const void* data, size_t len) {
  // WinSock raises no signal for a closed peer: no flag needed.
  return resultOf(::send(static_cast<SOCKET>(s), static_cast<const char*>(data), clampLen(len), 0));
}

SocketIoResult socketRecv(NativeSocket s, void* out, size_t len) {
  return resultOf(::recv(static_cast<SOCKET>(s), static_cast<char*>(out), clampLen(len), 0));
}

// IOCP has no writability wait; asio would emulate it with a select()
// thread (gateway/net/socket_wait.h).
bool sendWaitsForWritable() {
  return false;
}

}  // namespace h2gate::net
