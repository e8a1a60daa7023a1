#include "gateway/upstream/transport.h"

#include <algorithm>
#include <cstring>
#include <string>

#include <openssl/err.h>

#include "gateway/net/socket_io.h"
#include "gateway/net/socket_wait.h"

namespace h2gate::upstream {

// A write in progress: the buffers, where it stands, the total so far.
struct Transport::WriteOp {
  std::vector<asio::const_buffer> bufs;
  size_t index = 0;
  size_t offset = 0;
  size_t total = 0;
  Handler handler;
};

Transport::Transport(asio::ip::tcp::socket socket, std::unique_ptr<net::SendBufferTuner> tuner)
    : socket_(std::move(socket)),
      waits_for_writable_(net::sendWaitsForWritable()),
      tuner_(std::move(tuner)) {}

void Transport::moveTo(Input to) {
  movePhase(kInput, input_, to, conn_id_, 0);
}
void Transport::moveTo(Park to) {
  movePhase(kPark, park_, to, conn_id_, 0);
}

// The BIO between OpenSSL and the socket. Its data pointer is the Transport.
struct Transport::Bio {
  static int write(BIO* b, const char* in, int len) {
    return static_cast<Transport*>(BIO_get_data(b))->bioWrite(in, len);
  }
  static int read(BIO* b, char* out, int len) {
    return static_cast<Transport*>(BIO_get_data(b))->bioRead(out, len);
  }
  static long ctrl(BIO* b, int cmd, long, void*) {
    switch (cmd) {
      case BIO_CTRL_FLUSH:
        return 1;
      case BIO_CTRL_EOF:
        return static_cast<Transport*>(BIO_get_data(b))->input_ == Input::Eof ? 1 : 0;
      default:
        return 0;
    }
  }
  static int create(BIO* b) {
    BIO_set_init(b, 1);
    return 1;
  }
  static const BIO_METHOD* method() {
    static BIO_METHOD* m = [] {
      BIO_METHOD* bm = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "h2gate socket");
      BIO_meth_set_write(bm, &Bio::write);
      BIO_meth_set_read(bm, &Bio::read);
      BIO_meth_set_ctrl(bm, &Bio::ctrl);
      BIO_meth_set_create(bm, &Bio::create);
      return bm;
    }();
    return m;
  }
};

Transport::Transport(asio::ip::tcp::socket socket, SSL* ssl,
                     std::unique_ptr<net::SendBufferTuner> tuner)
    : socket_(std::move(socket)),
      ssl_(ssl),
      waits_for_writable_(net::sendWaitsForWritable()),
      tuner_(std::move(tuner)) {
  // OpenSSL's reads and writes reach the socket through bioRead/bioWrite,
  // which must not block.
  asio::error_code ec;
  socket_.non_blocking(true, ec);
  BIO* bio = BIO_new(Bio::method());
  BIO_set_data(bio, this);
  SSL_set_bio(ssl_, bio, bio);
  // Partial writes: SSL_write reports the records it wrote before the
  // socket filled up; the rest is written from the same buffer later.
  SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}

Transport::~Transport() {
  if (ssl_) SSL_free(ssl_);  // frees the BIO, which points here: first
}

void Transport::keepBuffers(size_t bytes) {
  if (!ssl_) return;
  SSL_clear_mode(ssl_, SSL_MODE_RELEASE_BUFFERS);
  keep_inbuf_ = true;
  if (bytes > in_size_ && in_begin_ == in_end_) {
    inbuf_.reset();
    in_size_ = bytes;
  }
}

