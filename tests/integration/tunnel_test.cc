// CONNECT tunnels in direct mode: half-close in both directions, and what
// SIGTERM does to tunnels in flight (drain, then cut at drain_timeout).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/socket.h>

#include <filesystem>
#include <mutex>
#include <thread>

#include "tests/support/h2gate.h"
#include "tests/support/net.h"
#include "tests/support/origin.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

H2gate::Options tunnelGateOptions(const std::string& h2gate_yaml = "") {
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  if (!h2gate_yaml.empty()) {
    o.yaml = directModeYaml(h2gate_yaml);
    o.args = {"--log-level", "debug"};
  }
  return o;
}

// CONNECTs to 127.0.0.1:port through h2gate; REQUIREs a 200.
std::unique_ptr<RawConnection> openTunnel(H2gate& gate, uint16_t port) {
  auto c = std::make_unique<RawConnection>(gate.port());
  std::string target = "127.0.0.1:" + std::to_string(port);
  REQUIRE(c->send("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"));
  auto r = c->readResponse(milliseconds(5000), /*head_only=*/true);
  REQUIRE(r.status == 200);
  return c;
}

// Records what the server side of a connection received.
struct Received {
  std::mutex mutex;
  std::string data;
  bool eof = false;
  void set(std::string d) {
    std::lock_guard<std::mutex> lock(mutex);
    data = std::move(d);
    eof = true;
  }
  std::string get() {
    std::lock_guard<std::mutex> lock(mutex);
    return data;
  }
};

