// DownstreamConnection's one timer: the app-side limits and timeouts
// (request_headers_timeout, idle_timeout, connect_response_timeout,
// stream_idle_timeout, tunnel_idle_timeout and the tunnel's half-close
// timeout). Which deadline applies follows from the phase; ListenerContext
// documents their contracts.
#include "gateway/downstream/downstream_connection.h"

#include "config/dump.h"  // formatDuration
#include "gateway/base/log.h"

namespace h2gate::downstream {
namespace {

// t + d, saturating: a huge configured timeout means "never", not an
// overflow into the past.
std::chrono::steady_clock::time_point plus(std::chrono::steady_clock::time_point t,
                                           config::Duration d) {
  const auto room = std::chrono::steady_clock::time_point::max() - t;
  return d >= room ? std::chrono::steady_clock::time_point::max() : t + d;
}

}  // namespace

std::optional<DownstreamConnection::Clock::time_point> DownstreamConnection::deadline() const {
  switch (phase_) {
    case Phase::AwaitFirst:
    case Phase::Head:
      return plus(head_since_, listener_.request_headers_timeout);
    case Phase::Idle:
      return plus(idle_since_, listener_.idle_timeout);
    case Phase::Connecting:
      return plus(response_wait_since_, listener_.connect_response_timeout);
    case Phase::RequestBody:
    case Phase::AwaitResponse: {
      const Clock::time_point idle = streamIdleDeadline();
      if (const auto wait = responseWaitDeadline()) return std::min(idle, *wait);
      return idle;
    }
    case Phase::Tunnel:
    case Phase::TunnelClosing:
      // Closing, only the idle limit is left: it cuts a close that waits
      // for an app that reads nothing.
      return plus(last_tunnel_activity_, listener_.tunnel_idle_timeout);
    case Phase::HalfClosed:
      return std::min(plus(last_tunnel_activity_, listener_.tunnel_idle_timeout),
                      plus(last_tunnel_activity_, listener_.tunnel_half_close_timeout));
    case Phase::Replying:
      return streamIdleDeadline();
    case Phase::New:
    case Phase::Deciding:
    case Phase::Refused:
    case Phase::Closed:  // the socket's lingering close times itself
    case Phase::Gone:
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<DownstreamConnection::Clock::time_point> DownstreamConnection::responseWaitDeadline()
    const {
  // Only while h2gate waits for the upstream (its answer, or to take a body
  // chunk): time spent waiting for the app's own body bytes does not count.
  if (down_ != Down::Awaiting || (phase_ == Phase::RequestBody && up_ != Up::Sending))
    return std::nullopt;
  return plus(response_wait_since_, listener_.connect_response_timeout);
}

DownstreamConnection::Clock::time_point DownstreamConnection::streamIdleDeadline() const {
  return plus(stream_activity_, listener_.stream_idle_timeout);
}

void DownstreamConnection::armTimer() {
  const std::optional<Clock::time_point> d = deadline();
  // No deadline: a live wait, if any, fires, finds nothing due and stops.
  // A live wait due no later than `d`: it re-arms when it fires.
  if (!d || timer_expiry_ <= *d) return;
  timer_expiry_ = *d;
  timer_.expires_at(*d);  // cancels the previous wait; its handler sees a stale generation
  timer_.async_wait(
      [self = shared_from_this(), gen = ++timer_generation_](const asio::error_code& ec) {
        if (ec || gen != self->timer_generation_) return;
        self->timer_expiry_ = Clock::time_point::max();
        self->onTimer();
      });
}

void DownstreamConnection::onTimer() {
  const std::optional<Clock::time_point> d = deadline();
  if (!d) return;
  if (Clock::now() < *d) return armTimer();  // moved on since the wait began
  switch (phase_) {
    case Phase::AwaitFirst:
    case Phase::Idle:
    case Phase::Head:
      return onHeadTimeout();
    case Phase::Connecting:
      return onResponseTimeout();
    case Phase::RequestBody:
    case Phase::AwaitResponse: {
      // Both may be due (a late wake-up): the one that came first.
      const auto wait = responseWaitDeadline();
      if (wait && *wait <= streamIdleDeadline()) return onResponseTimeout();
      return onStreamIdleTimeout();
    }
    case Phase::Tunnel:
    case Phase::HalfClosed:
    case Phase::TunnelClosing:
      return onTunnelTimeout();
    case Phase::Replying:
      return onStreamIdleTimeout();
    case Phase::New:
    case Phase::Deciding:
    case Phase::Refused:
    case Phase::Closed:
    case Phase::Gone:
      return;
  }
}

void DownstreamConnection::onHeadTimeout() {
  if (phase_ == Phase::Idle) {
    H2G_LOG(Debug, id_, 0,
            "idle keep-alive connection closed after "
                << config::formatDuration(listener_.idle_timeout) << " (idle_timeout)");
    return close(false);
  }
  if (phase_ == Phase::Head || parser_->inHead()) {
    return replyError(408, Result::BadRequest,
                      "request head not complete within " +
                          config::formatDuration(listener_.request_headers_timeout) +
                          " (request_headers_timeout)");
  }
  // The first request, and nothing at all since the accept: an unused
  // pre-connect, not an error.
  H2G_LOG(Debug, id_, 0,
          "no request within " << config::formatDuration(listener_.request_headers_timeout)
                               << " of the accept (request_headers_timeout): closing");
  close(false);
}

void DownstreamConnection::onResponseTimeout() {
  const std::string limit = config::formatDuration(listener_.connect_response_timeout);
  const std::string via = info_.cluster.empty()
                              ? std::string()
                              : " through the upstream proxy of cluster '" + info_.cluster + "'";
  std::string reason;
  if (head_.is_connect && info_.cluster.empty())
    reason = "could not connect to " + head_.authority() + " within " + limit;
  else if (head_.is_connect)
    reason = "no answer to CONNECT " + head_.authority() + via + " within " + limit;
  else
    reason = "no response from " + head_.authority() + via + " within " + limit;
  replyError(504, Result::ConnectTimeout, reason + " (connect_response_timeout)");
}

void DownstreamConnection::onStreamIdleTimeout() {
  const std::string limit =
      config::formatDuration(listener_.stream_idle_timeout) + " (stream_idle_timeout)";
  if (socket_.closingAfterWrites()) {
    // The last bytes for the app (a response's end, or an error reply of
    // ours) are queued before the close, and the app takes none of them.
    H2G_LOG(
        Info, id_, requests_,
        "the app took no bytes for " << limit << " while closing: dropping what it did not read");
    return close(true);
  }
  const std::string via = info_.cluster.empty()
                              ? std::string()
                              : " through the upstream proxy of cluster '" + info_.cluster + "'";
  const bool app_stalled = phase_ == Phase::RequestBody && up_ != Up::Sending;
  if (down_ == Down::Awaiting) {
    if (app_stalled) {
      return replyError(408, Result::StreamIdleTimeout,
                        "request body stalled: no byte from the app for " + limit + " after " +
                            std::to_string(info_.bytes_up) + " body bytes");
    }
    return replyError(504, Result::StreamIdleTimeout,
                      "request to " + head_.authority() + via + " stalled: no byte moved for " +
                          limit + " and no response yet");
  }
  // The response is under way and cannot be completed: reset the app's
  // connection, so that no framing (a close-delimited body above all) can
  // make the part it got look whole. The upstream side is aborted.
  const bool app_not_reading = socket_.backlog();
  info_.result = Result::StreamIdleTimeout;
  info_.reason =
      std::string(app_not_reading ? "the app read nothing"
                  : app_stalled   ? "the app sent no more of its request body"
                                  : "the response from " + head_.authority() + via + " stalled") +
      " for " + limit + " after " + std::to_string(info_.bytes_down) +
      " response bytes: connection reset";
  H2G_LOG(Info, id_, requests_, head_.method << " " << head_.target << ": " << info_.reason);
  close(true);
}

void DownstreamConnection::onTunnelTimeout() {
  const Clock::time_point now = Clock::now();
  const auto idle = now - last_tunnel_activity_;
  const std::string idle_text =
      config::formatDuration(std::chrono::duration_cast<config::Duration>(idle));
  if (phase_ == Phase::TunnelClosing) {
    // Closing already, but the app has taken nothing for tunnel_idle_timeout.
    H2G_LOG(Info, id_, requests_,
            "tunnel to " << head_.authority() << ": the app took no bytes for " << idle_text
                         << " while closing: dropping what it did not read");
    return close(false);
  }
  if (phase_ == Phase::HalfClosed && idle < listener_.tunnel_idle_timeout) {
    H2G_LOG(Debug, id_, requests_,
            "tunnel half-closed and silent for "
                << config::formatDuration(listener_.tunnel_half_close_timeout) << ": closing it");
    // Not a failure: one side said it was done, the other had nothing more.
    // tunnel_closing keeps close() from calling it a reset; the upstream
    // side still sees a cancel, since its stream never ended.
    info_.reason = "closed after the half-close timeout";
    moveTo(Phase::TunnelClosing);
    socket_.closeAfterWrites();
    if (phase_ == Phase::TunnelClosing) armTimer();  // bytes for the app still queued
    return;
  }
  H2G_LOG(Info, id_, requests_,
          "tunnel to " << head_.authority() << " idle for " << idle_text << " (tunnel_idle_timeout "
                       << config::formatDuration(listener_.tunnel_idle_timeout)
                       << "): closing both sides");
  // A normal end, like the destination closing an idle connection itself.
  info_.reason = "closed after " + idle_text + " without traffic (tunnel_idle_timeout)";
  moveTo(Phase::TunnelClosing);
  if (socket_.backlog()) return close(false);  // the app read nothing meanwhile
  socket_.closeAfterWrites();
}

void DownstreamConnection::armHalfCloseTimer() {
  if (phase_ != Phase::Tunnel) return;
  moveTo(Phase::HalfClosed);
  touchTunnel();
  armTimer();
}

}  // namespace h2gate::downstream
