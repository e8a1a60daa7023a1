#include "gateway/downstream/app_socket.h"

#include <array>

#include "gateway/net/address.h"
#include "gateway/net/socket_tuning.h"
#include "gateway/net/socket_wait.h"

namespace h2gate::downstream {
namespace {

// Pieces one write() gathers without allocating (writev beyond: a vector).
constexpr size_t kInlinePieces = 16;

}  // namespace

AppSocket::AppSocket(asio::ip::tcp::socket socket) : socket_(std::move(socket)) {}

void AppSocket::moveTo(Read to) {
  upstream::movePhase(kRead, read_, to, conn_id_, 0);
}
void AppSocket::moveTo(Write to) {
  upstream::movePhase(kWrite, write_, to, conn_id_, 0);
}
void AppSocket::moveTo(End to) {
  upstream::movePhase(kEnd, end_, to, conn_id_, 0);
}

void AppSocket::start(std::weak_ptr<Handler> handler, const net::SendBufferConfig& tuning,
                      uint64_t conn_id) {
  handler_ = std::move(handler);
  conn_id_ = conn_id;
  asio::error_code ec;
  socket_.non_blocking(true, ec);
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  tuner_ = net::tuneSocket(socket_, tuning, conn_id);
  const auto remote = socket_.remote_endpoint(ec);
  peer_ = ec ? std::string("unknown") : net::endpointText(remote);
}

void AppSocket::read() {
  if (read_ != Read::Idle || closed()) return;
  if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
  if (in_ && in_end_ == kReadSize) return;  // full: the consumer has not caught up
  if (in_end_ == 0 && last_read_drained_) {
    // Nothing held and the socket was empty: wait without a buffer.
    moveTo(Read::Waiting);
    in_.reset();
    // (Not async_wait: see net/socket_wait.h.)
    net::asyncWaitReadable(
        socket_, [this, h = handler_.lock()](const asio::error_code& ec) { onReadable(ec, *h); });
    return;
  }
  if (!in_) in_.reset(new char[kReadSize]);
  moveTo(Read::Reading);
  socket_.async_read_some(
      asio::buffer(in_.get() + in_end_, kReadSize - in_end_),
      [this, h = handler_.lock()](const asio::error_code& ec, size_t n) { onRead(ec, n, *h); });
}

void AppSocket::onReadable(const asio::error_code& ec, Handler& h) {
  if (ec || closed()) return onRead(ec, 0, h);  // onRead goes on with a close
  if (!in_) in_.reset(new char[kReadSize]);
  asio::error_code rec;
  const size_t n = socket_.read_some(asio::buffer(in_.get() + in_end_, kReadSize - in_end_), rec);
  if (rec == asio::error::would_block || rec == asio::error::try_again) {
    moveTo(Read::Idle);  // a spurious wake-up
    last_read_drained_ = true;
    return read();
  }
  onRead(rec, n, h);
}

void AppSocket::onRead(const asio::error_code& ec, size_t n, Handler& h) {
  moveTo(Read::Idle);
  if (!ec) last_read_drained_ = in_end_ + n < kReadSize;
  if (closed()) {
    // A read from before close(): carry on with the lingering close.
    if (ec) return finalClose();
    return lingerRead();
  }
  if (ec == asio::error::eof) {
    moveTo(Read::Eof);
    return h.onAppEof();
  }
  if (ec) return h.onAppError(ec, Failure::Read);
  in_end_ += n;
  h.onAppBytes();
}

void AppSocket::write(const std::string_view* pieces, size_t n_pieces, Done done) {
  if (closed() || write_ == Write::Failed || write_ == Write::FailedNow) return;
  if (hold_) {
    for (size_t i = 0; i < n_pieces; ++i) held_.append(pieces[i]);
    if (done) done();  // copied
    return;
  }
  if (!held_.empty()) {
    // The held bytes first, in the same writev.
    const std::string held = std::move(held_);
    held_.clear();
    return writeAround(held, pieces, n_pieces, {}, std::move(done));
  }
  size_t total = 0;
  for (size_t i = 0; i < n_pieces; ++i) total += pieces[i].size();
  size_t written = 0;
  if (write_ == Write::Direct && out_.empty()) {
    // Direct dispatch: the socket takes what it can now (one writev for all
    // pieces); only the rest is copied.
    asio::error_code ec;
    auto send = [&](auto& bufs) {  // unused entries stay empty
      for (size_t i = 0; i < n_pieces; ++i)
        bufs[i] = asio::buffer(pieces[i].data(), pieces[i].size());
      return socket_.write_some(bufs, ec);
    };
    if (n_pieces <= kInlinePieces) {
      std::array<asio::const_buffer, kInlinePieces> bufs{};
      written = send(bufs);
    } else {
      std::vector<asio::const_buffer> bufs(n_pieces);
      written = send(bufs);
    }
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      written = 0;
    } else if (ec) {
      moveTo(Write::FailedNow);
      if (std::shared_ptr<Handler> h = handler_.lock()) h->onAppError(ec, Failure::WriteNow);
      moveTo(Write::Failed);
      return;
    }
    if (written > 0) tuner_->afterSend();
    if (written == total) {
      if (done) done();
      return;
    }
  }
  size_t skip = written;
  for (size_t i = 0; i < n_pieces; ++i) {
    const std::string_view p = pieces[i];
    if (skip >= p.size()) {
      skip -= p.size();
      continue;
    }
    out_.append(p.substr(skip));
    skip = 0;
  }
  out_total_ += total - written;
  if (done) out_waiters_.emplace_back(out_total_, std::move(done));
  startAsyncWrite();
}

