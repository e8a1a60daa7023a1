// The upstream HTTP/2 session fed with arbitrary bytes from the "proxy":
// two streams (a CONNECT tunnel and an absolute-form GET) are open, the
// input arrives on a real loopback socket, then the proxy side closes.
// Nothing may crash, leak or hang, whatever the frames say.
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <asio.hpp>

#include "config/config.h"
#include "gateway/base/http_types.h"
#include "gateway/base/log.h"
#include "gateway/upstream/h2_connection.h"

namespace {

using namespace h2gate;

// An app that takes every byte at once, or every other chunk later.
class FakeApp : public upstream::TunnelCallbacks {
 public:
  explicit FakeApp(asio::io_context& io, bool slow) : io_(io), slow_(slow) {}
  void onResponseHead(ResponseHead) override {}
  void onResponseData(std::string_view data, upstream::Done done) override {
    bytes_ += data.size();
    if (slow_ && (++chunks_ % 2) == 0)
      asio::post(io_, std::move(done));
    else
      done();
  }
  void onResponseEnd() override {}
  void onFailed(int, Result, std::string) override {}
  void onReset(Result, std::string) override {}

 private:
  asio::io_context& io_;
  bool slow_;
  size_t bytes_ = 0;
  size_t chunks_ = 0;
};

struct NoOwner : upstream::H2Connection::Owner {
  void onCapacityChanged(upstream::H2Connection&) override {}
  void onConnectionClosed(upstream::H2Connection&, const std::string&, bool) override {}
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = [] {
    log::setLevel(log::Level::Off);
    return true;
  }();
  (void)quiet;
  asio::io_context io;
  // The loopback pair is harness, not code under test: when the machine is
  // out of ephemeral ports (tens of thousands of runs leave TIME_WAITs),
  // skip the input instead of aborting on asio's exception.
  asio::error_code ec;
  asio::ip::tcp::acceptor acceptor(io);
  acceptor.open(asio::ip::tcp::v4(), ec);
  if (!ec) acceptor.bind({asio::ip::address_v4::loopback(), 0}, ec);
  if (!ec) acceptor.listen(1, ec);
  asio::ip::tcp::socket client(io);
  if (!ec) client.connect(acceptor.local_endpoint(), ec);
  asio::ip::tcp::socket server(io);
  if (!ec) acceptor.accept(server, ec);
  if (ec) return 0;
  // Closing with RST leaves no TIME_WAIT behind.
  server.set_option(asio::socket_base::linger(true, 0), ec);

  config::Cluster cluster;
  cluster.name = "fuzz";
  cluster.http2.initial_stream_window_size = 65535;
  cluster.http2.initial_connection_window_size = 1 << 20;
  NoOwner owner;
  // One shard for every input: a shard per input would grow the registry.
  static metrics::Shard& shard = metrics::Registry::global().newShard();
  auto stats = upstream::makeEndpointStats(shard, cluster.name, "fuzz:443", 0);
  auto conn = std::make_shared<upstream::H2Connection>(
      std::make_unique<upstream::Transport>(std::move(client)), cluster, 1, "fuzz", &owner, stats);
  if (!conn->start().empty()) return 0;

  RequestHead connect;
  connect.method = "CONNECT";
  connect.target = "example.com:443";
  connect.is_connect = true;
  connect.host = "example.com";
  connect.port = 443;
  RequestHead get;
  get.method = "GET";
  get.target = "http://example.com/x";
  get.host = "example.com";
  get.port = 80;
  get.path = "/x";
  StreamInfo info1, info2;
  FakeApp app1(io, false), app2(io, true);
  auto s1 = std::make_shared<upstream::H2Stream>(conn, 1, 1);
  auto s2 = std::make_shared<upstream::H2Stream>(conn, 1, 2);
  s1->open(connect, info1, app1);
  s2->open(get, info2, app2);
  s2->endOfRequest();

  asio::write(server, asio::buffer(data, size));
  server.shutdown(asio::ip::tcp::socket::shutdown_send);
  // Drain what h2gate writes so it never blocks; stop at its close.
  std::array<char, 65536> sink;
  std::function<void()> drain = [&] {
    server.async_read_some(asio::buffer(sink), [&](const asio::error_code& ec, size_t) {
      if (!ec) drain();
    });
  };
  drain();
  // Until h2gate closes the connection (EOF or a protocol error), bounded.
  for (int i = 0; i < 100000 && !conn->closed(); ++i)
    if (io.run_one_for(std::chrono::milliseconds(100)) == 0) break;
  s1->abort();
  s2->abort();
  conn->close("fuzz input done");
  io.restart();
  io.run_for(std::chrono::milliseconds(20));
  return 0;
}
