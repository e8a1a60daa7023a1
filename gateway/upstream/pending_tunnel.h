// A Tunnel whose real implementation is not known yet: a direct connection
// still resolving, or a request waiting in a pool for an upstream connection.
// It holds the app's first buffer and its end-of-request until attach() hands
// them to the real tunnel. Subclasses implement open() and call attach() or
// fail().
#pragma once

#include <memory>
#include <string>

#include "gateway/upstream/tunnel.h"

namespace h2gate::upstream {

class PendingTunnel : public Tunnel {
 public:
  void send(std::string_view data, Done done) override;
  void endOfRequest() override;
  // Subclasses cancel their own work first, then call this.
  void abort() override;

 protected:
  // Opens `inner` with the saved request and replays what the app sent.
  void attach(std::shared_ptr<Tunnel> inner);
  // Reports a failure before any tunnel was attached.
  void fail(int status, Result result, std::string reason);
  bool attached() const { return inner_ != nullptr; }
  void save(const RequestHead& head, StreamInfo& info, TunnelCallbacks& callbacks) {
    head_ = &head;
    info_ = &info;
    callbacks_ = &callbacks;
  }

  const RequestHead* head_ = nullptr;
  StreamInfo* info_ = nullptr;
  TunnelCallbacks* callbacks_ = nullptr;  // null once failed/aborted
  std::shared_ptr<Tunnel> inner_;

 private:
  std::string_view pending_;
  Done pending_done_;
  bool end_pending_ = false;
};

}  // namespace h2gate::upstream
