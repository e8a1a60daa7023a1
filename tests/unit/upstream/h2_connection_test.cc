// H2Connection/H2Stream against a real HTTP/2 peer: an nghttp2 server session
// in the test, on the other end of a loopback TCP pair, driven by the same
// io_context. The test decides what the "proxy" sends and records every frame
// it receives; a fake app (TunnelCallbacks) keeps the `done` callbacks so the
// test decides when the app has taken the bytes (gateway/README.md, Flow
// control).
#include "gateway/upstream/h2_connection.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio.hpp>
#include <catch2/catch.hpp>

#include "tests/unit/upstream/io_util.h"

using namespace h2gate;
using namespace h2gate::upstream;
using namespace std::chrono_literals;
using asio::ip::tcp;

namespace {

// Byte `i` of every response body, so the app can check what it got.
char bodyByte(uint64_t i) {
  return static_cast<char>('a' + i % 26);
}

// The proxy. Frames it sends are packed by nghttp2 and written when flush()
// runs (after each read, or when the test calls a method); hold(true) keeps
// packed bytes back, to put frames "in flight" while the client acts.
class Peer : public std::enable_shared_from_this<Peer> {
 public:
  struct Frame {
    uint8_t type = 0;
    int32_t stream_id = 0;
    uint32_t error_code = 0;  // RST_STREAM
    int32_t increment = 0;    // WINDOW_UPDATE
  };
  struct Stream {
    std::string method, authority, path;
    bool request_end = false;  // END_STREAM from the client
    std::string upload;        // the client's DATA payload
    size_t avail = 0;          // response bytes the test lets go now
    bool eof = false;          // ...then END_STREAM
    uint64_t sent = 0;         // response bytes packed so far
    bool deferred = false;
  };

  explicit Peer(tcp::socket socket) : socket_(std::move(socket)) {}
  ~Peer() {
    if (session_) nghttp2_session_del(session_);
  }

  void start(const std::vector<nghttp2_settings_entry>& settings) {
    nghttp2_session_callbacks* cbs;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, &Peer::onFrameRecv);
    nghttp2_session_callbacks_set_on_header_callback(cbs, &Peer::onHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &Peer::onDataChunk);
    REQUIRE(nghttp2_session_server_new(&session_, cbs, this) == 0);
    nghttp2_session_callbacks_del(cbs);
    submitSettings(settings);
    read();
  }
  void submitSettings(const std::vector<nghttp2_settings_entry>& settings) {
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings.data(), settings.size());
    flush();
  }

  // Response head; then `avail` body bytes, then END_STREAM if `eof`.
  void respond(int32_t id, int status, size_t avail, bool eof, const Headers& extra = {}) {
    Stream& st = streams_[id];
    st.avail = avail;
    st.eof = eof;
    std::vector<std::string> store{":status", std::to_string(status)};
    for (const Header& h : extra) store.insert(store.end(), {h.name, h.value});
    std::vector<nghttp2_nv> nva;
    for (size_t i = 0; i < store.size(); i += 2)
      nva.push_back({reinterpret_cast<uint8_t*>(store[i].data()),
                     reinterpret_cast<uint8_t*>(store[i + 1].data()), store[i].size(),
                     store[i + 1].size(), NGHTTP2_NV_FLAG_NONE});
    nghttp2_data_provider provider{};
    provider.read_callback = &Peer::readBody;
    REQUIRE(nghttp2_submit_response(session_, id, nva.data(), nva.size(),
                                    avail == 0 && eof ? nullptr : &provider) == 0);
    flush();
  }
  // An interim (1xx) response head, before respond().
  void interim(int32_t id, int status) {
    std::string code = std::to_string(status);
    std::string name = ":status";
    nghttp2_nv nv{reinterpret_cast<uint8_t*>(name.data()), reinterpret_cast<uint8_t*>(code.data()),
                  name.size(), code.size(), NGHTTP2_NV_FLAG_NONE};
    REQUIRE(nghttp2_submit_headers(session_, NGHTTP2_FLAG_NONE, id, nullptr, &nv, 1, nullptr) >= 0);
    flush();
  }
  void provide(int32_t id, size_t n, bool eof) {
    Stream& st = streams_[id];
    st.avail += n;
    st.eof = st.eof || eof;
    if (st.deferred) {
      st.deferred = false;
      nghttp2_session_resume_data(session_, id);
    }
    flush();
  }
  void reset(int32_t id, uint32_t code) {
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, code);
    flush();
  }
  void goaway(int32_t last_stream_id) {
    nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, last_stream_id, NGHTTP2_NO_ERROR, nullptr,
                          0);
    flush();
  }
  void hold(bool on) {
    hold_ = on;
    flush();
  }
  void close() {
    asio::error_code ec;
    socket_.close(ec);
  }

  int32_t idOf(const std::string& authority) const {
    for (const auto& [id, st] : streams_)
      if (st.authority == authority) return id;
    return 0;
  }
  Stream& stream(int32_t id) { return streams_[id]; }
  size_t count(uint8_t type, int32_t stream_id) const {
    return std::count_if(frames_.begin(), frames_.end(), [&](const Frame& f) {
      return f.type == type && f.stream_id == stream_id;
    });
  }
  int64_t windowIncrements(int32_t stream_id) const {
    int64_t sum = 0;
    for (const Frame& f : frames_)
      if (f.type == NGHTTP2_WINDOW_UPDATE && f.stream_id == stream_id) sum += f.increment;
    return sum;
  }
  std::optional<uint32_t> rstCode(int32_t stream_id) const {
    for (const Frame& f : frames_)
      if (f.type == NGHTTP2_RST_STREAM && f.stream_id == stream_id) return f.error_code;
    return std::nullopt;
  }
  // How much more the peer may send on the connection / on a stream.
  int32_t connWindow() const { return nghttp2_session_get_remote_window_size(session_); }
  int32_t streamWindow(int32_t id) const {
    return nghttp2_session_get_stream_remote_window_size(session_, id);
  }
  bool gotClientSettings() const { return count(NGHTTP2_SETTINGS, 0) > 0; }
  const std::string& error() const { return error_; }

 private:
  void read() {
    socket_.async_read_some(
        asio::buffer(buf_), [self = shared_from_this()](const asio::error_code& ec, size_t n) {
          if (ec) return;
          const ssize_t rv = nghttp2_session_mem_recv(self->session_, self->buf_.data(), n);
          if (rv < 0) {
            self->error_ = nghttp2_strerror(static_cast<int>(rv));
            return;
          }
          self->flush();
          self->read();
        });
  }
  void flush() {
    for (;;) {
      const uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n <= 0) break;
      pending_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
    }
    if (hold_ || writing_ || pending_.empty() || !socket_.is_open()) return;
    writing_ = true;
    wbuf_ = std::move(pending_);
    pending_.clear();
    asio::async_write(socket_, asio::buffer(wbuf_),
                      [self = shared_from_this()](const asio::error_code& ec, size_t) {
                        self->writing_ = false;
                        if (!ec) self->flush();
                      });
  }

  static int onFrameRecv(nghttp2_session*, const nghttp2_frame* f, void* user) {
    auto* p = static_cast<Peer*>(user);
    Frame rec{f->hd.type, f->hd.stream_id, 0, 0};
    if (f->hd.type == NGHTTP2_RST_STREAM) rec.error_code = f->rst_stream.error_code;
    if (f->hd.type == NGHTTP2_WINDOW_UPDATE) rec.increment = f->window_update.window_size_increment;
    p->frames_.push_back(rec);
    if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) &&
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
      p->streams_[f->hd.stream_id].request_end = true;
    return 0;
  }
  static int onHeader(nghttp2_session*, const nghttp2_frame* f, const uint8_t* name, size_t nlen,
                      const uint8_t* value, size_t vlen, uint8_t, void* user) {
    Stream& st = static_cast<Peer*>(user)->streams_[f->hd.stream_id];
    const std::string n(reinterpret_cast<const char*>(name), nlen);
    const std::string v(reinterpret_cast<const char*>(value), vlen);
    if (n == ":method") st.method = v;
    if (n == ":authority") st.authority = v;
    if (n == ":path") st.path = v;
    return 0;
  }
  static int onDataChunk(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len,
                         void* user) {
    static_cast<Peer*>(user)->streams_[id].upload.append(reinterpret_cast<const char*>(data), len);
    return 0;
  }
  static ssize_t readBody(nghttp2_session*, int32_t id, uint8_t* buf, size_t len, uint32_t* flags,
                          nghttp2_data_source*, void* user) {
    Stream& st = static_cast<Peer*>(user)->streams_[id];
    const size_t n = std::min(len, st.avail);
    if (n == 0 && !st.eof) {
      st.deferred = true;
      return NGHTTP2_ERR_DEFERRED;
    }
    for (size_t i = 0; i < n; ++i) buf[i] = static_cast<uint8_t>(bodyByte(st.sent + i));
    st.avail -= n;
    st.sent += n;
    if (st.avail == 0 && st.eof) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }

  tcp::socket socket_;
  nghttp2_session* session_ = nullptr;
  std::array<uint8_t, 65536> buf_{};
  std::string pending_, wbuf_;
  bool writing_ = false;
  bool hold_ = false;
  std::map<int32_t, Stream> streams_;
  std::vector<Frame> frames_;
  std::string error_;
};

