// Self-tests of the real-server harness (tests/support): they need no h2gate,
// so a broken harness is told apart from a broken proxy.
#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <thread>

#include "tests/support/h2gate.h"
#include "tests/support/net.h"
#include "tests/support/origin.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_ca.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

TEST_CASE("TempDir is removed at destruction", "[harness]") {
  std::filesystem::path p;
  {
    TempDir dir("selftest");
    p = dir.path();
    dir.write("f.txt", "x");
    std::filesystem::create_directories(p / "sub" / "deeper");
    REQUIRE(std::filesystem::exists(p / "f.txt"));
  }
  if (!keepTestDirs()) CHECK_FALSE(std::filesystem::exists(p));
}

TEST_CASE("Process: logs, exit status, signals", "[harness]") {
  TempDir dir("proc");
  SECTION("exit code and log wait") {
    Process::Options o;
    o.argv = {"sh", "-c", "echo hello-$FOO; echo err >&2; exit 3"};
    o.env["FOO"] = "bar";
    o.log_dir = dir.path().string();
    Process p(o);
    CHECK(p.waitForLog("hello-bar", milliseconds(5000), Stream::Stdout));
    auto s = p.wait(milliseconds(5000));
    REQUIRE(s);
    CHECK(s->exited);
    CHECK(s->code == 3);
    CHECK(p.stderrText() == "err\n");
  }
  SECTION("waitForLog gives up when the process exits") {
    Process p({"true"}, dir.path().string());
    auto start = std::chrono::steady_clock::now();
    CHECK_FALSE(p.waitForLog("never", milliseconds(10000)));
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  }
  SECTION("stop kills the whole group") {
    Process::Options o;
    o.argv = {"sh", "-c", "sleep 100 & echo $! > child.pid; wait"};
    o.log_dir = o.cwd = dir.path().string();
    Process p(o);
    std::string pid_file = dir.file("child.pid");
    for (int i = 0; i < 200 && readFile(pid_file).empty(); ++i)
      std::this_thread::sleep_for(milliseconds(10));
    pid_t child = std::stoi(readFile(pid_file));
    auto s = p.stop(milliseconds(2000));
    CHECK_FALSE(s.exited);
    CHECK(s.signal == SIGTERM);
    std::this_thread::sleep_for(milliseconds(50));
    // Gone, or a zombie waiting for init to reap it.
    std::string stat = readFile("/proc/" + std::to_string(child) + "/stat");
    CHECK((stat.empty() || stat.find(") Z ") != std::string::npos));
  }
}

