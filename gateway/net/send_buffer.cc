#include "gateway/net/send_buffer.h"

#include <algorithm>

namespace h2gate::net {

std::string modeName(SendBufferConfig::Mode m) {
  switch (m) {
    case SendBufferConfig::Mode::Fixed:
      return "fixed";
    case SendBufferConfig::Mode::IdealBacklog:
      return "ideal_backlog";
    case SendBufferConfig::Mode::Auto:
      break;
  }
  return "auto";
}

SendBufferTuner::SendBufferTuner(const SendBufferConfig& config, std::unique_ptr<SocketOps> ops,
                                 Clock clock, OnChange on_change)
    : config_(config),
      mode_(config.mode == SendBufferConfig::Mode::Auto && platformHasIdealBacklog()
                ? SendBufferConfig::Mode::IdealBacklog
                : config.mode),
      ops_(std::move(ops)),
      clock_(std::move(clock)),
      on_change_(std::move(on_change)) {}

void SendBufferTuner::onConnected() {
  if (config_.notsent_lowat > 0) ops_->setNotsentLowat(config_.notsent_lowat);
  if (mode_ == SendBufferConfig::Mode::Fixed && config_.bytes > 0)
    ops_->setSendBuffer(std::min(config_.bytes, kMaxBytes));
  current_ = ops_->sendBuffer().value_or(0);
  if (mode_ == SendBufferConfig::Mode::IdealBacklog) refresh();
}

void SendBufferTuner::afterSend() {
  if (mode_ != SendBufferConfig::Mode::IdealBacklog) return;
  const auto now = clock_();
  if (last_query_ && now - *last_query_ < kQueryInterval) return;
  refresh();
}

void SendBufferTuner::refresh() {
  last_query_ = clock_();
  const std::optional<uint32_t> ideal = ops_->idealSendBacklog();
  if (!ideal || *ideal == 0) return;  // unsupported or not connected: ignore
  const uint32_t want = std::min(*ideal, kMaxBytes);
  if (last_set_ && *last_set_ == want) return;
  if (!ops_->setSendBuffer(want)) return;
  last_set_ = want;
  const uint32_t before = current_;
  current_ = ops_->sendBuffer().value_or(want);
  if (on_change_ && current_ != before) on_change_(before, current_);
}

}  // namespace h2gate::net
