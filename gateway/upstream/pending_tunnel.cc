#include "gateway/upstream/pending_tunnel.h"

namespace h2gate::upstream {

void PendingTunnel::send(std::string_view data, Done done) {
  if (inner_) return inner_->send(data, std::move(done));
  pending_ = data;
  pending_done_ = std::move(done);
}

void PendingTunnel::endOfRequest() {
  // Kept after it went on too: a request queued again (a retry) replays it
  // to its next tunnel.
  end_pending_ = true;
  if (inner_) inner_->endOfRequest();
}

void PendingTunnel::abort() {
  callbacks_ = nullptr;
  pending_done_ = nullptr;
  if (inner_) inner_->abort();
}

void PendingTunnel::attach(std::shared_ptr<Tunnel> inner) {
  TunnelCallbacks* cb = callbacks_;
  if (!cb) return;
  inner_ = std::move(inner);
  inner_->open(*head_, *info_, *cb);
  if (pending_done_) {
    Done d = std::move(pending_done_);
    pending_done_ = nullptr;
    inner_->send(pending_, std::move(d));
  }
  if (end_pending_) inner_->endOfRequest();
}

void PendingTunnel::fail(int status, Result result, std::string reason) {
  TunnelCallbacks* cb = callbacks_;
  callbacks_ = nullptr;
  pending_done_ = nullptr;
  if (cb) cb->onFailed(status, result, std::move(reason));
}

}  // namespace h2gate::upstream
