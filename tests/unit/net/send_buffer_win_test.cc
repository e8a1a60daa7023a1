// The tuner with the real Windows socket operations (send_buffer_win.cc) on
// real WinSock sockets over loopback. Built only by the mingw-w64 cross build
// (tests/windows/) and run under wine; the Linux build compiles this file to
// nothing. Wine answers the ideal-backlog query with a fixed 65536 on
// connected sockets and fails it (WSAENOTCONN) before connect; real Windows
// answers with a value that follows the connection's bandwidth-delay product.
#ifdef _WIN32
#include <winsock2.h>
#include <ws2tcpip.h>

#include <catch2/catch.hpp>

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "gateway/net/send_buffer.h"

// As send_buffer_win.cc defines it (mingw-w64's headers lack it).
#ifndef SIO_IDEAL_SEND_BACKLOG_QUERY
#define SIO_IDEAL_SEND_BACKLOG_QUERY 0x4004747B
#endif

using namespace h2gate::net;
using namespace std::chrono_literals;

namespace {

// WSAStartup is reference-counted: one per test case is as good as one per run.
struct WinsockSession {
  WinsockSession() {
    WSADATA data;
    REQUIRE(::WSAStartup(MAKEWORD(2, 2), &data) == 0);
  }
  ~WinsockSession() { ::WSACleanup(); }
  WinsockSession(const WinsockSession&) = delete;
  WinsockSession& operator=(const WinsockSession&) = delete;
};

// A SOCKET closed when it goes out of scope.
struct Socket {
  SOCKET s = INVALID_SOCKET;
  Socket() = default;
  explicit Socket(SOCKET h) : s(h) {}
  Socket(Socket&& o) noexcept : s(std::exchange(o.s, INVALID_SOCKET)) {}
  Socket& operator=(Socket&& o) noexcept {
    std::swap(s, o.s);
    return *this;
  }
  ~Socket() {
    if (s != INVALID_SOCKET) ::closesocket(s);
  }
  uint64_t handle() const { return static_cast<uint64_t>(s); }
};

Socket tcpSocket() {
  Socket sock(::socket(AF_INET, SOCK_STREAM, IPPROTO_TCP));
  REQUIRE(sock.s != INVALID_SOCKET);
  return sock;
}

// A connected loopback TCP pair (blocking sockets: the kernel completes the
// handshake from the listen backlog, so connect() returns before accept()).
struct Pair {
  Socket client;
  Socket server;
};

Pair connectedPair() {
  Socket listener = tcpSocket();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  REQUIRE(::bind(listener.s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(listener.s, 1) == 0);
  int len = sizeof addr;
  REQUIRE(::getsockname(listener.s, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  Pair p{tcpSocket(), Socket()};
  REQUIRE(::connect(p.client.s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
  p.server = Socket(::accept(listener.s, nullptr, nullptr));
  REQUIRE(p.server.s != INVALID_SOCKET);
  return p;
}

int sndbuf(SOCKET s) {
  int v = 0;
  int len = sizeof v;
  REQUIRE(::getsockopt(s, SOL_SOCKET, SO_SNDBUF, reinterpret_cast<char*>(&v), &len) == 0);
  return v;
}

void setSndbuf(SOCKET s, int v) {
  REQUIRE(::setsockopt(s, SOL_SOCKET, SO_SNDBUF, reinterpret_cast<const char*>(&v), sizeof v) == 0);
}

// The query as curl makes it, bypassing the backend: what the OS says.
std::optional<ULONG> queryIdealBacklog(SOCKET s) {
  ULONG value = 0;
  DWORD bytes = 0;
  if (::WSAIoctl(s, SIO_IDEAL_SEND_BACKLOG_QUERY, nullptr, 0, &value, sizeof value, &bytes, nullptr,
                 nullptr) == SOCKET_ERROR)
    return std::nullopt;
  return value;
}

bool underWine() {
  const HMODULE ntdll = ::GetModuleHandleA("ntdll.dll");
  return ntdll != nullptr && ::GetProcAddress(ntdll, "wine_get_version") != nullptr;
}

// The real operations, counted: shows which calls the tuner makes.
struct CountingOps : SocketOps {
  explicit CountingOps(std::unique_ptr<SocketOps> real) : real_(std::move(real)) {}
  std::optional<uint32_t> idealSendBacklog() override {
    ++queries;
    return real_->idealSendBacklog();
  }
  bool setSendBuffer(uint32_t bytes) override {
    sets.push_back(bytes);
    return real_->setSendBuffer(bytes);
  }
  std::optional<uint32_t> sendBuffer() override { return real_->sendBuffer(); }
  bool setNotsentLowat(uint32_t bytes) override { return real_->setNotsentLowat(bytes); }

  std::unique_ptr<SocketOps> real_;
  int queries = 0;
  std::vector<uint32_t> sets;
};

}  // namespace

TEST_CASE("windows: SIO_IDEAL_SEND_BACKLOG_QUERY is _IOR('t', 123, ULONG)",
          "[net][send_buffer][windows]") {
  STATIC_REQUIRE(SIO_IDEAL_SEND_BACKLOG_QUERY == 0x4004747B);
  STATIC_REQUIRE(_IOR('t', 123, ULONG) == SIO_IDEAL_SEND_BACKLOG_QUERY);
  CHECK(platformHasIdealBacklog());
}

TEST_CASE("windows: the query fails before connect and the tuner leaves SO_SNDBUF alone",
          "[net][send_buffer][windows]") {
  WinsockSession wsa;
  Socket sock = tcpSocket();
  setSndbuf(sock.s, 8192);  // what Windows gives non-blocking sockets

  std::unique_ptr<SocketOps> ops = systemSocketOps(sock.handle());
  const std::optional<uint32_t> ideal = ops->idealSendBacklog();
  const int err = ::WSAGetLastError();  // before Catch makes any call
  CHECK(ideal == std::nullopt);
  INFO("WSAGetLastError() = " << err);
  CHECK((err == WSAENOTCONN || err == WSAEINVAL));

  std::vector<std::pair<uint32_t, uint32_t>> changes;
  auto now = std::chrono::steady_clock::time_point{};
  SendBufferTuner tuner(
      SendBufferConfig{}, std::move(ops), [&now] { return now; },
      [&changes](uint32_t from, uint32_t to) { changes.emplace_back(from, to); });
  CHECK(tuner.effectiveMode() == SendBufferConfig::Mode::IdealBacklog);
  tuner.onConnected();
  now += 1s;
  tuner.afterSend();
  CHECK(tuner.sendBuffer() == 8192);
  CHECK(sndbuf(sock.s) == 8192);
  CHECK(changes.empty());
}

TEST_CASE("windows: auto follows the ideal send backlog on a connected socket",
          "[net][send_buffer][windows]") {
  WinsockSession wsa;
  Pair pair = connectedPair();
  setSndbuf(pair.client.s, 8192);

  const std::optional<ULONG> ideal = queryIdealBacklog(pair.client.s);
  REQUIRE(ideal.has_value());
  REQUIRE(*ideal > 0);
  if (underWine()) CHECK(*ideal == 65536);  // wine's fixed answer
  CHECK(systemSocketOps(pair.client.handle())->idealSendBacklog() == *ideal);

  auto counting = std::make_unique<CountingOps>(systemSocketOps(pair.client.handle()));
  CountingOps& ops = *counting;
  std::vector<std::pair<uint32_t, uint32_t>> changes;
  auto now = std::chrono::steady_clock::time_point{};
  SendBufferTuner tuner(
      SendBufferConfig{}, std::move(counting), [&now] { return now; },
      [&changes](uint32_t from, uint32_t to) { changes.emplace_back(from, to); });
  CHECK(tuner.effectiveMode() == SendBufferConfig::Mode::IdealBacklog);
  tuner.onConnected();

  const uint32_t want = static_cast<uint32_t>(*ideal);
  CHECK(ops.queries == 1);
  CHECK(ops.sets == std::vector<uint32_t>{want});
  CHECK(sndbuf(pair.client.s) == static_cast<int>(want));  // read back from the socket
  CHECK(tuner.sendBuffer() == want);
  CHECK(changes == std::vector<std::pair<uint32_t, uint32_t>>{{8192, want}});

  // Traffic, then a query a second later: same answer, so no setsockopt.
  const std::vector<char> data(4096, 'x');
  REQUIRE(::send(pair.client.s, data.data(), static_cast<int>(data.size()), 0) ==
          static_cast<int>(data.size()));
  now += 1s;
  tuner.afterSend();
  std::vector<char> got(data.size());
  int received = 0;
  while (received < static_cast<int>(got.size())) {
    const int n =
        ::recv(pair.server.s, got.data() + received, static_cast<int>(got.size()) - received, 0);
    REQUIRE(n > 0);
    received += n;
  }
  CHECK(got == data);
  CHECK(ops.queries == 2);
  CHECK(ops.sets.size() == 1);
  CHECK(sndbuf(pair.client.s) == static_cast<int>(want));
}

TEST_CASE("windows: fixed pins SO_SNDBUF; TCP_NOTSENT_LOWAT does not exist",
          "[net][send_buffer][windows]") {
  WinsockSession wsa;
  Pair pair = connectedPair();
  CHECK_FALSE(systemSocketOps(pair.client.handle())->setNotsentLowat(131072));

  SendBufferConfig config;
  config.mode = SendBufferConfig::Mode::Fixed;
  config.bytes = 262144;
  config.notsent_lowat = 131072;  // ignored on Windows, not an error
  auto counting = std::make_unique<CountingOps>(systemSocketOps(pair.client.handle()));
  CountingOps& ops = *counting;
  SendBufferTuner tuner(config, std::move(counting));
  tuner.onConnected();
  tuner.afterSend();
  CHECK(tuner.effectiveMode() == SendBufferConfig::Mode::Fixed);
  CHECK(ops.queries == 0);
  CHECK(sndbuf(pair.client.s) == 262144);
  CHECK(tuner.sendBuffer() == 262144);
}
#endif  // _WIN32