struct Owner : H2Connection::Owner {
  int capacity_changes = 0;
  int closed = 0;
  void onCapacityChanged(H2Connection&) override { ++capacity_changes; }
  void onConnectionClosed(H2Connection&, const std::string&, bool) override { ++closed; }
};

// The app side of one tunnel/request.
struct H2App : TunnelCallbacks {
  std::optional<ResponseHead> head;
  std::string body;
  std::vector<Done> held;  // `done` of bytes the app has not "written" yet
  bool auto_done = false;
  int ends = 0, fails = 0, resets = 0;
  int fail_status = 0;
  bool gone = false;  // the test aborted the tunnel: no callbacks allowed
  int late = 0;       // callbacks after onFailed/onReset or after abort
  std::function<void()> on_end;
  std::function<void()> on_data;

  void onResponseHead(ResponseHead h) override {
    check();
    head = std::move(h);
  }
  void onResponseData(std::string_view data, Done done) override {
    check();
    body.append(data);
    if (auto_done)
      done();
    else
      held.push_back(std::move(done));
    if (on_data) on_data();
  }
  void onResponseEnd() override {
    check();
    ++ends;
    if (on_end) on_end();
  }
  void onFailed(int status, Result, std::string) override {
    check();
    ++fails;
    fail_status = status;
  }
  void onReset(Result, std::string) override {
    check();
    ++resets;
  }
  // The app wrote everything it was given.
  void release() {
    auto h = std::move(held);
    held.clear();
    for (Done& d : h) d();
  }
  bool bodyOk() const {
    for (size_t i = 0; i < body.size(); ++i)
      if (body[i] != bodyByte(i)) return false;
    return true;
  }
  void check() {
    if (gone || fails || resets) ++late;
  }
  // Vectored delivery (as the app-facing side takes it) when `vectored`.
  bool vectored = false;
  int v_calls = 0;
  size_t max_pieces = 0;
  bool acceptsDataV() const override { return vectored; }
  // Heads handed over together with body pieces, and how many pieces.
  int head_v_calls = 0;
  size_t head_v_pieces = 0;
  void onResponseHeadV(ResponseHead h, const std::string_view* pieces, size_t n,
                       Done done) override {
    ++head_v_calls;
    head_v_pieces += n;
    TunnelCallbacks::onResponseHeadV(std::move(h), pieces, n, std::move(done));
  }
  void onResponseDataV(const std::string_view* pieces, size_t n, Done done) override {
    check();
    ++v_calls;
    max_pieces = std::max(max_pieces, n);
    for (size_t i = 0; i < n; ++i) body.append(pieces[i]);
    if (auto_done)
      done();
    else
      held.push_back(std::move(done));
  }
};

