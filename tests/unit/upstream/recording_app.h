// The app side of one request as the upstream unit tests see it: a
// TunnelCallbacks that records what a Tunnel told it (the status, the body,
// how it ended and why). Used by pool_test.cc, http1_exchange_test.cc and
// direct_tunnel_test.cc.
#pragma once

#include <string>
#include <string_view>

#include "gateway/upstream/tunnel.h"

namespace h2gate::test {

struct RecordingApp : upstream::TunnelCallbacks {
  void onResponseHead(ResponseHead head) override {
    status = head.status;
    head_reason = head.reason;
  }
  void onResponseData(std::string_view data, upstream::Done done) override {
    body.append(data);
    done();
  }
  void onResponseEnd() override { ended = true; }
  void onFailed(int s, Result r, std::string why) override {
    failed = true;
    ++failures;
    status = s;
    result = r;
    reason = std::move(why);
  }
  void onReset(Result r, std::string why) override {
    reset = true;
    result = r;
    reason = std::move(why);
  }
  // It ended, one way or another.
  bool over() const { return ended || failed || reset; }

  int status = 0;
  std::string head_reason;  // the response head's reason phrase
  std::string body;
  bool ended = false;
  bool failed = false;
  int failures = 0;  // onFailed calls (exactly one, or none)
  bool reset = false;
  Result result = Result::Ok;
  std::string reason;  // onFailed's or onReset's
};

}  // namespace h2gate::test
