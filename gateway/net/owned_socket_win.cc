#include <winsock2.h>

#include "gateway/net/owned_socket.h"

namespace h2gate::net {

void OwnedSocket::reset() {
  if (valid_) ::closesocket(s_);
  valid_ = false;
}

bool listenerPerWorker() {
  return false;
}

// Not used by the Server on Windows (see the header); kept so the
// interface is whole and a duplicate can be handed to another process.
OwnedSocket duplicateListener(asio::ip::tcp::acceptor& acceptor, std::string* error) {
  WSAPROTOCOL_INFOW info{};
  if (::WSADuplicateSocketW(acceptor.native_handle(), ::GetCurrentProcessId(), &info) != 0) {
    *error = "WSADuplicateSocket of a listening socket failed: " +
             asio::error_code(::WSAGetLastError(), asio::system_category()).message();
    return {};
  }
  // WSA_FLAG_OVERLAPPED: asio's IOCP needs overlapped sockets.
  const SOCKET s = ::WSASocketW(FROM_PROTOCOL_INFO, FROM_PROTOCOL_INFO, FROM_PROTOCOL_INFO, &info,
                                0, WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
  if (s == INVALID_SOCKET) {
    *error = "WSASocket from a duplicated listening socket failed: " +
             asio::error_code(::WSAGetLastError(), asio::system_category()).message();
    return {};
  }
  return OwnedSocket(s);
}

}  // namespace h2gate::net
