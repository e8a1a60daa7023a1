// A connection to an upstream proxy: TLS over TCP (the normal case) or plain
// TCP (an http:// proxy, or a DIRECT destination). Upstream code reads and
// writes through this and does not care which.
//
// TLS is OpenSSL over a BIO of ours on the non-blocking socket, driven by
// the waits of net/socket_wait.h: readiness waits on POSIX (epoll); on
// Windows (IOCP) a zero-byte overlapped receive for "readable", and for a
// full socket the BIO hands the refused record to an overlapped send that
// owns it until it completes (later records queue for the next one, up to
// kParkLimit; a write completes only once its bytes were sent, so `done`
// still means "in the kernel"), never asio's select() thread. Not asio::ssl::stream: that one moves
// every byte through a BIO pair (two extra copies per direction) and makes one socket call per TLS
// record. Not OpenSSL's socket BIO with read-ahead either: its buffer is compacted (memmove of
// everything left) at every SSL_read, which grows with the buffer. Ours reads up to `inbuf` bytes
// of records in one recv and hands them to OpenSSL record by record; SSL_write encrypts each record
// straight into the socket. (Measured and dropped: MSG_MORE on all but a batch's last record, 25%
// more CPU per uploaded GB; gathering the records of a batch into one send(), 11% more: on
// loopback, fewer larger segments cost the sender more, not less.)
//
// Contracts: one read and one write may be outstanding at a time (like
// asio's). Handlers never run inside the call that starts the operation.
// The Transport MUST outlive its pending operations' handlers unless it is
// closed first (owners keep themselves alive through the handler; a handler
// that finds the Transport gone gets operation_aborted).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <openssl/ssl.h>

#include <asio.hpp>
#include <asio/ssl/error.hpp>

#include "gateway/net/send_buffer.h"
#include "gateway/upstream/phase.h"

namespace h2gate::upstream {

class Transport {
 public:
  using Handler = std::function<void(const asio::error_code&, size_t)>;
  using WaitHandler = std::function<void(const asio::error_code&)>;

  // Plain TCP. `tuner` (may be null) follows the send buffer after writes.
  explicit Transport(asio::ip::tcp::socket socket,
                     std::unique_ptr<net::SendBufferTuner> tuner = nullptr);
  // TLS client on a connected socket; takes ownership of `ssl` (prepared:
  // SNI, verification, session).
  Transport(asio::ip::tcp::socket socket, SSL* ssl,
            std::unique_ptr<net::SendBufferTuner> tuner = nullptr);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  asio::ip::tcp::socket& socket() { return socket_; }
  // The connection id its phase trace lines carry.
  void setLogId(uint64_t conn_id) { conn_id_ = conn_id; }
  bool isTls() const { return ssl_ != nullptr; }
  SSL* ssl() { return ssl_; }

  // TLS only: the client handshake. The error is in asio's SSL category
  // (message: OpenSSL's reason, e.g. a TLS alert) or a system error.
  void asyncHandshake(WaitHandler h);
  // The connection carries bulk data (HTTP/2): one recv takes up to `bytes`
  // of TLS records, and the buffers are kept between reads. Otherwise the
  // receive buffer is kInBuffer bytes and, like OpenSSL's own buffers
  // (SSL_MODE_RELEASE_BUFFERS), freed whenever drained, so an idle
  // connection holds none.
  void keepBuffers(size_t bytes);
  static constexpr size_t kInBuffer = 32 * 1024;

  // Some bytes (at least one), or an error: asio::error::eof for a TCP FIN
  // or TLS close_notify, asio::ssl::error::stream_truncated for a FIN
  // without close_notify.
  void asyncReadSome(asio::mutable_buffer b, Handler h);
  // What has already arrived, without waiting: returns 0 with
  // asio::error::would_block when no application data is there (TLS
  // records such as a TLS 1.3 session ticket are processed and give none).
  // MUST NOT be called while an asynchronous read is pending.
  size_t readAvailable(asio::mutable_buffer b, asio::error_code& ec);
  // As readAvailable, for an owner that keeps the socket non-blocking.
  size_t readSomeNow(asio::mutable_buffer b, asio::error_code& ec);
  // Completes when a read would find something (data, EOF or an error),
  // consuming nothing. For idle pooled connections (see UpstreamPool).
  void asyncWaitReadable(WaitHandler h);
  // TLS: received bytes are waiting in our buffer or OpenSSL's, so the
  // next read returns without touching the socket. Always false for TCP.
  bool hasBufferedInput() const {
    return ssl_ && (in_begin_ != in_end_ || SSL_has_pending(ssl_) == 1);
  }

  // Writes all of `bufs`, in order; the handler gets the total.
  void asyncWrite(std::vector<asio::const_buffer> bufs, Handler h);
  void asyncWrite(asio::const_buffer b, Handler h) {
    asyncWrite(std::vector<asio::const_buffer>{b}, std::move(h));
  }

  // Half-close our direction with a TCP FIN, under TLS too (no
  // close_notify: the proxy may still answer). HTTP/1.1 proxies such as
  // squid end the tunnel on it, which is what an app's FIN means.
  void shutdownSend();
  // Cancels pending operations (their handlers get operation_aborted).
  void close();

  // The proxy authenticated this connection (NTLM, see
  // auth/proxy_auth.h): later requests on it need no credentials.
  void markAuthenticated() { authenticated_ = true; }
  bool authenticated() const { return authenticated_; }

