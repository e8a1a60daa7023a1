// The app's end of a downstream connection: its TCP socket, the bytes read
// from it and not yet used, the bytes on their way to it, and how it is
// closed. The app-side twin of upstream/transport.h: these two are where
// h2gate touches sockets, so a platform backend replaces exactly these two.
//
// Reading: the owner asks for bytes (read()) and is told when some were
// added to the buffer (Handler::onAppBytes), or of the end (onAppEof) or a
// failure (onAppError). It never sees how they came: an empty, drained
// socket is waited on for readability without a buffer, so an idle
// keep-alive connection or tunnel holds no read buffer (the buffer exists
// only while bytes are there or arriving). That wait is net/socket_wait.h's:
// epoll on POSIX, a zero-byte overlapped WSARecv on Windows (IOCP).
//
// Writing is direct dispatch with tunnel.h's acknowledgement contract: a
// write goes to the socket at once (one writev for all its pieces) and only
// what the socket refuses is copied into a queue, which one asynchronous
// write (epoll on POSIX, an overlapped WSASend on Windows) owns until it
// completes; `done` runs once the bytes are written, possibly inside
// write(). The owner hands over the next
// buffer only after `done`, so the queue is bounded by one buffer per
// producer and flow control reaches the producer (the h2 stream's window,
// the upstream socket's reads).
//
// Closing: abortive (RST, nothing more sent) or lingering: our FIN, then
// whatever the app still sends is read and dropped for up to kLingerTime,
// so the kernel does not answer it with a RST that could destroy a reply
// the app has not read yet.
//
// Lifetime: the Handler owns the AppSocket (a member) and is kept alive by
// every pending operation: start() takes a weak reference to it, each
// asynchronous operation holds a strong one until its handler ran.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <asio.hpp>

#include "gateway/net/send_buffer.h"
#include "gateway/upstream/phase.h"
#include "gateway/upstream/tunnel.h"

namespace h2gate::downstream {

class AppSocket {
 public:
  using Done = upstream::Done;
  static constexpr size_t kReadSize = 64 * 1024;
  // After a graceful close, how long the app's further bytes are read and
  // dropped before the socket is closed for good.
  static constexpr auto kLingerTime = std::chrono::seconds(2);

  enum class Failure {
    Read,      // a read failed (a reset)
    Write,     // an asynchronous write failed
    WriteNow,  // write() itself found the socket broken: the owner is
               // inside a call of its own, so it closes later (close()
               // inside this one is reported: phase failed_now)
  };

  // What the socket tells its owner. Called from the socket's own
  // completion handlers, never inside a call into the AppSocket, except
  // where noted.
  class Handler {
   public:
    virtual ~Handler() = default;
    // Bytes were added to buffered().
    virtual void onAppBytes() = 0;
    // The app finished sending (FIN); every byte before it was delivered.
    virtual void onAppEof() = 0;
    // The connection is broken: record why and close abortively
    // (Failure::WriteNow: runs inside write(); close later, from a posted
    // handler).
    virtual void onAppError(const asio::error_code& ec, Failure what) = 0;
    // Queued bytes were written: the app is reading. Before the `done`
    // callbacks those bytes satisfied.
    virtual void onAppTook() = 0;
    // After closeAfterWrites(), the last queued byte was written (may run
    // inside closeAfterWrites() or write()). The owner closes.
    virtual void onAppWritesDone() = 0;
    // The socket is closed for good (after close(), once lingering ended).
    virtual void onAppClosed() = 0;
  };

  explicit AppSocket(asio::ip::tcp::socket socket);
  AppSocket(const AppSocket&) = delete;
  AppSocket& operator=(const AppSocket&) = delete;

  // Non-blocking, TCP_NODELAY and the send-buffer tuner (`tuning`, logged
  // with `conn_id`); remembers the peer's address. Nothing is read yet.
  void start(std::weak_ptr<Handler> handler, const net::SendBufferConfig& tuning, uint64_t conn_id);
  // "ip:port" of the app, or "unknown".
  const std::string& peer() const { return peer_; }
  asio::any_io_executor executor() { return socket_.get_executor(); }

