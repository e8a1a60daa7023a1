// The one interface between the app-facing side and whatever carries a
// request upstream: an HTTP/2 stream, an HTTP/1.1 tunnel to a proxy, or a
// direct TCP connection. The downstream side does not know which it has.
//
// Flow control is by acknowledgement: a side hands over one buffer and gets a
// `done` callback when the bytes have left (were written to the socket, or
// copied into a bounded queue). It MUST NOT hand over another buffer before
// `done`. `done` may run before the call that handed the buffer returns.
#pragma once

#include <functional>
#include <memory>
#include <string_view>

#include "gateway/base/http_types.h"

namespace h2gate::upstream {

using Done = std::function<void()>;

// Implemented by the downstream side. A Tunnel calls these; after
// onFailed/onReset it calls nothing more.
class TunnelCallbacks {
 public:
  virtual ~TunnelCallbacks() = default;
  // The response head. For CONNECT, a 2xx status means the tunnel is open and
  // response body bytes are raw tunnel bytes.
  virtual void onResponseHead(ResponseHead head) = 0;
  // Response body bytes (decoded: no chunk framing). Call `done` when written.
  virtual void onResponseData(std::string_view data, Done done) = 0;
  // Several consecutive pieces of the body at once (what one read from the
  // proxy carried for this stream), so the app gets them in one write;
  // `done` once all are written. Only called when acceptsDataV() is true;
  // otherwise the pieces come one by one through onResponseData.
  virtual bool acceptsDataV() const { return false; }
  virtual void onResponseDataV(const std::string_view* pieces, size_t n, Done done) {
    (void)pieces;
    (void)n;
    (void)done;
  }
  // The response head and the body pieces that arrived with it (possibly
  // none), so the app can get them in one write; `done` (null when n is 0)
  // once the pieces are written. Only called when acceptsDataV() is true.
  virtual void onResponseHeadV(ResponseHead head, const std::string_view* pieces, size_t n,
                               Done done) {
    onResponseHead(std::move(head));
    if (n > 0) onResponseDataV(pieces, n, std::move(done));
  }
  // The upstream finished its direction (END_STREAM / FIN / message end).
  virtual void onResponseEnd() = 0;
  // Nothing was sent to the app yet and the request cannot go on: the app
  // gets `status` (502, 503, 504) with `reason` in the body.
  virtual void onFailed(int status, Result result, std::string reason) = 0;
  // Broken after the response started: the app connection must be closed
  // without pretending the message completed.
  virtual void onReset(Result result, std::string reason) = 0;
};

class Tunnel {
 public:
  virtual ~Tunnel() = default;
  // Starts the request: resolve/connect/open a stream, send the head. The
  // head outlives the tunnel (it lives in the downstream connection).
  virtual void open(const RequestHead& head, StreamInfo& info, TunnelCallbacks& callbacks) = 0;
  // Request body bytes (absolute-form, decoded) or raw tunnel bytes (CONNECT)
  // from the app. May be called before the tunnel is connected: the bytes are
  // held until then. `done` runs once they are handed to the upstream.
  virtual void send(std::string_view data, Done done) = 0;
  // The app finished its direction (request body complete / FIN on a
  // tunnel). Only after the last send's done.
  virtual void endOfRequest() = 0;
  // Abandon the request (the app went away or shutdown). No callbacks after
  // this returns.
  virtual void abort() = 0;
};

}  // namespace h2gate::upstream