int Transport::bioRead(char* out, int len) {
  BIO* bio = SSL_get_rbio(ssl_);
  BIO_clear_retry_flags(bio);
  if (in_begin_ == in_end_) {
    if (!inbuf_) inbuf_ = std::make_unique<char[]>(in_size_);
    in_begin_ = in_end_ = 0;
    if (input_ == Input::Eof) return 0;
    const net::SocketIoResult r = net::socketRecv(
        static_cast<net::NativeSocket>(socket_.native_handle()), inbuf_.get(), in_size_);
    const long long n = r.n;
    last_sys_error_ = r.would_block ? 0 : r.error;
    if (n < 0) {
      if (r.would_block) BIO_set_retry_read(bio);
      if (!keep_inbuf_) inbuf_.reset();  // nothing to read: hold nothing while idle
      return -1;
    }
    if (n == 0) {
      moveTo(Input::Eof);
      return 0;
    }
    in_end_ = static_cast<size_t>(n);
  }
  const size_t take = std::min(static_cast<size_t>(len), in_end_ - in_begin_);
  std::memcpy(out, inbuf_.get() + in_begin_, take);
  in_begin_ += take;
  if (in_begin_ == in_end_ && !keep_inbuf_ && input_ != Input::Receiving)
    inbuf_.reset();  // idle: hold nothing
  return static_cast<int>(take);
}

int Transport::bioWrite(const char* in, int len) {
  BIO* bio = SSL_get_wbio(ssl_);
  BIO_clear_retry_flags(bio);
  if (park_ == Park::Failed) {
    last_sys_error_ = park_error_.value();
    return -1;
  }
  if (parked()) {
    // An overlapped send is in flight: nothing may overtake it. Records
    // queue behind it up to kParkLimit, then the socket is "full".
    last_sys_error_ = 0;
    if (park_next_.size() + static_cast<size_t>(len) > kParkLimit) {
      BIO_set_retry_write(bio);
      return -1;
    }
    park_next_.append(in, static_cast<size_t>(len));
    return len;
  }
  const net::SocketIoResult r = net::socketSend(
      static_cast<net::NativeSocket>(socket_.native_handle()), in, static_cast<size_t>(len));
  const long long n = r.n;
  last_sys_error_ = r.would_block ? 0 : r.error;
  if (n < 0) {
    if (r.would_block) {
      if (!waits_for_writable_) {
        moveTo(Park::Parked);
        park_next_.assign(in, static_cast<size_t>(len));
        parkSend();
        return len;  // taken: the overlapped send owns a copy
      }
      BIO_set_retry_write(bio);
    }
    return -1;
  }
  return static_cast<int>(n);
}

void Transport::parkSend() {
  auto bytes = std::make_shared<std::string>(std::move(park_next_));
  park_next_.clear();
  asio::async_write(
      socket_, asio::buffer(*bytes),
      [this, life = std::weak_ptr<char>(life_), bytes](const asio::error_code& ec, size_t) {
        if (life.expired()) return;  // the Transport is gone; so are its waiters
        if (ec) {
          park_error_ = ec;
          park_next_.clear();
        } else {
          afterSend();
        }
        if (!ec && !park_next_.empty()) {
          parkSend();  // what queued meanwhile; waiters may queue more
        } else {
          const bool fin = park_ == Park::ParkedShutdown;
          moveTo(ec ? Park::Failed : Park::None);
          if (fin) shutdownSend();
        }
        std::vector<WaitHandler> waiters = std::move(send_waiters_);
        send_waiters_.clear();
        for (WaitHandler& w : waiters) w(ec);
      });
}

template <typename F>
void Transport::waitWritable(F&& f) {
  if (waits_for_writable_) {
    socket_.async_wait(asio::ip::tcp::socket::wait_write, std::forward<F>(f));
  } else if (parked()) {
    send_waiters_.emplace_back(std::forward<F>(f));
  } else {
    // Nothing in flight: the socket may take bytes again at once.
    asio::post(socket_.get_executor(),
               [f = std::forward<F>(f)]() mutable { f(asio::error_code()); });
  }
}

template <typename F>
void Transport::waitWanted(F&& f) {
  if (want_write_) return waitWritable(std::forward<F>(f));
  net::asyncWaitReadable(socket_, std::forward<F>(f));
}