void AppSocket::writeAround(std::string_view before, const std::string_view* pieces, size_t n,
                            std::string_view after, Done done) {
  auto fill = [&](auto& all) {
    size_t k = 0;
    if (!before.empty()) all[k++] = before;
    for (size_t i = 0; i < n; ++i) all[k++] = pieces[i];
    if (!after.empty()) all[k++] = after;
    write(all.data(), k, std::move(done));
  };
  if (n + 2 <= kInlinePieces) {
    std::array<std::string_view, kInlinePieces> all;
    fill(all);
  } else {
    std::vector<std::string_view> all(n + 2);
    fill(all);
  }
}

void AppSocket::shutdownAfterWrites() {
  // Closing after the writes sends our FIN too.
  if (end_ != End::Open) return;
  moveTo(End::ShutdownPending);
  startAsyncWrite();
}

void AppSocket::closeAfterWrites() {
  if (closed()) return;
  moveTo(End::ClosingAfterWrites);
  startAsyncWrite();
}

void AppSocket::startAsyncWrite() {
  if (write_ == Write::Queued || closed()) return;
  if (out_.empty()) {
    if (end_ == End::ShutdownPending) {
      moveTo(End::Shut);
      asio::error_code ec;
      socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
    }
    if (end_ == End::ClosingAfterWrites) {
      if (std::shared_ptr<Handler> h = handler_.lock()) h->onAppWritesDone();
    }
    return;
  }
  if (write_ == Write::Failed) return;
  moveTo(Write::Queued);
  in_flight_.swap(out_);
  out_.clear();
  asio::async_write(
      socket_, asio::buffer(in_flight_),
      [this, h = handler_.lock()](const asio::error_code& ec, size_t n) { onWritten(ec, n, *h); });
}

void AppSocket::onWritten(const asio::error_code& ec, size_t n, Handler& h) {
  if (ec && !closed()) {
    moveTo(Write::Failed);
    return h.onAppError(ec, Failure::Write);
  }
  moveTo(Write::Direct);
  if (closed()) return;
  out_flushed_ += n;
  in_flight_.clear();
  h.onAppTook();
  tuner_->afterSend();
  // Waiters are in queue order: run those now satisfied.
  size_t k = 0;
  while (k < out_waiters_.size() && out_waiters_[k].first <= out_flushed_) ++k;
  std::vector<std::pair<uint64_t, Done>> ready(
      std::make_move_iterator(out_waiters_.begin()),
      std::make_move_iterator(out_waiters_.begin() + static_cast<ptrdiff_t>(k)));
  out_waiters_.erase(out_waiters_.begin(), out_waiters_.begin() + static_cast<ptrdiff_t>(k));
  for (auto& [offset, d] : ready) {
    if (closed()) return;
    d();
  }
  startAsyncWrite();
}

void AppSocket::close(bool abortive) {
  upstream::phaseRule(
      write_ != Write::FailedNow, kWrite.machine,
      "closed inside write() (Failure::WriteNow: the owner closes from a posted handler)", conn_id_,
      0);
  if (closed()) return;
  out_waiters_.clear();
  asio::error_code ec;
  if (abortive) {
    socket_.set_option(asio::socket_base::linger(true, 0), ec);
    finalClose();
    return;
  }
  moveTo(End::Lingering);
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  linger_timer_ = std::make_unique<asio::steady_timer>(socket_.get_executor(), kLingerTime);
  linger_timer_->async_wait([this, h = handler_.lock()](const asio::error_code& e) {
    if (!e) finalClose();
  });
  lingerRead();
}

void AppSocket::lingerRead() {
  if (read_ != Read::Idle || end_ == End::Closed) {
    if (read_ == Read::Eof) finalClose();
    return;
  }
  moveTo(Read::Reading);
  if (!in_) in_.reset(new char[kReadSize]);
  socket_.async_read_some(asio::buffer(in_.get(), kReadSize),
                          [this, h = handler_.lock()](const asio::error_code& ec, size_t) {
                            moveTo(Read::Idle);
                            if (ec) return finalClose();
                            lingerRead();
                          });
}

void AppSocket::finalClose() {
  if (end_ == End::Closed) return;
  moveTo(End::Closed);
  if (linger_timer_) linger_timer_->cancel();
  asio::error_code ec;
  socket_.close(ec);
  if (std::shared_ptr<Handler> h = handler_.lock()) h->onAppClosed();
}

}  // namespace h2gate::downstream
