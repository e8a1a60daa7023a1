// Driving an io_context from a test until something happened.
#pragma once

#include <chrono>
#include <functional>

#include <asio.hpp>

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

}  // namespace h2gate::test