 private:
  // TLS: received bytes (plain TCP stays ready).
  //   input      where they are                                 goes to
  //   ready      a read tries SSL_read first (records may be    drained, eof
  //              buffered here or in OpenSSL)
  //   drained    the last SSL_read wanted bytes from the         ready, receiving, eof
  //              socket: the next read waits for them first
  //   receiving  an asynchronous receive into inbuf_ is          ready, eof
  //              pending (inbuf_ is kept meanwhile)
  //   eof        the socket gave its FIN: OpenSSL tells a        -
  //              close_notify from a truncation
  enum class Input : uint8_t { Ready, Drained, Receiving, Eof };
  static constexpr PhaseTable<Input, 4> kInput{
      "transport input",
      {{
          {Input::Ready, "ready", nextPhases(Input::Drained, Input::Eof)},
          {Input::Drained, "drained", nextPhases(Input::Ready, Input::Receiving, Input::Eof)},
          {Input::Receiving, "receiving", nextPhases(Input::Ready, Input::Eof)},
          {Input::Eof, "eof", nextPhases()},
      }}};
  static_assert(kInput.wellFormed());
  // Where sendWaitsForWritable() is false (Windows): a send the socket
  // refused, parked with an overlapped send (POSIX stays none).
  //   park             what is in flight                        goes to
  //   none             nothing: sends go straight to the        parked
  //                    socket
  //   parked           an overlapped send owns refused bytes;   none, parked_shutdown, failed
  //                    later records queue behind it
  //                    (park_next_)
  //   parked_shutdown  ...and our FIN follows its last byte     none, failed
  //   failed           a parked send failed (park_error_):      -
  //                    every later write fails
  enum class Park : uint8_t { None, Parked, ParkedShutdown, Failed };
  static constexpr PhaseTable<Park, 4> kPark{
      "transport park",
      {{
          {Park::None, "none", nextPhases(Park::Parked)},
          {Park::Parked, "parked", nextPhases(Park::None, Park::ParkedShutdown, Park::Failed)},
          {Park::ParkedShutdown, "parked_shutdown", nextPhases(Park::None, Park::Failed)},
          {Park::Failed, "failed", nextPhases()},
      }}};
  static_assert(kPark.wellFormed());
  // The one place each machine's phase changes.
  void moveTo(Input to);
  void moveTo(Park to);
  bool parked() const { return park_ == Park::Parked || park_ == Park::ParkedShutdown; }

  struct WriteOp;
  struct Bio;
  // The BIO's side: what OpenSSL reads from and writes to.
  int bioRead(char* out, int len);
  int bioWrite(const char* in, int len);
  // One SSL_read; on WANT_* sets want_write_ and returns would_block.
  size_t tlsRead(asio::mutable_buffer b, asio::error_code& ec);
  void tlsReadAsync(asio::mutable_buffer b, Handler h, bool initiating);
  void tlsHandshakeStep(WaitHandler h, bool initiating);
  void tlsWriteStep(std::shared_ptr<WriteOp> op, bool initiating);
  // Maps SSL_get_error() of a failed call to an error code; would_block for
  // WANT_READ/WANT_WRITE (and records which one in want_write_).
  asio::error_code tlsError(int ret);
  // Calls f(ec) when the socket is worth trying again: writable (or the
  // parked send completed) after WANT_WRITE, readable after WANT_READ.
  template <typename F>
  void waitWanted(F&& f);
  template <typename F>
  void waitWritable(F&& f);
  // Windows: hands park_next_ to an overlapped send.
  void parkSend();
  void afterSend() {
    if (tuner_) tuner_->afterSend();
  }

  asio::ip::tcp::socket socket_;
  SSL* ssl_ = nullptr;  // owned, with its BIO (which never closes the socket)
  // Received TLS bytes not yet given to OpenSSL: [in_begin_, in_end_).
  std::unique_ptr<char[]> inbuf_;
  size_t in_size_ = kInBuffer;
  size_t in_begin_ = 0;
  size_t in_end_ = 0;
  uint64_t conn_id_ = 0;
  Input input_ = Input::Ready;
  Park park_ = Park::None;
  // A setting (keepBuffers()): inbuf_ is kept between reads.
  bool keep_inbuf_ = false;
  // What the last failed SSL call wanted (tlsError()): to write, else to
  // read; for the caller that waits next.
  bool want_write_ = false;
  // The system error of the BIO's last failed send/recv (0: none, or it
  // would have blocked), for SSL_ERROR_SYSCALL.
  int last_sys_error_ = 0;
  // Parking (Park above): records after the parked one queue in park_next_
  // (the next overlapped send) up to kParkLimit; beyond that the BIO
  // refuses bytes, and what waits for writability waits in send_waiters_
  // for the send's completion.
  static constexpr size_t kParkLimit = 64 * 1024;
  const bool waits_for_writable_;
  std::string park_next_;
  asio::error_code park_error_;  // why the park failed
  std::vector<WaitHandler> send_waiters_;
  std::unique_ptr<net::SendBufferTuner> tuner_;
  bool authenticated_ = false;  // a fact the pool reads (markAuthenticated())
  // Handlers hold a weak reference: they find out if the Transport is gone.
  std::shared_ptr<char> life_ = std::make_shared<char>();
};

}  // namespace h2gate::upstream
