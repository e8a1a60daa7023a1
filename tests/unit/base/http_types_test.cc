#include "gateway/base/http_types.h"

#include <catch2/catch.hpp>

using namespace h2gate;

TEST_CASE("findHeader returns the first match", "[http_types]") {
  Headers h{{"Host", "a"}, {"X", "1"}, {"host", "b"}};
  REQUIRE(findHeader(h, "HOST") != nullptr);
  CHECK(findHeader(h, "HOST")->value == "a");
  CHECK(findHeader(h, "missing") == nullptr);
  CHECK(findHeader(Headers{}, "Host") == nullptr);
}

TEST_CASE("authority brackets IPv6 literals", "[http_types]") {
  RequestHead r;
  r.host = "example.com";
  r.port = 443;
  CHECK(r.authority() == "example.com:443");
  r.host = "::1";
  r.port = 8080;
  CHECK(r.authority() == "[::1]:8080");
  r.host = "10.0.0.1";
  r.port = 80;
  CHECK(r.authority() == "10.0.0.1:80");
}

TEST_CASE("resultName gives stable label values", "[http_types]") {
  CHECK(resultName(Result::Ok) == "ok");
  CHECK(resultName(Result::Rejected) == "rejected");
  CHECK(resultName(Result::BadRequest) == "bad_request");
  CHECK(resultName(Result::DnsFailed) == "dns_failed");
  CHECK(resultName(Result::ConnectFailed) == "connect_failed");
  CHECK(resultName(Result::ConnectTimeout) == "connect_timeout");
  CHECK(resultName(Result::UpstreamReset) == "upstream_reset");
  CHECK(resultName(Result::DownstreamReset) == "downstream_reset");
  CHECK(resultName(Result::Drained) == "drained");
  CHECK(resultName(Result::StreamIdleTimeout) == "stream_idle_timeout");
}

TEST_CASE("basicCredentials is RFC 7617's Basic value", "[http_types]") {
  // RFC 7617 section 2's example.
  CHECK(basicCredentials("Aladdin", "open sesame") == "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
  CHECK(basicCredentials("u", "") == "Basic dTo=");
  // A password may hold ':' (only the user name may not).
  CHECK(basicCredentials("u", "a:b") == "Basic dTphOmI=");
}
