// The tuner on real Linux sockets over loopback: autotuning stays on unless
// the config pins the buffer; TCP_NOTSENT_LOWAT is applied.
#ifdef __linux__
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>

#include <thread>

#include <asio.hpp>

#include "gateway/net/send_buffer.h"

using namespace h2gate::net;
using asio::ip::tcp;

namespace {

int intOption(int fd, int level, int name) {
  int v = 0;
  socklen_t len = sizeof v;
  REQUIRE(::getsockopt(fd, level, name, &v, &len) == 0);
  return v;
}

// Connects a pair over loopback, tunes the client side with `config`, sends
// `bytes` through it (a thread drains the server side) and returns the
// client's SO_SNDBUF before and after.
std::pair<int, int> bulkSend(const SendBufferConfig& config, size_t bytes, int* lowat = nullptr) {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  tcp::socket client(io);
  client.open(tcp::v4());
  // Loopback's 64 KiB MSS makes the kernel start at its maximum buffer;
  // an Ethernet-sized segment lets autotuning show: it starts small.
  const int mss = 1400;
  REQUIRE(::setsockopt(client.native_handle(), IPPROTO_TCP, TCP_MAXSEG, &mss, sizeof mss) == 0);
  client.connect(acceptor.local_endpoint());
  tcp::socket server = acceptor.accept();
  SendBufferTuner tuner(config, systemSocketOps(static_cast<uint64_t>(client.native_handle())));
  tuner.onConnected();
  const int fd = client.native_handle();
  const int before = intOption(fd, SOL_SOCKET, SO_SNDBUF);
  if (lowat) *lowat = intOption(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT);
  std::thread reader([&] {
    std::vector<char> buf(1 << 16);
    asio::error_code ec;
    size_t got = 0;
    while (got < bytes && !ec) got += server.read_some(asio::buffer(buf), ec);
  });
  const std::vector<char> chunk(1 << 20, 'x');
  for (size_t sent = 0; sent < bytes; sent += chunk.size()) {
    asio::write(client, asio::buffer(chunk));
    tuner.afterSend();
  }
  reader.join();
  return {before, intOption(fd, SOL_SOCKET, SO_SNDBUF)};
}

}  // namespace

TEST_CASE("linux: an untouched socket's send buffer grows (autotuning stays on)",
          "[net][send_buffer][linux]") {
  const auto [before, after] = bulkSend(SendBufferConfig{}, 64u << 20);
  INFO("SO_SNDBUF before " << before << ", after " << after);
  CHECK(after > before);
}

TEST_CASE("linux: a fixed send buffer keeps its size", "[net][send_buffer][linux]") {
  SendBufferConfig c;
  c.mode = SendBufferConfig::Mode::Fixed;
  c.bytes = 65536;
  const auto [before, after] = bulkSend(c, 64u << 20);
  // Linux reports twice what was set (room for its bookkeeping).
  CHECK(before == 2 * 65536);
  CHECK(after == before);
}

TEST_CASE("linux: TCP_NOTSENT_LOWAT reads back", "[net][send_buffer][linux]") {
  SendBufferConfig c;
  c.notsent_lowat = 131072;
  int lowat = 0;
  bulkSend(c, 1u << 20, &lowat);
  CHECK(lowat == 131072);
}
#endif
