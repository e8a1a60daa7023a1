// Glue between the config's send-buffer settings and the send-buffer tuner
// (kept apart so gateway/net/send_buffer.* depend on the standard library
// only and cross-compile for Windows on their own).
#pragma once

#include <asio.hpp>

#include <memory>

#include "config/config.h"
#include "gateway/base/log.h"
#include "gateway/net/send_buffer.h"

namespace h2gate::net {

inline SendBufferConfig tuningOf(const config::SendBuffer& sb, uint32_t notsent_lowat) {
  SendBufferConfig c;
  c.mode = sb.mode == config::SendBuffer::Mode::Fixed ? SendBufferConfig::Mode::Fixed
           : sb.mode == config::SendBuffer::Mode::IdealBacklog
               ? SendBufferConfig::Mode::IdealBacklog
               : SendBufferConfig::Mode::Auto;
  c.bytes = sb.bytes;
  c.notsent_lowat = notsent_lowat;
  return c;
}

// A tuner for a connected socket, applied at once (onConnected); changes are
// logged at debug level with the connection id.
inline std::unique_ptr<SendBufferTuner> tuneSocket(asio::ip::tcp::socket& socket,
                                                   const SendBufferConfig& config,
                                                   uint64_t conn_id) {
  auto tuner = std::make_unique<SendBufferTuner>(
      config, systemSocketOps(static_cast<uint64_t>(socket.native_handle())),
      &std::chrono::steady_clock::now, [conn_id](uint32_t from, uint32_t to) {
        H2G_LOG(Debug, conn_id, 0, "SO_SNDBUF " << from << " -> " << to << " (ideal send backlog)");
      });
  tuner->onConnected();
  H2G_LOG(
      Trace, conn_id, 0,
      "send buffer " << modeName(tuner->effectiveMode()) << ", SO_SNDBUF " << tuner->sendBuffer());
  return tuner;
}

}  // namespace h2gate::net
