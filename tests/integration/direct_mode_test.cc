// h2gate in direct mode (no upstream proxy) with real curl as the app and
// nginx as the origin: downloads, parallel transfers, uploads, keep-alive and
// the access log.
#include <catch2/catch.hpp>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tests/support/h2gate.h"
#include "tests/support/net.h"
#include "tests/support/origin.h"
#include "tests/support/temp_dir.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

H2gate::Options directGateOptions() {
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  return o;
}

// nginx + h2gate (direct mode, flags only) + a scratch dir for downloads.
struct DirectEnv {
  Nginx nginx;
  H2gate gate{directGateOptions()};
  TempDir out{"out"};

  // curl through h2gate; adds -sS, -x, --cacert, --max-time.
  CommandResult curl(std::vector<std::string> args, milliseconds timeout = milliseconds(120000)) {
    std::vector<std::string> all{"-sS",
                                 "-x",
                                 gate.proxyUrl(),
                                 "--cacert",
                                 nginx.caCertPath(),
                                 "--max-time",
                                 std::to_string(timeout.count() / 1000)};
    all.insert(all.end(), args.begin(), args.end());
    return runCurl(all, timeout + milliseconds(5000));
  }
};

std::string port(uint16_t p) {
  return std::to_string(p);
}

}  // namespace

TEST_CASE("direct mode logs that it is in direct mode", "[direct]") {
  H2gate gate(directGateOptions());
  CHECK(gate.process().waitForLog("direct mode", milliseconds(2000)));
}

