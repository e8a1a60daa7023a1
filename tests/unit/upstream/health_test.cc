// A cluster's endpoint health, as /ready and the metrics see it.
#include "gateway/upstream/health.h"

#include <catch2/catch.hpp>

using namespace h2gate;

TEST_CASE("cluster health: up, down, lost", "[upstream][health]") {
  upstream::ClusterHealth h("up", {"a:443", "b:443"});
  CHECK(!h.usable());
  h.failed(0, "connection refused");
  CHECK(!h.usable());
  h.connected(1, "h2");
  CHECK(h.usable());
  auto snap = h.snapshot();
  CHECK(snap[0].state == upstream::ClusterHealth::State::Down);
  CHECK(snap[0].last_error == "connection refused");
  CHECK(snap[1].state == upstream::ClusterHealth::State::Up);
  CHECK(snap[1].alpn == "h2");
  // A lost connection is remembered but does not make the endpoint down.
  h.lost(1, "proxy closed the connection");
  CHECK(h.usable());
  CHECK(h.snapshot()[1].last_error == "proxy closed the connection");
  h.failed(1, "timed out");
  CHECK(!h.usable());
  h.connected(0, "");
  CHECK(h.snapshot()[0].alpn == "http/1.1");
  CHECK(h.usable());
}