  // --- reading
  // Asks for more bytes: one of onAppBytes/onAppEof/onAppError follows.
  // Does nothing while a read is pending, after EOF, once closed, or while
  // the buffer is full (the owner consumes first, then asks again).
  void read();
  // The bytes read and not consumed yet. Stable until consume() or read():
  // the owner may hand them on (a tunnel's send) without copying.
  std::string_view buffered() const {
    return {in_ ? in_.get() + in_begin_ : nullptr, in_end_ - in_begin_};
  }
  void consume(size_t n) { in_begin_ += n; }
  bool eof() const { return read_ == Read::Eof; }

  // --- writing
  void write(std::initializer_list<std::string_view> pieces, Done done) {
    write(pieces.begin(), pieces.size(), std::move(done));
  }
  void write(const std::string_view* pieces, size_t n, Done done);
  // write() of `before`, the pieces and `after` (either may be empty).
  void writeAround(std::string_view before, const std::string_view* pieces, size_t n,
                   std::string_view after, Done done);
  // While held, writes are copied aside (their `done` runs at once) and go
  // out in front of the next write, in the same writev: a response head
  // and the body bytes that came with it leave together.
  void hold(bool on) { hold_ = on; }
  // Writes what hold() kept, if anything, on its own.
  void flushHeld() {
    if (!held_.empty()) write(nullptr, 0, nullptr);
  }
  // Bytes wait for the app to read them.
  bool backlog() const { return write_ == Write::Queued || !out_.empty(); }
  // Once everything queued is written: our FIN (a tunnel passing the
  // destination's on), the socket stays open for reading.
  void shutdownAfterWrites();
  // Once everything queued is written: Handler::onAppWritesDone.
  void closeAfterWrites();
  bool closingAfterWrites() const { return end_ == End::ClosingAfterWrites; }

  // --- closing
  // Abortive: RST, closed at once. Otherwise lingering (see above). Queued
  // bytes are dropped with their `done` callbacks; Handler::onAppClosed
  // follows.
  void close(bool abortive);
  bool closed() const { return end_ == End::Lingering || end_ == End::Closed; }