bool waitFor(const std::function<bool()>& cond, milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (!cond()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

}  // namespace

TEST_CASE("half-close: the app's FIN reaches the destination, which can still answer",
          "[direct][tunnel]") {
  H2gate gate(tunnelGateOptions());
  Received got;
  TcpServer server([&](int fd) {
    got.set(TcpServer::readUntilEof(fd, milliseconds(10000)));
    TcpServer::writeAll(fd, "done");
  });
  auto c = openTunnel(gate, server.port());
  REQUIRE(c->send("hello through the tunnel"));
  c->shutdownWrite();
  CHECK(c->readUntilClose(milliseconds(5000)) == "done");
  CHECK(got.get() == "hello through the tunnel");
}

TEST_CASE("half-close: the destination's FIN reaches the app, which can still send",
          "[direct][tunnel]") {
  H2gate gate(tunnelGateOptions());
  Received got;
  TcpServer server([&](int fd) {
    TcpServer::writeAll(fd, "greeting");
    ::shutdown(fd, SHUT_WR);
    got.set(TcpServer::readUntilEof(fd, milliseconds(10000)));
  });
  auto c = openTunnel(gate, server.port());
  CHECK(c->readExactly(8, milliseconds(5000)) == "greeting");
  CHECK(c->waitForClose(milliseconds(5000)));  // EOF after the greeting
  REQUIRE(c->send("late data"));
  c->shutdownWrite();
  CHECK(waitFor([&] { return got.get() == "late data"; }, milliseconds(5000)));
}

TEST_CASE("tunnel carries bytes both ways unchanged", "[direct][tunnel]") {
  H2gate gate(tunnelGateOptions());
  TcpServer server(TcpServer::echo());
  auto c = openTunnel(gate, server.port());
  const std::string data = patternBytes(300000);
  std::thread writer([&] { c->send(data, milliseconds(20000)); });
  std::string back = c->readExactly(data.size(), milliseconds(20000));
  writer.join();
  CHECK(back.size() == data.size());
  CHECK(sha256Hex(back) == sha256Hex(data));
}

TEST_CASE("SIGTERM: stop accepting, finish the active tunnel, exit 0", "[direct][drain]") {
  H2gate gate(tunnelGateOptions("  drain_timeout: 10s\n"));
  // 6 chunks of 1000 bytes, 250 ms apart: ~1.25 s of transfer.
  TcpServer server(TcpServer::slowSender(6, 1000, milliseconds(250)));
  auto c = openTunnel(gate, server.port());
  REQUIRE(c->readExactly(1000, milliseconds(5000)).size() == 1000);
  auto idle = std::make_unique<RawConnection>(gate.port());  // an idle app connection

  const auto sigterm = Clock::now();
  gate.process().signalMain(SIGTERM);
  // The idle connection is closed promptly.
  CHECK(idle->waitForClose(milliseconds(2000)));
  // New connections are not served.
  std::this_thread::sleep_for(milliseconds(200));
  if (auto late = RawConnection::tryConnect(gate.port(), "127.0.0.1", milliseconds(500))) {
    late->send("GET http://127.0.0.1:1/ HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n");
    auto r = late->readResponse(milliseconds(2000));
    CHECK(r.status == 0);  // closed without an answer
  }
  // The tunnel completes: all bytes, then the destination's FIN.
  std::string rest = c->readUntilClose(milliseconds(8000));
  CHECK(rest.size() == 5000);
  CHECK(c->eof());
  c->close();  // the app's side of the half-closed tunnel; now h2gate can finish
  auto status = gate.process().wait(milliseconds(8000));
  REQUIRE(status);
  CHECK(status->exited);
  CHECK(status->code == 0);
  CHECK(Clock::now() - sigterm < std::chrono::seconds(6));  // did not wait for drain_timeout
}

TEST_CASE("SIGTERM: a tunnel longer than drain_timeout is cut, exit 0", "[direct][drain]") {
  H2gate gate(tunnelGateOptions("  drain_timeout: 2s\n"));
  // 100 chunks, 100 ms apart: 10 s, far beyond the 2 s drain timeout.
  TcpServer server(TcpServer::slowSender(100, 1000, milliseconds(100)));
  auto c = openTunnel(gate, server.port());
  REQUIRE(c->readExactly(1000, milliseconds(5000)).size() == 1000);
  const auto sigterm = Clock::now();
  gate.process().signalMain(SIGTERM);
  auto status = gate.process().wait(milliseconds(8000));
  auto took = Clock::now() - sigterm;
  REQUIRE(status);
  CHECK(status->exited);
  CHECK(status->code == 0);
  CHECK(took >= milliseconds(1500));
  CHECK(took < milliseconds(5000));
  std::string rest = c->readUntilClose(milliseconds(2000));
  CHECK(c->eof());
  CHECK(rest.size() < 99000);  // cut, not completed
  auto log = gate.accessLog();
  REQUIRE(log.size() == 1);
  CHECK(log[0].get("method") == "CONNECT");
  CHECK(log[0].get("result") == "drained");
}

TEST_CASE("SIGTERM during a slow curl download through nginx: the file completes",
          "[direct][drain]") {
  Nginx nginx;
  H2gate gate(tunnelGateOptions("  drain_timeout: 10s\n"));
  const TestFile& f = testFile("1m");
  TempDir out("out");
  std::string dest = out.file("slow");
  // /slow/ is limited to 512 KiB/s: about 2 s for 1 MiB.
  Process::Options o;
  o.argv = {curlBinary(),
            "-q",
            "-sS",
            "-x",
            gate.proxyUrl(),
            "--cacert",
            nginx.caCertPath(),
            "-o",
            dest,
            "--max-time",
            "30",
            nginx.httpsUrl("/slow/1m")};
  o.log_dir = out.path().string();
  o.name = "curl";
  Process curl(o);
  REQUIRE(waitFor(
      [&] {
        std::error_code ec;
        return std::filesystem::file_size(dest, ec) > 100000 && !ec;
      },
      milliseconds(10000)));
  gate.process().signalMain(SIGTERM);
  auto curl_status = curl.wait(milliseconds(15000));
  REQUIRE(curl_status);
  INFO(curl.stderrText());
  CHECK(curl_status->exited);
  CHECK(curl_status->code == 0);
  CHECK(sha256File(dest) == f.sha256);
  auto status = gate.process().wait(milliseconds(5000));
  REQUIRE(status);
  CHECK(status->exited);
  CHECK(status->code == 0);
}
