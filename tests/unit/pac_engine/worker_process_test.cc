// A PAC worker process (gateway/pac_engine/worker_process.h) through its
// interface, POSIX (worker_process_posix.cc: posix_spawn on a socketpair) or
// Windows (worker_process_win.cc: CreateProcessW on two pipes): this test
// binary started again as a worker (tests/unit/unit_main.cc), its channel
// carrying the wire protocol both ways, and every way it can end told as the
// log would tell it.
#include "gateway/pac_engine/worker_process.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "gateway/pac_engine/worker_protocol.h"

using namespace h2gate::pac;
using namespace std::chrono_literals;

namespace {

// The next frame from the worker: its type, or End/Truncated.
wire::FrameReader::Result nextFrame(WorkerProcess& p, wire::FrameReader& reader, wire::Type& type,
                                    std::string& payload) {
  std::string_view view;
  const auto r =
      reader.next([&](void* out, std::size_t size) { return p.read(out, size); }, type, view);
  payload = std::string(view);
  return r;
}

// A worker started, its Hello read from `reader`.
std::unique_ptr<WorkerProcess> startWorker(wire::FrameReader& reader) {
  std::string error;
  std::unique_ptr<WorkerProcess> p = WorkerProcess::start("worker_process_test", &error);
  INFO(error);
  REQUIRE(p);
  CHECK(p->pid() > 0);
  wire::Type type{};
  std::string payload;
  REQUIRE(nextFrame(*p, reader, type, payload) == wire::FrameReader::Result::Frame);
  REQUIRE(type == wire::Type::Hello);
  wire::Hello hello;
  REQUIRE(wire::decode(payload, hello));
  CHECK(hello.version == wire::kProtocolVersion);
  return p;
}

bool send(WorkerProcess& p, const std::string& frame) {
  return p.write(frame.data(), frame.size());
}

// howItEnded() once the worker has ended (bounded).
std::string ending(WorkerProcess& p) {
  for (int i = 0; i < 250; ++i) {
    const std::string how = p.howItEnded();
    if (!how.empty()) return how;
  }
  return "";
}

}  // namespace

TEST_CASE("worker process: starts, says Hello, answers over its channel", "[pac][worker_process]") {
  wire::FrameReader reader(wire::kMaxFromWorker);
  std::unique_ptr<WorkerProcess> p = startWorker(reader);
  CHECK(p->howItEnded().empty());  // running
  wire::Type type{};
  std::string payload;

  REQUIRE(send(*p, wire::encode(wire::Setup{16u << 20, 300000, false})));
  REQUIRE(send(*p, wire::encode(wire::Load{
                       5000000, "p.pac", "function FindProxyForURL(u, h) { return 'DIRECT'; }"})));
  REQUIRE(nextFrame(*p, reader, type, payload) == wire::FrameReader::Result::Frame);
  REQUIRE(type == wire::Type::Loaded);
  wire::Loaded loaded;
  REQUIRE(wire::decode(payload, loaded));
  CHECK(loaded.error.ok());

  // Its standard input closed: an idle worker exits 0 by itself.
  p->stop(5000ms);
  CHECK(ending(*p) == "exited with status 0");
}

TEST_CASE("worker process: a channel carrying something else ends it with status 2",
          "[pac][worker_process]") {
  wire::FrameReader reader(wire::kMaxFromWorker);
  std::unique_ptr<WorkerProcess> p = startWorker(reader);
  wire::Type type{};
  std::string payload;
  // An Alert where the Setup belongs.
  send(*p, wire::encode(wire::Alert{"not a setup"}));
  CHECK(nextFrame(*p, reader, type, payload) == wire::FrameReader::Result::End);
  CHECK(ending(*p) == "exited with status 2");
}

TEST_CASE("worker process: kill() from another thread ends a blocked read",
          "[pac][worker_process]") {
  wire::FrameReader reader(wire::kMaxFromWorker);
  std::unique_ptr<WorkerProcess> p = startWorker(reader);
  // The worker waits for its Setup; the read waits for the worker.
  std::thread killer([&] {
    std::this_thread::sleep_for(200ms);
    p->kill();
  });
  char b[16];
  const auto start = std::chrono::steady_clock::now();
  CHECK(p->read(b, sizeof b) == 0);
  killer.join();
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  const std::string how = ending(*p);
#if !defined(_WIN32)
  CHECK(how == "killed by signal 9");
#else
  CHECK_THAT(how, Catch::StartsWith("exited with status "));
#endif
  CHECK_FALSE(send(*p, wire::encode(wire::Now{})));  // nobody there to write to
  p->kill();                                         // again: nothing happens
}