TEST_CASE("downloads through CONNECT and absolute-form are byte-identical", "[direct]") {
  DirectEnv env;
  auto name = GENERATE(as<std::string>{}, "1k", "1m", "64m");
  const TestFile& f = testFile(name);
  auto kind = GENERATE(as<std::string>{}, "https", "http", "https-localhost", "https-http1.1");
  std::string url;
  std::vector<std::string> extra;
  if (kind == "https") url = env.nginx.httpsUrl("/" + name);
  if (kind == "http") url = env.nginx.httpUrl("/" + name);
  if (kind == "https-localhost")
    url = "https://localhost:" + port(env.nginx.tlsPort()) + "/" + name;
  if (kind == "https-http1.1") {
    url = env.nginx.httpsUrl("/" + name);
    extra.push_back("--http1.1");
  }
  INFO(kind << " " << url);
  std::string dest = env.out.file("dl");
  extra.insert(extra.end(), {"-o", dest, "-w", "%{http_code} %{size_download}", url});
  auto r = env.curl(extra);
  INFO("curl stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "200 " + std::to_string(f.size));
  CHECK(sha256File(dest) == f.sha256);

  auto log = env.gate.waitForAccessLog(1);
  REQUIRE(log.size() == 1);
  bool connect = kind != "http";
  CHECK(log[0].get("method") == (connect ? "CONNECT" : "GET"));
  CHECK(log[0].num("status") == 200);
  CHECK(log[0].get("result") == "ok");
  CHECK(log[0].get("protocol") == "direct");
  if (connect) {
    CHECK(log[0].num("bytes_down") > static_cast<long long>(f.size));  // TLS adds bytes
  } else {
    CHECK(log[0].num("bytes_down") == static_cast<long long>(f.size));
    CHECK(log[0].get("target") == url);
  }
}

TEST_CASE("20 parallel transfers are all byte-identical", "[direct]") {
  DirectEnv env;
  const TestFile& f = testFile("1m");
  std::vector<std::string> args{"--parallel",           "--parallel-max", "20",
                                "--parallel-immediate", "--http1.1",      "-w",
                                "%{http_code}\\n"};
  for (int i = 0; i < 20; ++i) {
    args.push_back("-o");
    args.push_back(env.out.file("p" + std::to_string(i)));
    args.push_back(i % 2 ? env.nginx.httpsUrl("/1m?" + std::to_string(i))
                         : env.nginx.httpUrl("/1m?" + std::to_string(i)));
  }
  auto r = env.curl(args);
  INFO("curl stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  int ok = 0;
  for (size_t pos = 0; (pos = r.out.find("200\n", pos)) != std::string::npos; pos += 4) ++ok;
  CHECK(ok == 20);
  for (int i = 0; i < 20; ++i) {
    INFO("transfer " << i);
    CHECK(sha256File(env.out.file("p" + std::to_string(i))) == f.sha256);
  }
  auto log = env.gate.waitForAccessLog(20);
  CHECK(log.size() == 20);
  std::set<std::string> connections;
  for (const auto& e : log) {
    CHECK(e.num("status") == 200);
    connections.insert(e.get("connection_id"));
  }
  CHECK(connections.size() == 20);  // --parallel-immediate: one connection each
}

TEST_CASE("10 MiB uploads arrive intact", "[direct][upload]") {
  DirectEnv env;
  const TestFile& f = testFile("10m");
  const std::string want = f.sha256 + " " + std::to_string(f.size) + "\n";
  auto target = GENERATE(as<std::string>{}, "http", "https-h1", "https-h2", "sink");
  auto framing = GENERATE(as<std::string>{}, "content-length", "chunked", "no-expect");
  std::vector<std::string> args;
  std::string url = target == "http"   ? env.nginx.httpUrl("/upload")
                    : target == "sink" ? "http://127.0.0.1:" + port(env.nginx.sinkPort()) + "/x"
                                       : env.nginx.httpsUrl("/upload");
  if (target == "https-h1") args.push_back("--http1.1");
  if (target == "https-h2") args.push_back("--http2");
  // curl sends "Expect: 100-continue" for bodies > 1 MiB unless told not to.
  if (framing == "chunked") args.insert(args.end(), {"-H", "Transfer-Encoding: chunked"});
  if (framing == "no-expect") args.insert(args.end(), {"-H", "Expect:"});
  args.insert(args.end(), {"-i", "--data-binary", "@" + f.path, url});
  INFO(target << " " << framing);
  auto r = env.curl(args);
  INFO("curl stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find(" 200 ") != std::string::npos);
  CHECK(r.out.size() >= want.size());
  CHECK(r.out.substr(r.out.size() - std::min(r.out.size(), want.size())) == want);
  if (target == "sink") {
    // Straight to the sink, so h2gate's own framing is what the sink saw.
    CHECK(r.out.find(std::string("X-Sink-Framing: ") +
                     (framing == "chunked" ? "chunked" : "content-length")) != std::string::npos);
  }
  if (target == "http" || target == "sink") {
    auto log = env.gate.waitForAccessLog(1);
    REQUIRE(log.size() == 1);
    CHECK(log[0].get("method") == "POST");
    CHECK(log[0].num("bytes_up") == static_cast<long long>(f.size));
  }
}

TEST_CASE("Expect: 100-continue gets 100 Continue before the body", "[direct][upload]") {
  DirectEnv env;
  RawConnection c(env.gate.port());
  std::string body(5000, 'b');
  REQUIRE(c.send("POST " + env.nginx.httpUrl("/upload") + " HTTP/1.1\r\nHost: 127.0.0.1:" +
                 port(env.nginx.httpPort()) + "\r\nContent-Length: " + std::to_string(body.size()) +
                 "\r\nExpect: 100-continue\r\n\r\n"));
  auto interim = c.readResponse(milliseconds(5000));
  REQUIRE(interim.status == 100);
  REQUIRE(c.send(body));
  auto resp = c.readResponse(milliseconds(5000));
  CHECK(resp.status == 200);
  CHECK(resp.body == sha256Hex(body) + " 5000\n");
}

TEST_CASE("keep-alive: two absolute-form requests reuse the app connection", "[direct]") {
  DirectEnv env;
  const TestFile& f = testFile("1k");
  auto r = env.curl({"-v", "-o", env.out.file("a"), env.nginx.httpUrl("/1k"), "-o",
                     env.out.file("b"), env.nginx.httpUrl("/1k")});
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("Re-using existing connection") != std::string::npos);
  CHECK(sha256File(env.out.file("a")) == f.sha256);
  CHECK(sha256File(env.out.file("b")) == f.sha256);
  auto log = env.gate.waitForAccessLog(2);
  REQUIRE(log.size() == 2);
  CHECK(log[0].get("connection_id") == log[1].get("connection_id"));
  CHECK(log[0].num("stream_id") == 1);
  CHECK(log[1].num("stream_id") == 2);
}

TEST_CASE("25 requests on one connection, one access log line each", "[direct]") {
  DirectEnv env;
  const std::string origin = "127.0.0.1:" + port(env.nginx.httpPort());
  RawConnection c(env.gate.port());
  struct Want {
    int status;
    long long up, down;
  };
  std::vector<Want> wants;
  for (int i = 0; i < 25; ++i) {
    std::string req;
    Want w{};
    switch (i % 5) {
      case 0:
      case 1:
        req = "GET http://" + origin + "/1k HTTP/1.1\r\nHost: " + origin + "\r\n\r\n";
        w = {200, 0, 1024};
        break;
      case 2:
        req = "GET http://" + origin + "/missing-" + std::to_string(i) +
              " HTTP/1.1\r\nHost: " + origin + "\r\n\r\n";
        w = {404, 0, -1};
        break;
      case 3: {
        std::string body(777 + i, 'u');
        req = "POST http://" + origin + "/upload HTTP/1.1\r\nHost: " + origin +
              "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
        w = {200, static_cast<long long>(body.size()), 64 + 1 + 3 + 1};  // "<sha> 7xx\n"
        break;
      }
      case 4:
        req = "HEAD http://" + origin + "/1m HTTP/1.1\r\nHost: " + origin + "\r\n\r\n";
        w = {200, 0, 0};
        break;
    }
    INFO("request " << i);
    REQUIRE(c.send(req));
    auto resp = c.readResponse(milliseconds(5000), i % 5 == 4);
    REQUIRE(resp.status == w.status);
    REQUIRE(resp.body_complete);
    if (w.down < 0) w.down = static_cast<long long>(resp.body.size());
    CHECK(static_cast<long long>(resp.body.size()) == w.down);
    if (i % 5 == 4) CHECK(resp.header("Content-Length") == std::to_string(1 << 20));
    wants.push_back(w);
  }
  auto log = env.gate.waitForAccessLog(25);
  REQUIRE(log.size() == 25);
  for (size_t i = 0; i < log.size(); ++i) {
    INFO("line " << i << ": " << log[i].line);
    CHECK(log[i].get("connection_id") == log[0].get("connection_id"));
    CHECK(log[i].num("stream_id") == static_cast<long long>(i + 1));
    CHECK(log[i].num("status") == wants[i].status);
    CHECK(log[i].num("bytes_up") == wants[i].up);
    CHECK(log[i].num("bytes_down") == wants[i].down);
    CHECK(log[i].get("result") == "ok");
  }
}

TEST_CASE("origin response framings reach the app intact", "[direct]") {
  DirectEnv env;
  const std::string origin = "127.0.0.1:" + port(env.nginx.sinkPort());
  auto c = std::make_unique<RawConnection>(env.gate.port());
  // Chunked from the origin, then a close-delimited body (no length, no
  // chunks): both must arrive whole. h2gate may re-chunk the latter (the app
  // connection stays usable) or pass it on close-delimited (then it closes).
  for (const std::string path : {"/chunked/300000", "/close/300000", "/chunked/1"}) {
    INFO(path);
    REQUIRE(c->send("GET http://" + origin + path + " HTTP/1.1\r\nHost: " + origin + "\r\n\r\n"));
    auto r = c->readResponse(milliseconds(10000));
    REQUIRE(r.status == 200);
    CHECK(r.body_complete);
    size_t n = std::stoul(path.substr(path.rfind('/') + 1));
    CHECK(r.body.size() == n);
    CHECK(r.body == patternBytes(n));
    if (!r.hasHeader("Content-Length") && !r.hasHeader("Transfer-Encoding")) {
      CHECK(c->eof());
      c = std::make_unique<RawConnection>(env.gate.port());
    }
  }
  auto log = env.gate.waitForAccessLog(3);
  REQUIRE(log.size() == 3);
  CHECK(log[1].num("bytes_down") == 300000);
}

TEST_CASE("pipelined requests are answered in order", "[direct]") {
  DirectEnv env;
  const std::string origin = "127.0.0.1:" + port(env.nginx.sinkPort());
  RawConnection c(env.gate.port());
  std::string all;
  for (int i = 0; i < 3; ++i)
    all += "GET http://" + origin + "/p" + std::to_string(i) + " HTTP/1.1\r\nHost: " + origin +
           "\r\n\r\n";
  REQUIRE(c.send(all));
  for (int i = 0; i < 3; ++i) {
    auto r = c.readResponse(milliseconds(5000));
    REQUIRE(r.status == 200);
    CHECK(r.body.rfind("GET /p" + std::to_string(i) + " HTTP/1.1\n", 0) == 0);
  }
}

TEST_CASE("an HTTP/1.0 app gets a complete close-delimited body", "[direct]") {
  DirectEnv env;
  const TestFile& f = testFile("1m");
  auto r = env.curl(
      {"--http1.0", "-o", env.out.file("a"), "-w", "%{http_code}", env.nginx.httpUrl("/1m")});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "200");
  CHECK(sha256File(env.out.file("a")) == f.sha256);
  // A chunked origin response must not reach an HTTP/1.0 app chunked.
  const std::string origin = "127.0.0.1:" + port(env.nginx.sinkPort());
  RawConnection c(env.gate.port());
  REQUIRE(c.send("GET http://" + origin + "/chunked/100000 HTTP/1.0\r\n\r\n"));
  auto resp = c.readResponse(milliseconds(10000));
  REQUIRE(resp.status == 200);
  CHECK_FALSE(resp.hasHeader("Transfer-Encoding"));
  CHECK(resp.body == patternBytes(100000));
  CHECK(c.eof());
}