struct Request {
  RequestHead head;
  StreamInfo info;
  H2App app;
  std::string upload;  // bytes handed to send(): alive until done
  bool upload_done = false;
  bool retried = false;
  std::shared_ptr<H2Stream> stream;  // last: dies before what it points to
};

using Settings = std::vector<nghttp2_settings_entry>;

uint64_t observations(const metrics::Histogram& h) {
  uint64_t n = 0;
  for (size_t i = 0; i <= metrics::Histogram::kBounds.size(); ++i) n += h.bucket(i);
  return n;
}

// One client connection and its peer, ready to use (SETTINGS exchanged).
struct Harness {
  asio::io_context io;
  config::Cluster cluster;
  Owner owner;
  std::shared_ptr<Peer> peer;
  std::shared_ptr<EndpointStats> stats;
  std::shared_ptr<H2Connection> conn;
  std::vector<std::unique_ptr<Request>> requests;

  // `tuner`: the connection's send-buffer tuner (the connector makes one
  // per TCP connection); none by default.
  explicit Harness(const std::function<void(config::Cluster&)>& tweak = {},
                   const Settings& peer_settings = {},
                   std::unique_ptr<net::SendBufferTuner> tuner = nullptr) {
    cluster.name = "test";
    cluster.http2.initial_stream_window_size = 65535;
    cluster.http2.initial_connection_window_size = 1u << 20;
    if (tweak) tweak(cluster);
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    tcp::socket client(io);
    client.connect(acceptor.local_endpoint());
    tcp::socket server = acceptor.accept();
    client.set_option(tcp::no_delay(true));  // as the connector does; no 40 ms stalls
    server.set_option(tcp::no_delay(true));
    peer = std::make_shared<Peer>(std::move(server));
    stats = makeEndpointStats(metrics::Registry::global().newShard(), cluster.name, "peer:443", 0);
    if (tuner) tuner->onConnected();
    conn = std::make_shared<H2Connection>(
        std::make_unique<Transport>(std::move(client), std::move(tuner)), cluster, 1, "peer",
        &owner, stats);
    REQUIRE(conn->start().empty());
    peer->start(peer_settings);
    REQUIRE(runUntil([&] { return peer->gotClientSettings() && owner.capacity_changes > 0; }));
    // The first PING (sent with the SETTINGS, for the round trip) is
    // answered: its late answer cannot stand in for a test's own PING.
    REQUIRE(runUntil([&] { return observations(stats->ping_rtt) > 0; }));
  }
  ~Harness() {
    requests.clear();
    conn->close("test finished");
    peer->close();
    io.restart();
    io.poll();
  }

  bool runUntil(const std::function<bool()>& done, std::chrono::milliseconds limit = 5s) {
    return test::runUntil(io, done, limit);
  }
  void runFor(std::chrono::milliseconds d) {
    io.restart();
    io.run_for(d);
  }

  // Opens a stream. Every request has its own host: the peer tells them apart
  // by :authority.
  Request& open(RequestHead head, bool retry_hook = false) {
    auto r = std::make_unique<Request>();
    r->head = std::move(head);
    r->stream = std::make_shared<H2Stream>(conn, 1, requests.size() + 1);
    if (retry_hook) {
      Request* raw = r.get();
      // Like the pool: the stream is dropped from inside the hook.
      r->stream->setRetryHook([raw] {
        raw->retried = true;
        raw->stream.reset();
      });
    }
    r->stream->open(r->head, r->info, r->app);
    requests.push_back(std::move(r));
    return *requests.back();
  }
  Request& connect(const std::string& host, bool retry_hook = false) {
    RequestHead h;
    h.method = "CONNECT";
    h.target = host + ":443";
    h.is_connect = true;
    h.host = host;
    h.port = 443;
    return open(std::move(h), retry_hook);
  }
  Request& request(const std::string& method, const std::string& host, size_t body,
                   bool retry_hook = false) {
    RequestHead h;
    h.method = method;
    h.target = "http://" + host + "/x";
    h.host = host;
    h.port = 80;
    h.path = "/x";
    h.framing = body > 0 ? BodyFraming::ContentLength : BodyFraming::None;
    h.content_length = body;
    return open(std::move(h), retry_hook);
  }
  // The stream id the peer saw for this request.
  int32_t idOf(const Request& r) {
    int32_t id = 0;
    const std::string authority = r.head.authority();
    REQUIRE(runUntil([&] { return (id = peer->idOf(authority)) != 0; }));
    return id;
  }
  void send(Request& r, std::string bytes) {
    r.upload = std::move(bytes);
    r.upload_done = false;
    r.stream->send(r.upload, [&r] { r.upload_done = true; });
  }
};

}  // namespace

// 1. ------------------------------------------------------------------------

