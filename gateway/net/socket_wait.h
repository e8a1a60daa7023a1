// Waiting on a connected stream socket the way each platform's event loop
// does it natively, for the two classes that touch sockets
// (downstream/app_socket.cc, upstream/transport.cc).
//
// asio's Windows backend is completion-based (IOCP): it has no native
// writability wait, and emulates socket.async_wait(wait_write) (and
// wait_error, and a null_buffers send) with a select() loop on a thread of
// its own (its select_reactor): one extra thread and a select() round trip
// per wait. So on Windows neither class waits with async_wait:
//  - Readable: asyncWaitReadable() below. asio turns a receive into
//    null_buffers into a readiness wait on POSIX (epoll, exactly what
//    async_wait(wait_read) does) and, on a Windows stream socket, into a
//    zero-byte overlapped WSARecv: a completion that says "bytes (or the
//    FIN, or an error) are here" without holding a buffer while idle.
//    (asio 1.22 maps async_wait(wait_read) on a stream socket to the same
//    WSARecv; this asks for it by name instead of relying on that.)
//  - Writable: sendWaitsForWritable() says how a sender on a non-blocking
//    socket goes on when send() would block. true (POSIX,
//    socket_io_posix.cc): wait for writability (async_wait(wait_write),
//    epoll) and send the same bytes again. false (Windows,
//    socket_io_win.cc): there is no such wait without the select() thread;
//    the refused bytes are handed to an overlapped send (asio::async_write)
//    that owns them until it completes, and the sender waits for that
//    completion instead.
#pragma once

#include <cstddef>
#include <utility>

#include <asio.hpp>

namespace h2gate::net {

// Completes with handler(ec) once a read on `s` would not block (bytes, the
// peer's FIN or an error), consuming nothing and holding no buffer. Cancelled
// (operation_aborted) by closing the socket.
template <typename Handler>
void asyncWaitReadable(asio::ip::tcp::socket& s, Handler&& handler) {
  s.async_receive(asio::null_buffers(), [h = std::forward<Handler>(handler)](
                                            const asio::error_code& ec, size_t) mutable { h(ec); });
}

// See above: true where a full socket is waited on for writability, false
// where the bytes it refused go to an overlapped send instead.
bool sendWaitsForWritable();

}  // namespace h2gate::net
