// The JavaScript heap a PAC file runs in (gateway/pac_engine/js_heap.h), on
// its own: the memory limit holds and the heap stays usable after a script
// hit it, the deadline and cancel() stop a script whatever it catches, and
// errors come back as the kind and one-line text the logs show.
#include "gateway/pac_engine/js_heap.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <thread>

#include "tests/unit/pac_engine/pac_test_util.h"

using namespace h2gate::pac;
using h2gate::pac::test::in;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kLimit = 4u << 20;

}  // namespace

TEST_CASE("js heap: the memory limit holds, and the heap works on after it", "[pac][js_heap]") {
  int owner = 0;
  JsHeap heap(kLimit, nullptr, &owner);
  REQUIRE(heap.valid());
  CHECK(JsHeap::ownerOf(heap.ctx()) == &owner);
  CHECK(heap.maxBytes() == kLimit);
  heap.setDeadline(in(10s));
  const PacError e = heap.runProgram("var a = []; for (;;) a.push('x' + a.length);", "grow.pac");
  CHECK(e.kind == PacError::Kind::Memory);
  CHECK(e.message == "reached its memory limit of 4096 KiB");
  CHECK(heap.allocationRefused());
  CHECK(heap.peakBytes() <= kLimit);
  CHECK(heap.bytesInUse() <= kLimit);
  // The garbage goes; the next run starts clean and succeeds.
  heap.setDeadline(in(10s));
  CHECK_FALSE(heap.allocationRefused());
  CHECK(heap.runProgram("a = null; var b = [1, 2, 3].join(',');", "after.pac").ok());
  // One allocation larger than the whole limit is refused outright.
  heap.setDeadline(in(10s));
  CHECK(heap.runProgram("var big = new ArrayBuffer(8 * 1024 * 1024);", "big.pac").kind ==
        PacError::Kind::Memory);
}

TEST_CASE("js heap: a limit too small for the engine itself", "[pac][js_heap]") {
  JsHeap heap(1024, nullptr, nullptr);
  CHECK_FALSE(heap.valid());
}

TEST_CASE("js heap: the deadline stops an endless loop, catch or no catch", "[pac][js_heap]") {
  JsHeap heap(kLimit, nullptr, nullptr);
  REQUIRE(heap.valid());
  for (const char* script : {"for (;;) {}", "for (;;) { try { for (;;) {} } catch (e) {} }",
                             "/(a+)+$/.test('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab')"}) {
    INFO(script);
    const auto start = std::chrono::steady_clock::now();
    heap.setDeadline(in(200ms));
    const PacError e = heap.runProgram(script, "loop.pac");
    CHECK(e.kind == PacError::Kind::Timeout);
    CHECK(e.message == "ran past its time limit");
    CHECK(heap.timedOut());
    CHECK(std::chrono::steady_clock::now() - start < 5s);
  }
  // Without a deadline the same heap runs to the end.
  heap.setDeadline(Deadline::max());
  CHECK_FALSE(heap.timedOut());
  CHECK(heap.runProgram("var n = 0; for (var i = 0; i < 100000; i++) n += i;", "ok.pac").ok());
}

TEST_CASE("js heap: cancel() from another thread stops the run", "[pac][js_heap]") {
  JsHeap heap(kLimit, nullptr, nullptr);
  REQUIRE(heap.valid());
  heap.setDeadline(Deadline::max());
  std::thread canceller([&] {
    std::this_thread::sleep_for(100ms);
    heap.cancel();
  });
  const auto start = std::chrono::steady_clock::now();
  const PacError e = heap.runProgram("for (;;) {}", "loop.pac");
  canceller.join();
  CHECK(e.kind == PacError::Kind::Timeout);
  CHECK(std::chrono::steady_clock::now() - start < 10s);
}

TEST_CASE("js heap: errors as kind and one clean line", "[pac][js_heap]") {
  JsHeap heap(kLimit, nullptr, nullptr);
  REQUIRE(heap.valid());
  heap.setDeadline(in(10s));
  PacError e = heap.runProgram("function f( {", "bad.pac");
  CHECK(e.kind == PacError::Kind::Syntax);
  CHECK_THAT(e.message, Catch::StartsWith("SyntaxError: "));
  CHECK_THAT(e.message, Catch::Contains("(line 1"));

  e = heap.runProgram("\n\nnull.x;", "throw.pac");
  CHECK(e.kind == PacError::Kind::Exception);
  CHECK_THAT(e.message, Catch::StartsWith("TypeError: "));
  CHECK_THAT(e.message, Catch::EndsWith("(line 3)"));

  e = heap.runProgram("throw 42;", "value.pac");
  CHECK(e.kind == PacError::Kind::Exception);
  CHECK(e.message == "uncaught value: 42");

  // Control characters become spaces (one log line); long text is cut.
  e = heap.runProgram("throw new Error('a\\nb\\rc\\x1b[31m');", "ctl.pac");
  CHECK(e.message == "Error: a b c [31m (line 1)");
  e = heap.runProgram("throw new Error(new Array(1001).join('x'));", "long.pac");
  CHECK(e.message.size() == 303);
  CHECK_THAT(e.message, Catch::EndsWith("xxx..."));

  // A thrown object whose toString throws again is still described.
  e = heap.runProgram("throw { toString: function () { throw new Error('inner'); } };", "o.pac");
  CHECK(e.kind == PacError::Kind::Exception);
  CHECK_FALSE(e.message.empty());
}

TEST_CASE("js heap: Date reads the clock it was given", "[pac][js_heap]") {
  JsHeap heap(
      kLimit, [] { return 1710498600000.0; }, nullptr);
  REQUIRE(heap.valid());
  heap.setDeadline(in(10s));
  CHECK(heap.now() == 1710498600000.0);
  CHECK(heap.runProgram("if (Date.now() !== 1710498600000) throw new Error('' + Date.now());"
                        "if (new Date().getUTCHours() !== 10) throw new Error('hours');",
                        "clock.pac")
            .ok());
  JsHeap system(kLimit, nullptr, nullptr);
  const double wall = static_cast<double>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count());
  CHECK(std::abs(system.now() - wall) < 60000);
}