TEST_CASE("h2 upstream: a stream's window is given back only for bytes the app took",
          "[upstream][h2]") {
  Harness h;
  Request& r = h.connect("a.test");
  const int32_t id = h.idOf(r);
  constexpr size_t kBody = 300000;
  h.peer->respond(id, 200, kBody, true);

  // The app takes nothing: exactly one window arrives, then the peer is stuck.
  REQUIRE(h.runUntil([&] { return r.app.body.size() == 65535; }));
  h.runFor(100ms);
  CHECK(r.app.body.size() == 65535);
  CHECK(h.peer->streamWindow(id) == 0);
  CHECK(h.peer->count(NGHTTP2_WINDOW_UPDATE, id) == 0);
  REQUIRE(r.app.head);
  CHECK(r.app.head->status == 200);

  // The app writes those bytes: exactly that much window comes back, and the
  // next window's worth flows (and is held again).
  r.app.release();
  REQUIRE(h.runUntil([&] { return r.app.body.size() == 2 * 65535; }));
  h.runFor(100ms);
  CHECK(h.peer->windowIncrements(id) == 65535);
  CHECK(r.app.body.size() == 2 * 65535);
  CHECK(h.peer->streamWindow(id) == 0);

  // From now on the app keeps up: the rest flows to the end.
  r.app.auto_done = true;
  r.app.release();
  REQUIRE(h.runUntil([&] { return r.app.ends == 1; }));
  CHECK(r.app.body.size() == kBody);
  CHECK(r.app.bodyOk());
  CHECK(h.peer->windowIncrements(id) <= static_cast<int64_t>(kBody));
  CHECK(r.app.fails + r.app.resets == 0);
}

// 2. ------------------------------------------------------------------------

TEST_CASE("h2 upstream: a slow stream holds at most its own window of the connection",
          "[upstream][h2]") {
  // Connection window 4 stream windows: B needs many connection-level
  // WINDOW_UPDATEs while A sits on a full stream window it never writes.
  Harness h([](config::Cluster& c) { c.http2.initial_connection_window_size = 4 * 65535; });
  Request& a = h.connect("a.test");
  Request& b = h.connect("b.test");
  const int32_t ida = h.idOf(a), idb = h.idOf(b);
  b.app.auto_done = true;
  constexpr size_t kBody = 2u << 20;
  h.peer->respond(ida, 200, kBody, true);
  h.peer->respond(idb, 200, kBody, true);

  REQUIRE(h.runUntil([&] { return b.app.ends == 1; }, 10s));
  CHECK(b.app.body.size() == kBody);
  CHECK(b.app.bodyOk());
  CHECK(a.app.body.size() == 65535);
  CHECK(h.peer->streamWindow(ida) == 0);
  CHECK(h.peer->count(NGHTTP2_WINDOW_UPDATE, ida) == 0);
  // What the connection still owes the peer is A's window, plus at most half
  // a connection window not yet announced. B's last WINDOW_UPDATE may still
  // be on its way when B's end is seen (under wine it sometimes is).
  CHECK(h.runUntil([&] { return h.peer->connWindow() >= 4 * 65535 - 65535 - 2 * 65535; }, 2s));
  CHECK(h.peer->windowIncrements(0) >= static_cast<int64_t>(kBody));
}

// 3. ------------------------------------------------------------------------

TEST_CASE("h2 upstream: bytes of closed streams are consumed; the connection window never leaks",
          "[upstream][h2]") {
  // Connection window == stream window: one leaked stream would stall the
  // whole connection.
  Harness h([](config::Cluster& c) { c.http2.initial_connection_window_size = 65535; });
  Request& a = h.connect("a.test");
  const int32_t ida = h.idOf(a);
  h.peer->respond(ida, 200, 16384, false);
  REQUIRE(h.runUntil([&] { return a.app.body.size() == 16384; }));

  SECTION("the app lets go while it holds bytes and more are in flight") {
    // The rest of the window is packed by the peer but held back, so it
    // reaches the client after the client reset the stream.
    h.peer->hold(true);
    h.peer->provide(ida, 65535 - 16384, false);
    CHECK(h.peer->connWindow() == 0);

    SECTION("abort") {
      a.stream->abort();
      a.app.gone = true;
    }
    SECTION("the stream object dies") {
      a.stream.reset();
      a.app.gone = true;
    }
    SECTION("abort inside onResponseData, more DATA for it in the same read") {
      a.app.on_data = [&a] {
        a.stream->abort();
        a.app.gone = true;
      };
    }
    h.peer->hold(false);
    REQUIRE(h.runUntil([&] { return h.peer->rstCode(ida).has_value(); }));
    CHECK(*h.peer->rstCode(ida) == NGHTTP2_CANCEL);
    a.app.release();  // late `done`s of an aborted stream are ignored
    REQUIRE(h.runUntil([&] { return h.peer->connWindow() == 65535; }));
    CHECK(a.app.body.size() < 65535);
    CHECK(a.app.late == 0);
  }

  SECTION("the proxy resets the stream; the app finishes writing later") {
    h.peer->provide(ida, 65535 - 16384, false);
    REQUIRE(h.runUntil([&] { return a.app.body.size() == 65535; }));
    CHECK(h.peer->connWindow() == 0);
    h.peer->reset(ida, NGHTTP2_INTERNAL_ERROR);
    REQUIRE(h.runUntil([&] { return a.app.resets == 1; }));
    h.runFor(50ms);
    CHECK(h.peer->connWindow() == 0);  // the app still has the bytes
    a.app.release();
    REQUIRE(h.runUntil([&] { return h.peer->connWindow() == 65535; }));
    CHECK(!h.peer->rstCode(ida));  // no reset back for a stream the proxy reset
  }

  // The connection is whole: another stream gets a body many windows long.
  Request& b = h.connect("b.test");
  b.app.auto_done = true;
  const int32_t idb = h.idOf(b);
  h.peer->respond(idb, 200, 10 * 65535, true);
  REQUIRE(h.runUntil([&] { return b.app.ends == 1; }));
  CHECK(b.app.body.size() == 10 * 65535);
  CHECK(h.peer->error().empty());
}