asio::error_code Transport::tlsError(int ret) {
  const int err = SSL_get_error(ssl_, ret);
  asio::error_code ec;
  switch (err) {
    case SSL_ERROR_WANT_READ:
      want_write_ = false;
      return asio::error::would_block;
    case SSL_ERROR_WANT_WRITE:
      want_write_ = true;
      return asio::error::would_block;
    case SSL_ERROR_ZERO_RETURN:  // close_notify
      ec = asio::error::eof;
      break;
    case SSL_ERROR_SYSCALL:
      // No socket error: the peer closed the TCP connection without
      // close_notify.
      ec = last_sys_error_ != 0
               ? asio::error_code(last_sys_error_, asio::error::get_system_category())
               : asio::error_code(asio::ssl::error::stream_truncated);
      break;
    default: {
      const unsigned long e = ERR_get_error();
      if (ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
        ec = asio::ssl::error::stream_truncated;
      else if (e != 0)
        ec = asio::error_code(static_cast<int>(e), asio::error::get_ssl_category());
      else
        ec = asio::error::connection_aborted;
      break;
    }
  }
  // The thread's error queue MUST be empty before the next SSL call, or
  // SSL_get_error() misreports it.
  ERR_clear_error();
  return ec;
}

// ---------------------------------------------------------------- handshake

void Transport::asyncHandshake(WaitHandler h) {
  ERR_clear_error();  // whatever an earlier failure left on this thread
  SSL_set_connect_state(ssl_);
  tlsHandshakeStep(std::move(h), /*initiating=*/true);
}

void Transport::tlsHandshakeStep(WaitHandler h, bool initiating) {
  const int r = SSL_do_handshake(ssl_);
  asio::error_code ec;
  if (r != 1) ec = tlsError(r);
  if (ec == asio::error::would_block) {
    waitWanted([this, life = std::weak_ptr<char>(life_),
                h = std::move(h)](const asio::error_code& e) mutable {
      if (life.expired()) return h(asio::error::operation_aborted);
      if (e) return h(e);
      tlsHandshakeStep(std::move(h), false);
    });
    return;
  }
  if (initiating)
    asio::post(socket_.get_executor(), [h = std::move(h), ec] { h(ec); });
  else
    h(ec);
}

// -------------------------------------------------------------------- reads

size_t Transport::tlsRead(asio::mutable_buffer b, asio::error_code& ec) {
  ec = {};
  if (b.size() == 0) return 0;
  size_t n = 0;
  const int r = SSL_read_ex(ssl_, b.data(), b.size(), &n);
  if (r == 1) {
    if (input_ == Input::Drained) moveTo(Input::Ready);
    return n;
  }
  ec = tlsError(r);
  if (input_ != Input::Eof)
    moveTo(ec == asio::error::would_block && !want_write_ ? Input::Drained : Input::Ready);
  return 0;
}

void Transport::asyncReadSome(asio::mutable_buffer b, Handler h) {
  if (!ssl_) {
    socket_.async_read_some(b, std::move(h));
    return;
  }
  tlsReadAsync(b, std::move(h), /*initiating=*/true);
}

void Transport::tlsReadAsync(asio::mutable_buffer b, Handler h, bool initiating) {
  // A read that found the socket empty a moment ago need not try again
  // before waiting (it would cost a recv that returns EAGAIN).
  if (!(initiating && input_ == Input::Drained)) {
    asio::error_code ec;
    const size_t n = tlsRead(b, ec);
    if (ec != asio::error::would_block) {
      if (initiating)
        asio::post(socket_.get_executor(), [h = std::move(h), ec, n] { h(ec, n); });
      else
        h(ec, n);
      return;
    }
  }
  if (want_write_) {
    waitWritable([this, life = std::weak_ptr<char>(life_), b,
                  h = std::move(h)](const asio::error_code& e) mutable {
      if (life.expired()) return h(asio::error::operation_aborted, 0);
      if (e) return h(e, 0);
      tlsReadAsync(b, std::move(h), false);
    });
    return;
  }
  // OpenSSL wants bytes and our buffer is empty: receive into it. (A read,
  // not a readiness wait: asio re-arms epoll with a syscall for every wait.)
  if (!inbuf_) inbuf_ = std::make_unique<char[]>(in_size_);
  in_begin_ = in_end_ = 0;
  moveTo(Input::Receiving);
  socket_.async_read_some(asio::buffer(inbuf_.get(), in_size_),
                          [this, life = std::weak_ptr<char>(life_), b, h = std::move(h)](
                              const asio::error_code& e, size_t n) mutable {
                            if (life.expired()) return h(asio::error::operation_aborted, 0);
                            // EOF: OpenSSL tells a close_notify from a truncation.
                            if (e == asio::error::eof)
                              moveTo(Input::Eof);
                            else if (input_ == Input::Receiving)
                              moveTo(Input::Ready);
                            if (e && e != asio::error::eof) return h(e, 0);
                            in_end_ = n;
                            tlsReadAsync(b, std::move(h), false);
                          });
}

size_t Transport::readSomeNow(asio::mutable_buffer b, asio::error_code& ec) {
  if (ssl_) return tlsRead(b, ec);
  return socket_.read_some(b, ec);
}

size_t Transport::readAvailable(asio::mutable_buffer b, asio::error_code& ec) {
  if (ssl_) return tlsRead(b, ec);  // the socket is always non-blocking
  const bool was_non_blocking = socket_.non_blocking();
  socket_.non_blocking(true, ec);
  if (ec) return 0;
  const size_t n = socket_.read_some(b, ec);
  asio::error_code ignored;
  socket_.non_blocking(was_non_blocking, ignored);
  return n;
}

void Transport::asyncWaitReadable(WaitHandler h) {
  // Records may already sit in our receive buffer (or OpenSSL's), where a
  // socket readiness wait would not see them: peek (processing them).
  if (ssl_ && (in_begin_ != in_end_ || SSL_has_pending(ssl_))) {
    char c;
    size_t n = 0;
    const int r = SSL_peek_ex(ssl_, &c, 1, &n);
    asio::error_code ec;
    if (r != 1) ec = tlsError(r);
    if (ec != asio::error::would_block) {
      asio::post(socket_.get_executor(), [h = std::move(h)] { h({}); });
      return;
    }
  }
  net::asyncWaitReadable(socket_, std::move(h));
}

// ------------------------------------------------------------------- writes

void Transport::asyncWrite(std::vector<asio::const_buffer> bufs, Handler h) {
  if (!ssl_) {
    auto op = std::make_shared<std::vector<asio::const_buffer>>(std::move(bufs));
    asio::async_write(socket_, *op,
                      [this, life = std::weak_ptr<char>(life_), op, h = std::move(h)](
                          const asio::error_code& ec, size_t n) {
                        if (!ec && !life.expired()) afterSend();
                        h(ec, n);
                      });
    return;
  }
  auto op = std::make_shared<WriteOp>();
  op->bufs = std::move(bufs);
  op->handler = std::move(h);
  tlsWriteStep(std::move(op), /*initiating=*/true);
}

void Transport::tlsWriteStep(std::shared_ptr<WriteOp> op, bool initiating) {
  asio::error_code ec;
  while (op->index < op->bufs.size()) {
    const asio::const_buffer& b = op->bufs[op->index];
    if (op->offset == b.size()) {
      ++op->index;
      op->offset = 0;
      continue;
    }
    size_t n = 0;
    const int r = SSL_write_ex(ssl_, static_cast<const char*>(b.data()) + op->offset,
                               b.size() - op->offset, &n);
    if (r != 1) {
      ec = tlsError(r);
      break;
    }
    op->offset += n;
    op->total += n;
  }
  // All taken, but the last record is still in a parked send: the write is
  // done only once it is in the kernel (the owner may close next).
  if (!ec && parked()) {
    ec = asio::error::would_block;
    want_write_ = true;
  }
  if (ec == asio::error::would_block) {
    waitWanted([this, life = std::weak_ptr<char>(life_),
                op = std::move(op)](const asio::error_code& e) mutable {
      if (life.expired()) return op->handler(asio::error::operation_aborted, op->total);
      if (e) return op->handler(e, op->total);
      tlsWriteStep(std::move(op), false);
    });
    return;
  }
  if (!ec) afterSend();
  if (initiating)
    asio::post(socket_.get_executor(), [op = std::move(op), ec] { op->handler(ec, op->total); });
  else
    op->handler(ec, op->total);
}

// -------------------------------------------------------------------- close

void Transport::shutdownSend() {
  if (parked()) {  // our FIN goes after the parked bytes
    moveTo(Park::ParkedShutdown);
    return;
  }
  asio::error_code ec;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
}

void Transport::close() {
  asio::error_code ec;
  socket_.close(ec);
}

}  // namespace h2gate::upstream
