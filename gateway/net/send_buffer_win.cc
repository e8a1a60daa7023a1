// The tuner's socket operations on Windows (WinSock2). Windows turns
// send-buffer autotuning off for non-blocking sockets, so the tuner follows
// the ideal send backlog the stack reports (gateway/README.md, Send
// buffers). Not in the main (Linux) build: CMake excludes *_win.cc there;
// tests/windows/ cross-builds it with mingw-w64 and runs its tests under
// wine.
//
// SIO_IDEAL_SEND_BACKLOG_CHANGE (an overlapped notification when the value
// changes) is deliberately not used: the tuner polls at most once a second
// after a send, as curl does, and wine does not implement the notification,
// so the cross-built tests could not exercise it.
#include <winsock2.h>
#include <ws2tcpip.h>

#include "gateway/net/send_buffer.h"

// mingw-w64's headers lack it: _IOR('t', 123, ULONG) from the Windows SDK's
// ws2def.h. The unit test checks the value.
#ifndef SIO_IDEAL_SEND_BACKLOG_QUERY
#define SIO_IDEAL_SEND_BACKLOG_QUERY 0x4004747B
#endif

namespace h2gate::net {
namespace {

class WinSocketOps : public SocketOps {
 public:
  explicit WinSocketOps(SOCKET sock) : sock_(sock) {}

  // SOCKET_ERROR with WSAEINVAL before Windows 7 / Server 2008 R2 and with
  // WSAENOTCONN before the socket is connected: both are nullopt, which the
  // tuner ignores (and retries a second later).
  std::optional<uint32_t> idealSendBacklog() override {
    ULONG value = 0;
    DWORD bytes = 0;
    if (::WSAIoctl(sock_, SIO_IDEAL_SEND_BACKLOG_QUERY, nullptr, 0, &value, sizeof value, &bytes,
                   nullptr, nullptr) == SOCKET_ERROR)
      return std::nullopt;
    return static_cast<uint32_t>(value);
  }

  bool setSendBuffer(uint32_t bytes) override {
    // SO_SNDBUF is an int; the tuner clamps to 16 MiB, so the cast is exact.
    const int v = static_cast<int>(bytes);
    return ::setsockopt(sock_, SOL_SOCKET, SO_SNDBUF, reinterpret_cast<const char*>(&v),
                        sizeof v) == 0;
  }

  std::optional<uint32_t> sendBuffer() override {
    int v = 0;
    int len = sizeof v;
    if (::getsockopt(sock_, SOL_SOCKET, SO_SNDBUF, reinterpret_cast<char*>(&v), &len) != 0 || v < 0)
      return std::nullopt;
    return static_cast<uint32_t>(v);
  }

  // Windows has no TCP_NOTSENT_LOWAT (nor an equivalent socket option).
  bool setNotsentLowat(uint32_t) override { return false; }

 private:
  SOCKET sock_;
};

}  // namespace

std::unique_ptr<SocketOps> systemSocketOps(uint64_t native_handle) {
  return std::make_unique<WinSocketOps>(static_cast<SOCKET>(native_handle));
}

bool platformHasIdealBacklog() {
  return true;
}

}  // namespace h2gate::net