TEST_CASE("h2 upstream: a response head and the DATA that came with it reach the app together",
          "[upstream][h2]") {
  Harness h;
  Request& a = h.request("GET", "a.test", 0);
  a.app.vectored = true;
  a.app.auto_done = true;
  const int32_t id = h.idOf(a);
  // HEADERS, DATA and END_STREAM leave the peer at once: one read.
  h.peer->hold(true);
  h.peer->respond(id, 200, 1000, true);
  h.peer->hold(false);
  REQUIRE(h.runUntil([&] { return a.app.ends == 1; }));
  CHECK(a.app.head_v_calls == 1);
  CHECK(a.app.head_v_pieces >= 1);
  CHECK(a.app.v_calls == 1);  // the same pieces, through onResponseDataV (default)
  CHECK(a.app.body.size() == 1000);
  CHECK(a.app.bodyOk());
  // An app that takes no pieces at once gets the head on its own.
  Request& b = h.request("GET", "b.test", 0);
  b.app.auto_done = true;
  const int32_t idb = h.idOf(b);
  h.peer->respond(idb, 200, 1000, true);
  REQUIRE(h.runUntil([&] { return b.app.ends == 1; }));
  CHECK(b.app.head_v_calls == 0);
  CHECK(b.app.head.has_value());
  CHECK(b.app.body.size() == 1000);
}

// 4. ------------------------------------------------------------------------

TEST_CASE("h2 upstream: DATA frames that arrive together reach the app in one write",
          "[upstream][h2]") {
  // Windows of 256 KiB: the 128 KiB below is half, enough for WINDOW_UPDATE.
  Harness h([](config::Cluster& c) {
    c.http2.initial_stream_window_size = 256 * 1024;
    c.http2.initial_connection_window_size = 256 * 1024;
  });
  Request& a = h.connect("a.test");
  a.app.vectored = true;
  const int32_t ida = h.idOf(a);
  // The peer packs 8 frames of 16 KiB and lets them go at once: one read.
  h.peer->hold(true);
  h.peer->respond(ida, 200, 8 * 16384, false);
  h.peer->hold(false);
  REQUIRE(h.runUntil([&] { return a.app.body.size() == 8 * 16384; }));
  CHECK(a.app.bodyOk());
  CHECK(a.app.max_pieces >= 2);
  CHECK(a.app.v_calls < 8);
  // Their window comes back only once the app wrote them all.
  h.io.run_for(std::chrono::milliseconds(50));
  CHECK(h.peer->connWindow() == 128 * 1024);
  a.app.release();
  REQUIRE(h.runUntil([&] { return h.peer->connWindow() == 256 * 1024; }));
  CHECK(a.app.late == 0);
}

TEST_CASE("h2 upstream: END_STREAM ends a response", "[upstream][h2]") {
  Harness h;
  Request& r = h.request("GET", "a.test", 0);
  const int32_t id = h.idOf(r);
  CHECK(h.peer->stream(id).method == "GET");
  CHECK(h.peer->stream(id).path == "/x");
  CHECK(h.peer->stream(id).request_end);  // no body: END_STREAM on HEADERS
  r.app.auto_done = true;
  h.peer->respond(id, 200, 5, true, {{"content-length", "5"}});
  REQUIRE(h.runUntil([&] { return r.app.ends == 1; }));
  REQUIRE(r.app.head);
  CHECK(r.app.head->framing == BodyFraming::ContentLength);
  CHECK(r.app.head->content_length == 5);
  CHECK(r.app.body == "abcde");
  r.stream.reset();
  h.runFor(50ms);
  CHECK(r.app.fails + r.app.resets + r.app.late == 0);
  CHECK(h.peer->count(NGHTTP2_RST_STREAM, id) == 0);
}

TEST_CASE("h2 upstream: interim (1xx) heads are skipped; the final head and its body follow",
          "[upstream][h2]") {
  // nghttp2 files the final head after a 1xx as HCAT_HEADERS (as it does
  // trailers): it was dropped, and the body reached the app without a head.
  const bool vectored = GENERATE(false, true);
  Harness h;
  Request& r = h.request("GET", "a.test", 0);
  r.app.vectored = vectored;
  r.app.auto_done = true;
  const int32_t id = h.idOf(r);
  h.peer->interim(id, 103);
  h.peer->interim(id, 100);
  h.peer->respond(id, 200, 5, true, {{"content-length", "5"}});
  REQUIRE(h.runUntil([&] { return r.app.ends == 1; }));
  REQUIRE(r.app.head);
  CHECK(r.app.head->status == 200);
  CHECK(r.app.head->framing == BodyFraming::ContentLength);
  CHECK(r.app.body == "abcde");
  CHECK(r.app.fails + r.app.resets == 0);
}

