#include "gateway/check_report.h"

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
