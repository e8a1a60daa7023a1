// The tuner's socket operations on Linux and macOS. There is no ideal send
// backlog to ask for: the kernel tunes SO_SNDBUF itself unless someone sets
// it.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "gateway/net/send_buffer.h"

namespace h2gate::net {
namespace {

class PosixSocketOps : public SocketOps {
 public:
  explicit PosixSocketOps(int fd) : fd_(fd) {}
  std::optional<uint32_t> idealSendBacklog() override { return std::nullopt; }
  bool setSendBuffer(uint32_t bytes) override {
    const int v = static_cast<int>(bytes);
    return ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &v, sizeof v) == 0;
  }
  std::optional<uint32_t> sendBuffer() override {
    int v = 0;
    socklen_t len = sizeof v;
    if (::getsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &v, &len) != 0 || v < 0) return std::nullopt;
    return static_cast<uint32_t>(v);
  }
  bool setNotsentLowat(uint32_t bytes) override {
#ifdef TCP_NOTSENT_LOWAT
    const int v = static_cast<int>(bytes);
    return ::setsockopt(fd_, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, sizeof v) == 0;
#else
    (void)bytes;
    return false;
#endif
  }

 private:
  int fd_;
};

}  // namespace

std::unique_ptr<SocketOps> systemSocketOps(uint64_t native_handle) {
  return std::make_unique<PosixSocketOps>(static_cast<int>(native_handle));
}

bool platformHasIdealBacklog() {
  return false;
}

}  // namespace h2gate::net