TEST_CASE("h2 upstream: a CONNECT tunnel closed from both sides ends with END_STREAM, not a reset",
          "[upstream][h2]") {
  Harness h;
  Request& r = h.connect("a.test");
  const int32_t id = h.idOf(r);
  r.app.auto_done = true;
  h.peer->respond(id, 200, 0, false);
  REQUIRE(h.runUntil([&] { return r.app.head.has_value(); }));
  h.send(r, "ping");
  REQUIRE(h.runUntil([&] { return r.upload_done && h.peer->stream(id).upload == "ping"; }));

  SECTION("the app half-closes first") {
    r.stream->endOfRequest();
    REQUIRE(h.runUntil([&] { return h.peer->stream(id).request_end; }));
    h.peer->provide(id, 4, true);
    REQUIRE(h.runUntil([&] { return r.app.ends == 1; }));
  }
  SECTION("the destination half-closes first") {
    h.peer->provide(id, 4, true);
    REQUIRE(h.runUntil([&] { return r.app.ends == 1; }));
    h.send(r, "more");
    REQUIRE(h.runUntil([&] { return r.upload_done; }));
    r.stream->endOfRequest();
    REQUIRE(h.runUntil([&] { return h.peer->stream(id).request_end; }));
    CHECK(h.peer->stream(id).upload == "pingmore");
  }
  SECTION("the app ends and lets go from inside onResponseEnd") {
    r.app.on_end = [&r] {
      r.stream->endOfRequest();
      r.stream->abort();
      r.app.gone = true;
    };
    h.peer->provide(id, 4, true);
    REQUIRE(h.runUntil([&] { return h.peer->stream(id).request_end; }));
  }
  r.stream.reset();  // the downstream side lets go, as it does when both ends are closed
  h.runFor(100ms);
  CHECK(r.app.body == "abcd");
  CHECK(r.app.ends == 1);
  CHECK(r.app.fails + r.app.resets + r.app.late == 0);
  CHECK(h.peer->count(NGHTTP2_RST_STREAM, id) == 0);
  CHECK(h.conn->activeStreams() == 0);
}

TEST_CASE("h2 upstream: RST_STREAM from the proxy", "[upstream][h2]") {
  Harness h;
  Request& r = h.connect("a.test");
  const int32_t id = h.idOf(r);
  r.app.auto_done = true;

  SECTION("before the response head: onFailed(502)") {
    h.peer->reset(id, NGHTTP2_INTERNAL_ERROR);
    REQUIRE(h.runUntil([&] { return r.app.fails == 1; }));
    CHECK(r.app.fail_status == 502);
    CHECK(!r.app.head);
  }
  SECTION("REFUSED_STREAM before the response, retry hook set, nothing sent: retried") {
    Request& r2 = h.connect("b.test", /*retry_hook=*/true);
    const int32_t id2 = h.idOf(r2);
    h.peer->reset(id2, NGHTTP2_REFUSED_STREAM);
    REQUIRE(h.runUntil([&] { return r2.retried; }));
    CHECK(r2.app.fails + r2.app.resets == 0);
    h.peer->reset(id, NGHTTP2_INTERNAL_ERROR);  // r has no hook
    REQUIRE(h.runUntil([&] { return r.app.fails == 1; }));
  }
  SECTION("after the response head: onReset") {
    h.peer->respond(id, 200, 1000, false);
    REQUIRE(h.runUntil([&] { return r.app.body.size() == 1000; }));
    h.peer->reset(id, NGHTTP2_INTERNAL_ERROR);
    REQUIRE(h.runUntil([&] { return r.app.resets == 1; }));
    CHECK(r.app.fails + r.app.ends == 0);
  }
  SECTION("NO_ERROR after the head but before END_STREAM: the response was cut, onReset") {
    h.peer->respond(id, 200, 1000, false);
    REQUIRE(h.runUntil([&] { return r.app.body.size() == 1000; }));
    h.peer->reset(id, NGHTTP2_NO_ERROR);
    REQUIRE(h.runUntil([&] { return r.app.resets == 1; }, 1s));
    CHECK(r.app.fails + r.app.ends == 0);
  }
  SECTION("NO_ERROR in the middle of a plain response's body: onReset, not onResponseEnd") {
    Request& g = h.request("GET", "b.test", 0);
    const int32_t idg = h.idOf(g);
    g.app.auto_done = true;
    h.peer->respond(idg, 200, 100, false, {{"content-length", "1000"}});
    REQUIRE(h.runUntil([&] { return g.app.body.size() == 100; }));
    h.peer->reset(idg, NGHTTP2_NO_ERROR);
    REQUIRE(h.runUntil([&] { return g.app.resets == 1; }, 1s));
    CHECK(g.app.ends + g.app.late == 0);
  }
  h.runFor(50ms);
  CHECK(r.app.late == 0);
  CHECK(h.peer->count(NGHTTP2_RST_STREAM, id) == 0);  // no reset answered with a reset
}

// 5. ------------------------------------------------------------------------

TEST_CASE("h2 upstream: GOAWAY", "[upstream][h2]") {
  Harness h;
  Request& a = h.connect("a.test");
  Request& b = h.connect("b.test", /*retry_hook=*/true);
  Request& c = h.request("POST", "c.test", 4, /*retry_hook=*/true);
  const int32_t ida = h.idOf(a), idb = h.idOf(b), idc = h.idOf(c);
  REQUIRE(ida < idb);
  REQUIRE(idb < idc);
  h.send(c, "data");
  REQUIRE(h.runUntil([&] { return h.peer->stream(idc).upload == "data"; }));
  CHECK(h.conn->acceptsStreams());

  const int capacity_before = h.owner.capacity_changes;
  h.peer->goaway(ida);
  // b: nothing sent, refused → retried elsewhere. c: its body went out, so it
  // may have had effects → 502, never retried.
  REQUIRE(h.runUntil([&] { return b.retried && c.app.fails == 1; }));
  CHECK(!h.conn->acceptsStreams());
  CHECK(h.owner.capacity_changes > capacity_before);
  CHECK(b.app.fails + b.app.resets == 0);
  CHECK(!c.retried);
  CHECK(c.app.fail_status == 502);

  // a (≤ last-stream-id) finishes normally, then the connection closes itself.
  a.app.auto_done = true;
  h.peer->respond(ida, 200, 100000, true);
  REQUIRE(h.runUntil([&] { return a.app.ends == 1; }));
  CHECK(a.app.body.size() == 100000);
  CHECK(h.owner.closed == 0);
  a.stream->endOfRequest();
  REQUIRE(h.runUntil([&] { return h.owner.closed == 1 && h.peer->stream(ida).request_end; }));
  CHECK(h.peer->count(NGHTTP2_RST_STREAM, ida) == 0);
  CHECK(a.app.fails + a.app.resets + a.app.late == 0);
  CHECK(b.app.late + c.app.late == 0);
}