TEST_CASE("TestCA + nginx + curl straight to the origin", "[harness]") {
  Nginx nginx;
  const auto& f1k = testFile("1k");
  const auto& f1m = testFile("1m");
  TempDir out("curl");

  SECTION("HTTPS h2 and plain HTTP downloads are byte-identical") {
    auto r = runCurl({"-sS", "--http2", "--cacert", nginx.caCertPath(), "-o", out.file("a"), "-w",
                      "%{http_version} %{http_code}", nginx.httpsUrl("/1m")});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out == "2 200");
    CHECK(sha256File(out.file("a")) == f1m.sha256);
    r = runCurl({"-sS", "-o", out.file("b"), "-w", "%{http_code}", nginx.httpUrl("/1k")});
    REQUIRE(r.exit_code == 0);
    CHECK(r.out == "200");
    CHECK(sha256File(out.file("b")) == f1k.sha256);
    // localhost is in the certificate too.
    r = runCurl({"-sS", "--cacert", nginx.caCertPath(), "-o", "/dev/null", "-w", "%{http_code}",
                 "https://localhost:" + std::to_string(nginx.tlsPort()) + "/1k"});
    CHECK(r.out == "200");
  }
  SECTION("a cert from another CA is rejected") {
    TempDir other;
    TestCA ca2(other.path().string());
    auto r =
        runCurl({"-sS", "--cacert", ca2.caCertPath(), "-o", "/dev/null", nginx.httpsUrl("/1k")});
    CHECK(r.exit_code == 60);
  }
  SECTION("upload sink through nginx: Content-Length and chunked, both ports") {
    std::string body = std::string(300000, 'a') + "end";
    std::string file = out.write("body", body);
    std::string want = sha256Hex(body) + " " + std::to_string(body.size()) + "\n";
    for (const auto& url : {nginx.httpUrl("/upload"), nginx.httpsUrl("/upload")}) {
      auto r = runCurl({"-sS", "--cacert", nginx.caCertPath(), "--data-binary", "@" + file, url});
      CHECK(r.out == want);
      r = runCurl({"-sS", "--cacert", nginx.caCertPath(), "-H", "Transfer-Encoding: chunked",
                   "--data-binary", "@" + file, url});
      CHECK(r.out == want);
    }
    // Directly to the sink: it reports the framing it saw.
    auto r = runCurl({"-sS", "-i", "-H", "Transfer-Encoding: chunked", "--data-binary", "@" + file,
                      "http://127.0.0.1:" + std::to_string(nginx.sinkPort()) + "/"});
    CHECK(r.out.find("X-Sink-Framing: chunked") != std::string::npos);
    CHECK(r.out.find(want) != std::string::npos);
  }
  SECTION("header echo") {
    auto r = runCurl({"-sS", "-H", "X-Foo: 1", nginx.httpUrl("/headers")});
    CHECK(r.out.find("x-foo=1\n") != std::string::npos);
    CHECK(r.out.find("via=\n") != std::string::npos);
    r = runCurl({"-sS", "-H", "X-Foo: 2", nginx.httpUrl("/upload/x?y")});
    CHECK(r.out.rfind("GET /upload/x?y HTTP/1.1\n", 0) == 0);
    CHECK(r.out.find("X-Foo: 2\n") != std::string::npos);
  }
  SECTION("raw client: keep-alive responses and close") {
    RawConnection c(nginx.httpPort());
    REQUIRE(c.send("GET /1k HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\n"));
    auto a = c.readResponse();
    CHECK(a.status == 200);
    CHECK(a.body_complete);
    CHECK(sha256Hex(a.body) == f1k.sha256);
    auto b = c.readResponse();
    CHECK(b.status == 404);
    REQUIRE(c.send("GET /1k HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    CHECK(c.readResponse().status == 200);
    CHECK(c.waitForClose(milliseconds(2000)));
  }
  SECTION("slow location is slow") {
    auto start = std::chrono::steady_clock::now();
    auto r = runCurl({"-sS", "-o", "/dev/null", nginx.httpUrl("/slow/1m")});
    CHECK(r.exit_code == 0);
    CHECK(std::chrono::steady_clock::now() - start > milliseconds(1000));
  }
}

TEST_CASE("TcpServer helpers and the blackhole listener", "[harness]") {
  SECTION("reply after EOF") {
    TcpServer server(TcpServer::replyAfterEof("done"));
    RawConnection c(server.port());
    REQUIRE(c.send("hello"));
    c.shutdownWrite();
    CHECK(c.readUntilClose(milliseconds(3000)) == "done");
  }
  SECTION("echo") {
    TcpServer server(TcpServer::echo());
    RawConnection c(server.port());
    REQUIRE(c.send("ping"));
    CHECK(c.readExactly(4, milliseconds(3000)) == "ping");
  }
  SECTION("blackhole connects hang") {
    BlackholeListener bh;
    CHECK(bh.verify());
  }
  SECTION("free ports are bindable") {
    uint16_t p = freePort();
    CHECK(p > 1024);
    CHECK_FALSE(waitForPort(p, milliseconds(50)));
  }
}

TEST_CASE("JSON access-log line parser", "[harness]") {
  auto o = parseJsonObject(
      R"({"time":"2024-01-01T00:00:00Z","status":200,"bytes_up":0,"upstream":null,"reason":"a \"q\"\n"})");
  REQUIRE(o);
  CHECK((*o)["status"] == "200");
  CHECK((*o)["upstream"] == "null");
  CHECK((*o)["reason"] == "a \"q\"\n");
  CHECK_FALSE(parseJsonObject("listening on 127.0.0.1:1 (listener x)"));
}
