// A listener's metric cells (gateway/downstream/listener_stats.h): each
// request lands in the series of its own listener, cluster, protocol, kind and
// result, as a dashboard reads them.
#include "gateway/downstream/listener_stats.h"

#include <catch2/catch.hpp>

#include "gateway/metrics/registry.h"

using namespace h2gate;
using namespace h2gate::metrics;
using h2gate::downstream::ListenerStats;

namespace {

uint64_t finishedCount(Shard& s, const std::string& listener, const std::string& cluster,
                       const std::string& protocol, const char* kind, Result result) {
  return s
      .counter(Family::RequestsFinished,
               {listener, cluster, protocol, kind, std::string(resultName(result))})
      .value();
}

}  // namespace

TEST_CASE("listener stats: finished requests by cluster, protocol, kind and result",
          "[downstream][listener_stats]") {
  Registry r;
  Shard& s = r.newShard();
  ListenerStats stats(s, "main");
  stats.finished("corp", "h2", true, Result::Ok);
  stats.finished("corp", "h2", true, Result::Ok);
  stats.finished("corp", "h2", false, Result::Ok);
  stats.finished("corp", "h2", true, Result::UpstreamReset);
  stats.finished("direct", "http/1.1", false, Result::DnsFailed);
  CHECK(finishedCount(s, "main", "corp", "h2", "connect", Result::Ok) == 2);
  CHECK(finishedCount(s, "main", "corp", "h2", "forward", Result::Ok) == 1);
  CHECK(finishedCount(s, "main", "corp", "h2", "connect", Result::UpstreamReset) == 1);
  CHECK(finishedCount(s, "main", "direct", "http/1.1", "forward", Result::DnsFailed) == 1);
  CHECK(finishedCount(s, "main", "direct", "http/1.1", "connect", Result::DnsFailed) == 0);
  // Every result has its own cell, the last one included.
  stats.finished("corp", "h2", true, Result::StreamIdleTimeout);
  CHECK(finishedCount(s, "main", "corp", "h2", "connect", Result::StreamIdleTimeout) == 1);
}

TEST_CASE("listener stats: a cluster and protocol never run into each other's series",
          "[downstream][listener_stats]") {
  Registry r;
  Shard& s = r.newShard();
  ListenerStats stats(s, "main");
  // The same letters split differently: two routes, not one.
  stats.finished("ab", "c", true, Result::Ok);
  stats.finished("a", "bc", true, Result::Ok);
  CHECK(finishedCount(s, "main", "ab", "c", "connect", Result::Ok) == 1);
  CHECK(finishedCount(s, "main", "a", "bc", "connect", Result::Ok) == 1);

  ListenerStats::Route& one = stats.route("ab", "c");
  ListenerStats::Route& two = stats.route("a", "bc");
  CHECK(&one != &two);
  CHECK(&stats.route("ab", "c") == &one);  // looked up once, then the same cells
  one.up.add(100);
  two.down.add(7);
  CHECK(s.counter(Family::RelayedBytes, {"main", "ab", "c", "upstream"}).value() == 100);
  CHECK(s.counter(Family::RelayedBytes, {"main", "a", "bc", "downstream"}).value() == 7);
  CHECK(s.counter(Family::RelayedBytes, {"main", "ab", "c", "downstream"}).value() == 0);
}

TEST_CASE("listener stats: two listeners, error replies by status",
          "[downstream][listener_stats]") {
  Registry r;
  Shard& s = r.newShard();
  ListenerStats a(s, "a");
  ListenerStats b(s, "b");
  a.errorReply(502);
  a.errorReply(502);
  b.errorReply(403);
  a.connections.add();
  CHECK(s.counter(Family::DownstreamErrors, {"a", "502"}).value() == 2);
  CHECK(s.counter(Family::DownstreamErrors, {"b", "502"}).value() == 0);
  CHECK(s.counter(Family::DownstreamErrors, {"b", "403"}).value() == 1);
  CHECK(s.counter(Family::DownstreamConnections, {"a"}).value() == 1);
  CHECK(s.counter(Family::DownstreamConnections, {"b"}).value() == 0);
  a.finished("c", "h2", false, Result::Ok);
  CHECK(finishedCount(s, "b", "c", "h2", "forward", Result::Ok) == 0);
}