 private:
  // Reading.
  //   read     what is pending                                  goes to
  //   idle     nothing                                          waiting, reading, eof
  //   waiting  a readiness wait, with no buffer (the socket     idle
  //            was drained)
  //   reading  a read into the buffer                           idle
  //   eof      the app's FIN came: nothing more is read         -
  enum class Read : uint8_t { Idle, Waiting, Reading, Eof };
  static constexpr upstream::PhaseTable<Read, 4> kRead{
      "app socket read",
      {{
          {Read::Idle, "idle", upstream::nextPhases(Read::Waiting, Read::Reading, Read::Eof)},
          {Read::Waiting, "waiting", upstream::nextPhases(Read::Idle)},
          {Read::Reading, "reading", upstream::nextPhases(Read::Idle)},
          {Read::Eof, "eof", upstream::nextPhases()},
      }}};
  static_assert(kRead.wellFormed());
  // Writing.
  //   write       where the bytes go                            goes to
  //   direct      nothing queued: a write goes straight to the  queued, failed_now
  //               socket
  //   queued      what the socket refused is queued; one        direct, failed
  //               asynchronous write owns it until it is
  //               written
  //   failed_now  write() found the socket broken and tells     failed
  //               its owner (Failure::WriteNow), which must not
  //               close() inside it (checked)
  //   failed      a write failed: nothing more is written       -
  enum class Write : uint8_t { Direct, Queued, FailedNow, Failed };
  static constexpr upstream::PhaseTable<Write, 4> kWrite{
      "app socket write",
      {{
          {Write::Direct, "direct", upstream::nextPhases(Write::Queued, Write::FailedNow)},
          {Write::Queued, "queued", upstream::nextPhases(Write::Direct, Write::Failed)},
          {Write::FailedNow, "failed_now", upstream::nextPhases(Write::Failed)},
          {Write::Failed, "failed", upstream::nextPhases()},
      }}};
  static_assert(kWrite.wellFormed());
  // How the connection ends.
  //   end                   what happens                        goes to
  //   open                  bytes go both ways                  shutdown_pending,
  //                                                             closing_after_writes,
  //                                                             lingering, closed
  //   shutdown_pending      our FIN goes after the queued       shut, closing_after_writes,
  //                         bytes (shutdownAfterWrites())       lingering, closed
  //   shut                  our FIN went; reading goes on       closing_after_writes,
  //                                                             lingering, closed
  //   closing_after_writes  the owner is told when the queued   lingering, closed
  //                         bytes are written
  //                         (closeAfterWrites())
  //   lingering             close(): our FIN went, what the     closed
  //                         app still sends is read and dropped
  //   closed                the socket is closed for good       -
  enum class End : uint8_t { Open, ShutdownPending, Shut, ClosingAfterWrites, Lingering, Closed };
  static constexpr upstream::PhaseTable<End, 6> kEnd{
      "app socket end",
      {{
          {End::Open, "open",
           upstream::nextPhases(End::ShutdownPending, End::ClosingAfterWrites, End::Lingering,
                                End::Closed)},
          {End::ShutdownPending, "shutdown_pending",
           upstream::nextPhases(End::Shut, End::ClosingAfterWrites, End::Lingering, End::Closed)},
          {End::Shut, "shut",
           upstream::nextPhases(End::ClosingAfterWrites, End::Lingering, End::Closed)},
          {End::ClosingAfterWrites, "closing_after_writes",
           upstream::nextPhases(End::Lingering, End::Closed)},
          {End::Lingering, "lingering", upstream::nextPhases(End::Closed)},
          {End::Closed, "closed", upstream::nextPhases()},
      }}};
  static_assert(kEnd.wellFormed());
  // The one place each machine's phase changes.
  void moveTo(Read to);
  void moveTo(Write to);
  void moveTo(End to);

  void onReadable(const asio::error_code& ec, Handler& h);
  void onRead(const asio::error_code& ec, size_t n, Handler& h);
  void startAsyncWrite();
  void onWritten(const asio::error_code& ec, size_t n, Handler& h);
  void lingerRead();
  void finalClose();

  asio::ip::tcp::socket socket_;
  std::weak_ptr<Handler> handler_;
  std::unique_ptr<net::SendBufferTuner> tuner_;  // set in start()
  std::string peer_;
  uint64_t conn_id_ = 0;  // for the phases' trace lines
  Read read_ = Read::Idle;
  Write write_ = Write::Direct;
  End end_ = End::Open;

  // Bytes read from the app; [in_begin_, in_end_) unconsumed. Allocated
  // only while bytes are held or arriving (see read()).
  std::unique_ptr<char[]> in_;
  size_t in_begin_ = 0;
  size_t in_end_ = 0;
  bool last_read_drained_ = true;  // the last read left the socket empty (how to read next)

  // Output queue: bytes the socket did not take yet, and the done callbacks
  // keyed by the queue offset at which they are satisfied.
  std::string held_;        // see hold()
  bool hold_ = false;       // a mode the owner sets around one call
  std::string out_;         // queued, not yet handed to async_write
  std::string in_flight_;   // being written by async_write; immutable meanwhile
  uint64_t out_total_ = 0;  // bytes ever queued (async part)
  uint64_t out_flushed_ = 0;
  std::vector<std::pair<uint64_t, Done>> out_waiters_;

  // The lingering close's deadline; allocated by a graceful close only.
  std::unique_ptr<asio::steady_timer> linger_timer_;
};

}  // namespace h2gate::downstream
