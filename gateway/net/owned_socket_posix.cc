#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gateway/net/owned_socket.h"

namespace h2gate::net {

void OwnedSocket::reset() {
  if (valid_) ::close(s_);
  valid_ = false;
}

bool listenerPerWorker() {
  return true;
}

OwnedSocket duplicateListener(asio::ip::tcp::acceptor& acceptor, std::string* error) {
  const int fd = ::dup(acceptor.native_handle());
  if (fd < 0) {
    *error = std::string("dup() of a listening socket failed: ") + std::strerror(errno);
    return {};
  }
  return OwnedSocket(fd);
}

}  // namespace h2gate::net
