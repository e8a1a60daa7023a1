// Driving an io_context from a test until something happened.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <asio.hpp>
#if defined(ASIO_HAS_IOCP)
#include <asio/detail/select_reactor.hpp>
#endif

namespace h2gate::test {

// Runs handlers one at a time until `done` holds (true) or `limit` passed
// (false).
inline bool runUntil(asio::io_context& io, const std::function<bool()>& done,
                     std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    io.restart();
    io.run_one_for(std::chrono::milliseconds(10));
  }
  return true;
}

// Appends what has arrived on the non-blocking socket `s` to `into`
// without waiting; false once the peer closed it (EOF) or it failed.
inline bool readAvailable(asio::ip::tcp::socket& s, std::string& into) {
  char buf[4096];
  for (int i = 0; i < 1000; ++i) {
    asio::error_code ec;
    const size_t n = s.read_some(asio::buffer(buf), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) return true;
    if (ec) return false;
    into.append(buf, n);
  }
  return true;
}

// Whether asio started its select() reactor for `io`. Its Windows backend
// (IOCP) does, with a thread of its own, the first time a socket of `io` is
// waited on for readiness (socket.async_wait, a null_buffers send), which
// gateway/net/socket_wait.h keeps h2gate from doing. POSIX builds have no
// such emulation: false.
inline bool selectReactorStarted([[maybe_unused]] asio::io_context& io) {
#if defined(ASIO_HAS_IOCP)
  return asio::has_service<asio::detail::select_reactor>(io);
#else
  return false;
#endif
}

}  // namespace h2gate::test
