// What a downstream connection needs from its listener: the filter chain and
// the limits. Built once per listener at start; shared read-only by workers.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "filters/filter.h"
#include "gateway/http1/parser.h"
#include "gateway/net/send_buffer.h"

namespace h2gate::downstream {

struct ListenerContext {
  std::string name;
  std::vector<filters::FilterPtr> filters;  // the last one is terminal
  http1::Limits limits;
  const config::Bootstrap* bootstrap = nullptr;
  // Direct mode: one deadline for DNS and all connect attempts
  // (config: the listener's direct_connect_timeout).
  config::Duration direct_connect_timeout{std::chrono::seconds(10)};
  // An app connection that sends nothing for this long between requests is
  // closed; one stuck in the middle of a request head gets 408.
  config::Duration idle_timeout{std::chrono::seconds(60)};
  // A tunnel one side of which has finished (FIN / END_STREAM) is closed
  // when the other side stays silent this long (HAProxy's client-fin /
  // server-fin). Needed because proxies such as nghttpx do not pass an
  // END_STREAM on to the destination, so without it a tunnel whose app has
  // gone lives until the destination's own idle timeout, holding a stream.
  // Config: the listener's tunnel_half_close_timeout.
  config::Duration tunnel_half_close_timeout{std::chrono::seconds(1)};
  // Send-buffer tuning of app sockets (and, in direct mode, of the sockets
  // to destinations). Config: the listener's send_buffer / tcp_notsent_lowat.
  net::SendBufferConfig send_buffer;
};

}  // namespace h2gate::downstream
