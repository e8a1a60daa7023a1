#include "filters/access_log.h"

#include <unistd.h>

#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "json_check.h"
#include "tests/support/config_util.h"

using namespace h2gate;
using namespace h2gate::filters;
using h2gate::testing::allProblems;
using h2gate::testing::FlatJson;

namespace {

struct Sample {
  Sample() {
    using namespace std::chrono;
    head.method = "CONNECT";
    head.target = "example.com:443";
    head.is_connect = true;
    head.headers.push_back(Header{"Proxy-Authorization", "Basic c2VjcmV0OnNlY3JldA=="});
    info.connection_id = 7;
    info.stream_id = 1;
    info.listener_name = "local_proxy";
    info.client = "127.0.0.1:50312";
    info.start_wall =
        sys_days{year{2026} / November / 22} + minutes(15) + seconds(28) + milliseconds(123);
    info.start = steady_clock::time_point(hours(1));
    info.status = 200;
    info.bytes_up = 123;
    info.bytes_down = 456;
    info.upstream = "93.184.215.14:443";
    info.protocol = "direct";
    info.result = Result::Ok;
  }
  std::string line() const {
    return AccessLogFilter::formatLine(head, info, info.start + std::chrono::microseconds(12300));
  }
  RequestHead head;
  StreamInfo info;
};

std::string tempPath(const char* tag) {
  return "/tmp/h2gate_access_log_" + std::string(tag) + "_" + std::to_string(::getpid()) + ".log";
}

}  // namespace

TEST_CASE("access_log writes the documented JSON line", "[filters][access_log]") {
  Sample s;
  CHECK(s.line() ==
        "{\"time\":\"2026-11-22T00:15:28.123Z\",\"listener\":\"local_proxy\",\"connection_id\":7,"
        "\"stream_id\":1,\"client\":\"127.0.0.1:50312\",\"method\":\"CONNECT\",\"target\":"
        "\"example.com:443\",\"status\":200,\"bytes_up\":123,\"bytes_down\":456,\"duration_ms\":"
        "12.300,\"cluster\":\"\",\"upstream\":\"93.184.215.14:443\",\"protocol\":\"direct\","
        "\"result\":\"ok\","
        "\"reason\":\"\"}");
  CHECK(s.line().find("c2VjcmV0") == std::string::npos);  // headers are never logged
}

TEST_CASE("access_log output is valid JSON whatever the target holds", "[filters][access_log]") {
  Sample s;
  s.info.result = Result::ConnectFailed;
  s.info.reason = "connect: Connection refused \"quoted\"";
  std::string garbage = "a\"b\\c\nd\re\tf";
  garbage += '\0';
  garbage += "\x01\x1f\x7f";
  garbage += "caf\xC3\xA9 \xF0\x9F\x98\x80";      // valid UTF-8: kept as is
  garbage += "\xFF\xC0\x80\xED\xA0\x80\xE2\x82";  // invalid: each byte → U+FFFD
  s.head.target = garbage;
  const std::string line = s.line();
  INFO(line);
  auto parsed = FlatJson::parse(line);
  REQUIRE(parsed);
  const std::string r = "\xEF\xBF\xBD";
  CHECK((*parsed)["target"] == std::string("a\"b\\c\nd\re\tf") + '\0' + "\x01\x1f\x7f" +
                                   "caf\xC3\xA9 \xF0\x9F\x98\x80" + r + r + r + r + r + r + r + r);
  CHECK((*parsed)["result"] == "connect_failed");
  CHECK((*parsed)["reason"] == s.info.reason);
  CHECK((*parsed)["status"] == "200");
  CHECK(parsed->size() == 16);

  std::mt19937 rng(42);
  for (int i = 0; i < 2000; ++i) {
    std::string t(rng() % 40, '\0');
    for (char& c : t) c = static_cast<char>(rng() % 256);
    s.head.target = t;
    s.head.method = t.substr(0, 5);
    INFO(i);
    REQUIRE(FlatJson::parse(s.line()));
  }
}

TEST_CASE("access_log hides credentials in absolute-form targets", "[filters][access_log]") {
  CHECK(redactUserinfo("http://user:pass@example.com/a@b") == "http://***@example.com/a@b");
  CHECK(redactUserinfo("http://p%40ss@example.com") == "http://***@example.com");
  CHECK(redactUserinfo("http://example.com/x?a=b@c") == "http://example.com/x?a=b@c");
  CHECK(redactUserinfo("example.com:443") == "example.com:443");
  Sample s;
  s.head.method = "GET";
  s.head.target = "http://alice:hunter2@example.com/";
  CHECK(s.line().find("hunter2") == std::string::npos);
}

TEST_CASE("access_log appends one line per completion, from many threads",
          "[filters][access_log]") {
  const std::string path = tempPath("threads");
  std::remove(path.c_str());
  {
    std::ofstream pre(path);
    pre << "existing line\n";
  }
  {
    AccessLogFilter log(AccessLogFilter::Config{path});
    REQUIRE(log.init() == "");
    REQUIRE(log.init() == "");  // idempotent
    Sample s;
    s.head.target = std::string(3000, 'x');  // long lines must not interleave either
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&log, &s, t] {
        StreamInfo info = s.info;
        info.connection_id = static_cast<uint64_t>(t);
        for (int i = 0; i < 200; ++i) {
          info.stream_id = static_cast<uint64_t>(i + 1);
          log.onComplete(s.head, info);
        }
      });
    }
    for (auto& th : threads) th.join();
  }
  std::ifstream in(path);
  std::string line;
  REQUIRE(std::getline(in, line));
  CHECK(line == "existing line");
  int count = 0;
  while (std::getline(in, line)) {
    INFO(line.substr(0, 200));
    REQUIRE(FlatJson::parse(line));
    ++count;
  }
  CHECK(count == 8 * 200);
  in.close();  // Windows removes no file that is open
  CHECK(std::remove(path.c_str()) == 0);
}

TEST_CASE("access_log config and init errors", "[filters][access_log]") {
  config::Diagnostics diag("al.yaml");
  config::Bootstrap b;
  config::Listener l;
  auto make = [&](const char* yaml) {
    config::NodeReader r(yaml ? YAML::Load(yaml) : YAML::Node(), "typed_config", diag);
    return createAccessLog(r, FactoryContext{b, l});
  };
  REQUIRE(make(nullptr));
  REQUIRE(make("{path: /dev/stderr}"));
  CHECK_FALSE(make("{path: ''}"));
  CHECK_FALSE(make("{format: json}"));
  CHECK_FALSE(make(
      "{\"@type\": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog}"));
  CHECK(allProblems(diag.problems()) ==
        "al.yaml:1:8: typed_config.path: must not be empty (omit it for stdout)\n"
        "al.yaml:1:2: typed_config.format: unknown field (expected one of: @type, path)\n"
        "al.yaml:1:11: typed_config.@type: expected "
        "type.googleapis.com/h2gate.filters.access_log.v1.Config, got "
        "'type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog'\n");

  AccessLogFilter bad(AccessLogFilter::Config{"/nonexistent/dir/access.log"});
  CHECK(bad.init() ==
        "h2gate.filters.access_log: cannot open '/nonexistent/dir/access.log' for append: No "
        "such file or directory");
  // Not initialised: completions are dropped, not a crash.
  Sample s;
  bad.onComplete(s.head, s.info);

  AccessLogFilter out(AccessLogFilter::Config{"/dev/stdout"});
  CHECK(out.init() == "");
  AccessLogFilter def(AccessLogFilter::Config{});
  CHECK(def.init() == "");
}