// 6. ------------------------------------------------------------------------

TEST_CASE("h2 upstream: SETTINGS_MAX_CONCURRENT_STREAMS and max_concurrent_streams both limit",
          "[upstream][h2]") {
  SECTION("the proxy's limit (2) is below ours (100)") {
    Harness h({}, {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 2}});
    CHECK(h.conn->acceptsStreams());
    Request& a = h.connect("a.test");
    CHECK(h.conn->acceptsStreams());
    h.connect("b.test");
    CHECK(!h.conn->acceptsStreams());

    // a ends both ways: room again, and the pool hears of it.
    const int32_t ida = h.idOf(a);
    const int before = h.owner.capacity_changes;
    h.peer->respond(ida, 200, 0, true);
    a.stream->endOfRequest();
    REQUIRE(h.runUntil([&] { return h.conn->acceptsStreams(); }));
    CHECK(h.conn->activeStreams() == 1);
    CHECK(h.owner.capacity_changes > before);

    // The proxy lowers its limit mid-connection.
    h.peer->submitSettings({{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 1}});
    REQUIRE(h.runUntil([&] { return !h.conn->acceptsStreams(); }));
  }
  SECTION("ours (1) is below the proxy's (2)") {
    Harness h([](config::Cluster& c) { c.http2.max_concurrent_streams = 1; },
              {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 2}});
    CHECK(h.conn->acceptsStreams());
    h.connect("a.test");
    CHECK(!h.conn->acceptsStreams());
  }
}

// 7. ------------------------------------------------------------------------

TEST_CASE("h2 upstream metrics: connections, streams and the PING round trip",
          "[upstream][h2][metrics]") {
  auto h = std::make_unique<Harness>();
  auto stats = h->stats;
  CHECK(stats->h2_active.value() == 1);
  CHECK(stats->h2_opened.value() == 1);
  // The first PING goes out with the SETTINGS; nghttp2 on the peer answers it.
  REQUIRE(h->runUntil([&] { return observations(stats->ping_rtt) == 1; }));

  Request& a = h->connect("a.test");
  Request& b = h->connect("b.test");
  CHECK(stats->streams.value() == 2);
  const int32_t ida = h->idOf(a);
  h->peer->respond(ida, 200, 0, true);
  a.stream->endOfRequest();
  REQUIRE(h->runUntil([&] { return stats->streams.value() == 1; }));
  // The connection dies with b still open: every gauge comes back to zero.
  h->peer->close();
  REQUIRE(h->runUntil([&] { return h->owner.closed == 1; }));
  CHECK(b.app.fails + b.app.resets == 1);
  CHECK(stats->streams.value() == 0);
  CHECK(stats->h2_active.value() == 0);
  h.reset();
  CHECK(stats->streams.value() == 0);
  CHECK(stats->h2_active.value() == 0);
}

TEST_CASE("h2 upstream metrics: streams stalled on flow control, both directions",
          "[upstream][h2][metrics]") {
  SECTION("download: the app does not take the bytes, the stream window fills") {
    Harness h;
    const ClusterStats& cs = *h.stats->cluster;
    Request& r = h.connect("a.test");
    const int32_t id = h.idOf(r);
    h.peer->respond(id, 200, 200000, true);
    REQUIRE(h.runUntil([&] { return r.app.body.size() == 65535; }));
    CHECK(cs.stalled_down.value() == 1);
    CHECK(cs.stalled_up.value() == 0);
    h.runFor(50ms);
    r.app.auto_done = true;
    r.app.release();
    REQUIRE(h.runUntil([&] { return r.app.ends == 1; }));
    CHECK(cs.stalled_down.value() == 0);
    // At least the 50 ms it sat there.
    CHECK(cs.stalled_ns_down.value() >= 50'000'000u);
  }
  SECTION("upload: the proxy's window is used up and its WINDOW_UPDATE held back") {
    Harness h;
    const ClusterStats& cs = *h.stats->cluster;
    Request& r = h.connect("a.test");
    const int32_t id = h.idOf(r);
    h.peer->respond(id, 200, 0, false);
    REQUIRE(h.runUntil([&] { return r.app.head.has_value(); }));
    h.peer->hold(true);  // no WINDOW_UPDATE reaches us
    h.send(r, std::string(200000, 'u'));
    REQUIRE(h.runUntil([&] { return cs.stalled_up.value() == 1; }));
    CHECK(!r.upload_done);
    h.runFor(50ms);
    h.peer->hold(false);
    REQUIRE(h.runUntil([&] { return r.upload_done; }));
    REQUIRE(h.runUntil([&] { return cs.stalled_up.value() == 0; }));
    CHECK(cs.stalled_ns_up.value() >= 50'000'000u);
    // Copied into frames is not yet received: wait for the peer to have it all.
    CHECK(h.runUntil([&] { return h.peer->stream(id).upload.size() == 200000; }));
  }
  SECTION("a stalled stream that is aborted is no longer counted") {
    Harness h;
    const ClusterStats& cs = *h.stats->cluster;
    Request& r = h.connect("a.test");
    h.peer->respond(h.idOf(r), 200, 100000, false);
    REQUIRE(h.runUntil([&] { return cs.stalled_down.value() == 1; }));
    r.app.gone = true;
    r.stream->abort();
    CHECK(cs.stalled_down.value() == 0);
  }
}

