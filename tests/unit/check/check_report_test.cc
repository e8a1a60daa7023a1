#include "gateway/check/check_report.h"

#include <catch2/catch.hpp>

#include <openssl/x509_vfy.h>

#include <sstream>

using namespace h2gate::check;

TEST_CASE("check report: one line per step, the first failure is the verdict", "[check]") {
  std::ostringstream out;
  Report r(out);
  r.begin();
  r.ok("tcp", "connected");
  r.note("proxy-auth", "configured: negotiate");
  CHECK(!r.failed());
  // A FAIL line that is not the verdict (the cause follows).
  r.failLine("connect", "407 proxy authentication required");
  CHECK(!r.failed());
  CHECK_FALSE(r.fail("proxy-auth", "no negotiate credentials", "run kinit"));
  CHECK_FALSE(r.fail("request", "later", "-"));
  CHECK(r.failed());
  CHECK(r.failedStep() == "proxy-auth");
  CHECK(r.failure() == "FAIL (proxy-auth): no negotiate credentials — run kinit");
  const std::string text = out.str();
  CHECK(text.find("  ok    tcp      ") == 0);
  CHECK(text.find(" ms  connected\n") != std::string::npos);
  CHECK(text.find("  --    proxy-auth ") != std::string::npos);
  CHECK(text.find("  FAIL  connect  ") != std::string::npos);
  CHECK(text.find("  FAIL  request  ") != std::string::npos);
}

TEST_CASE("check report: a failure the daemon gets past (fallback) is no longer the verdict",
          "[check]") {
  std::ostringstream out;
  Report r(out);
  r.fail("tcp", "connecting to proxy failed: 127.0.0.1:1: Connection refused", "is it running?");
  r.recover("cluster 'primary'");
  CHECK(!r.failed());
  CHECK(r.failedStep().empty());
  REQUIRE(r.tried().size() == 1);
  CHECK(r.tried()[0] ==
        "cluster 'primary': tcp: connecting to proxy failed: 127.0.0.1:1: Connection refused");
  r.warn("alpn", "http/1.1", "ask for HTTP/2");
  CHECK(r.warnings() == std::vector<std::string>{"alpn"});
  CHECK(out.str().find("-> ask for HTTP/2") != std::string::npos);
}

TEST_CASE("check report: advice for certificate verification failures", "[check]") {
  CHECK(verifyAdvice(X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, "proxy").find("unknown CA") ==
        0);
  CHECK(verifyAdvice(X509_V_ERR_HOSTNAME_MISMATCH, "proxy.example")
            .find("not issued for 'proxy.example'") != std::string::npos);
  CHECK(verifyAdvice(X509_V_ERR_CERT_HAS_EXPIRED, "p").find("clock") != std::string::npos);
}

TEST_CASE("check report: a server's bytes are printed escaped and shortened", "[check]") {
  // As config errors are escaped (config::escapeControls): controls, C1
  // controls, bytes that are not UTF-8; UTF-8 text stays.
  CHECK(serverText("Forbidden \x1b]0;title\x07\x1b[2J\r\n  ok") ==
        "Forbidden \\x1b]0;title\\x07\\x1b[2J\\r\\n  ok");
  CHECK(serverText("csi \xc2\x9b"
                   "31m, caf\xc3\xa9, \xff") == "csi \\u009b31m, caf\xc3\xa9, \\xff");
  CHECK(serverText(std::string(300, 'a')) == std::string(256, 'a') + "... (300 bytes)");
  // Not cut inside a UTF-8 sequence.
  CHECK(serverText("ab\xc3\xa9", 3) == "ab... (4 bytes)");

  // Every line goes out escaped, whoever built it; so do the verdict and
  // what is remembered of a failure.
  std::ostringstream out;
  Report r(out);
  r.ok("request", "HEAD / -> HTTP/1.1 200 \x1b[2J\rforged");
  r.warn("alpn", "\x1b]0;t\x07", "advice\nforged");
  r.fail("connect", "refused: 403 \x1b[31m\nforged", "see\rits logs");
  r.recover("cluster 'x'");
  r.fail("tcp", "second \x1b", "-");
  const std::string text = out.str();
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    CHECK(!((c < 0x20 && c != '\n') || c == 0x7f));
  }
  CHECK(text.find("HTTP/1.1 200 \\x1b[2J\\rforged\n") != std::string::npos);
  CHECK(text.find("-> advice\\nforged\n") != std::string::npos);
  CHECK(r.tried()[0] == "cluster 'x': connect: refused: 403 \\x1b[31m\\nforged");
  CHECK(r.failure() == "FAIL (tcp): second \\x1b — -");
}
