// The authentication threads (gateway/upstream/auth/token_threads.h): a job
// that blocks on a slow KDC runs off the event loop and does not hold up the
// others; its result reaches the loop through a LoopMailbox, or is dropped
// once the loop's owner has gone.
#include "gateway/upstream/auth/token_threads.h"

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include <asio.hpp>
#include <catch2/catch.hpp>

#include "tests/unit/upstream/io_util.h"

using namespace h2gate::upstream::auth;
using namespace std::chrono_literals;

TEST_CASE("token threads: jobs run off the caller's thread, in order on one thread",
          "[auth][token_threads]") {
  std::vector<int> order;
  std::thread::id ran_on;
  {
    TokenThreads one(1);
    for (int i = 0; i < 50; ++i) one.post([&order, i] { order.push_back(i); });
    std::promise<std::thread::id> where;
    one.post([&] { where.set_value(std::this_thread::get_id()); });
    auto f = where.get_future();
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    ran_on = f.get();
  }
  CHECK(ran_on != std::this_thread::get_id());
  REQUIRE(order.size() == 50);
  for (int i = 0; i < 50; ++i) CHECK(order[i] == i);
}

TEST_CASE("token threads: a blocked job does not hold up the next", "[auth][token_threads]") {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> first_done{false};
  std::promise<void> second;
  TokenThreads two(2);  // joined before what its jobs use goes
  // The first waits (a slow KDC) until the second has run: only two threads
  // side by side finish both.
  two.post([&] {
    released.wait_for(10s);
    first_done = true;
  });
  two.post([&] {
    second.set_value();
    release.set_value();
  });
  CHECK(second.get_future().wait_for(10s) == std::future_status::ready);
  for (int i = 0; i < 1000 && !first_done; ++i) std::this_thread::sleep_for(10ms);
  CHECK(first_done);
}

TEST_CASE("token threads: jobs queued at shutdown still run before the join",
          "[auth][token_threads]") {
  std::atomic<int> ran{0};
  {
    TokenThreads one(1);
    std::promise<void> gate;
    std::shared_future<void> open = gate.get_future().share();
    one.post([open] { open.wait_for(10s); });
    for (int i = 0; i < 10; ++i) one.post([&] { ++ran; });
    gate.set_value();
  }  // the destructor: stop, but only once the queue is empty
  CHECK(ran == 10);
}

TEST_CASE("loop mailbox: results reach the loop's thread, none after close",
          "[auth][token_threads]") {
  asio::io_context io;
  LoopMailbox mailbox(io);
  std::thread::id delivered_on;
  bool delivered = false;
  bool late = false;
  std::promise<void> posted;
  TokenThreads one(1);  // joined before what its jobs use goes
  one.post([&] {
    mailbox.post([&] {
      delivered_on = std::this_thread::get_id();
      delivered = true;
    });
  });
  REQUIRE(h2gate::test::runUntil(
      io, [&] { return delivered; }, 10000ms));
  CHECK(delivered_on == std::this_thread::get_id());

  // The owner went away: a late result is dropped, not run on a dead owner.
  mailbox.close();
  one.post([&] {
    mailbox.post([&] { late = true; });
    posted.set_value();
  });
  REQUIRE(posted.get_future().wait_for(10s) == std::future_status::ready);
  io.restart();
  io.poll();
  CHECK_FALSE(late);
}