TEST_CASE("h2 upstream: one send-buffer tuner per connection, shared by all its streams",
          "[upstream][h2][send_buffer]") {
  // The Windows behaviour (ideal backlog) with fake socket operations and a
  // fake clock: the query rate is the connection's, whatever its streams do.
  struct Ops : net::SocketOps {
    int* queries;
    std::vector<uint32_t>* sets;
    uint32_t ideal;
    std::optional<uint32_t> idealSendBacklog() override {
      ++*queries;
      return ideal;
    }
    bool setSendBuffer(uint32_t bytes) override {
      sets->push_back(bytes);
      return true;
    }
    std::optional<uint32_t> sendBuffer() override { return sets->empty() ? 8192 : sets->back(); }
    bool setNotsentLowat(uint32_t) override { return true; }
  };
  int queries = 0;
  int clock_reads = 0;
  std::vector<uint32_t> sets;
  auto now = std::chrono::steady_clock::time_point{};
  auto ops = std::make_unique<Ops>();
  ops->queries = &queries;
  ops->sets = &sets;
  ops->ideal = 262144;
  Ops* ops_raw = ops.get();
  net::SendBufferConfig config;
  config.mode = net::SendBufferConfig::Mode::IdealBacklog;
  auto tuner = std::make_unique<net::SendBufferTuner>(config, std::move(ops), [&] {
    ++clock_reads;
    return now;
  });
  Harness h([](config::Cluster& c) { c.http2.initial_stream_window_size = 1 << 20; }, {},
            std::move(tuner));
  REQUIRE(queries == 1);  // at connect
  REQUIRE(sets == std::vector<uint32_t>{262144});

  // Eight tunnels upload at once, each in many writes of the connection.
  std::vector<Request*> rs;
  std::vector<int32_t> ids;
  for (int i = 0; i < 8; ++i) {
    Request& r = h.connect("s" + std::to_string(i) + ".test");
    ids.push_back(h.idOf(r));
    h.peer->respond(ids.back(), 200, 0, false);
    rs.push_back(&r);
  }
  REQUIRE(h.runUntil([&] {
    return std::all_of(rs.begin(), rs.end(), [](Request* r) { return r->app.head.has_value(); });
  }));
  const int reads_before = clock_reads;
  auto uploadAll = [&](char c) {
    for (Request* r : rs) h.send(*r, std::string(48 * 1024, c));
    REQUIRE(h.runUntil([&] {
      return std::all_of(rs.begin(), rs.end(), [](Request* r) { return r->upload_done; });
    }));
  };
  uploadAll('a');
  // Every successful write of the connection asked the tuner (one clock read
  // each); within the second not one more query, and nothing set again.
  CHECK(clock_reads - reads_before >= 2);
  CHECK(queries == 1);
  CHECK(sets.size() == 1);

  // A second later the next write queries once; the backlog shrank, so the
  // buffer follows it down.
  now += std::chrono::seconds(1);
  ops_raw->ideal = 65536;
  uploadAll('b');
  CHECK(queries == 2);
  CHECK(sets == std::vector<uint32_t>{262144, 65536});
  for (size_t i = 0; i < ids.size(); ++i)
    CHECK(h.runUntil([&] { return h.peer->stream(ids[i]).upload.size() == 96 * 1024; }));
}

// 8. ------------------------------------------------------------------------

TEST_CASE("h2 keepalive: a proxy that stops answering PINGs is declared dead",
          "[upstream][h2][keepalive]") {
  Harness h([](config::Cluster& c) {
    c.http2.connection_keepalive = config::Http2ProtocolOptions::Keepalive{100ms, 200ms};
  });
  Request& r = h.connect("a.test");
  h.peer->respond(h.idOf(r), 200, 0, false);
  REQUIRE(h.runUntil([&] { return r.app.head.has_value(); }));
  // Answered PINGs keep it alive.
  h.runFor(500ms);
  CHECK(h.owner.closed == 0);
  CHECK(h.peer->count(NGHTTP2_PING, 0) >= 3);
  // The proxy goes silent (nothing it sends reaches us, as behind a dead NAT).
  h.peer->hold(true);
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(h.runUntil([&] { return h.owner.closed == 1; }, 2s));
  // Within interval (+15% jitter) + timeout.
  CHECK(std::chrono::steady_clock::now() - start < 600ms);
  CHECK(r.app.resets == 1);  // the open tunnel is cut, not left hanging
  CHECK(!h.conn->acceptsStreams());
}

TEST_CASE("h2 keepalive: probe() holds new streams until the PING is answered",
          "[upstream][h2][keepalive]") {
  SECTION("answered") {
    Harness h;
    const int before = h.owner.capacity_changes;
    h.peer->hold(true);
    h.conn->probe(1s);
    CHECK(h.conn->probing());
    CHECK(!h.conn->acceptsStreams());
    h.runFor(50ms);
    h.peer->hold(false);
    REQUIRE(h.runUntil([&] { return h.conn->acceptsStreams(); }));
    CHECK(h.owner.capacity_changes > before);  // the pool hears it can place requests
    CHECK(h.owner.closed == 0);
  }
  SECTION("unanswered") {
    Harness h;
    h.peer->hold(true);
    h.conn->probe(150ms);
    REQUIRE(h.runUntil([&] { return h.owner.closed == 1; }, 1s));
  }
}

TEST_CASE("h2: a request whose connection dies before any answer is retried",
          "[upstream][h2][keepalive]") {
  Harness h;
  Request& r = h.connect("a.test", /*retry_hook=*/true);
  h.idOf(r);
  h.peer->close();
  REQUIRE(h.runUntil([&] { return h.owner.closed == 1; }));
  CHECK(r.retried);
  CHECK(r.app.fails + r.app.resets == 0);  // the app saw nothing
}
