// `h2gate check`'s proxy authentication walk (gateway/check/check_auth.h),
// with Basic (no KDC or NTLM library needed): the lines a user reads say what
// is configured, what went and what the proxy made of it, and never show a
// password or the header that carries it. The walk against real proxies
// (Negotiate, NTLM) is the integration tests' (tests/integration/
// check_test.cc).
#include "gateway/check/check_auth.h"

#include <sstream>

#include <asio.hpp>
#include <catch2/catch.hpp>

#include "gateway/check/check_report.h"

using namespace h2gate;
using namespace h2gate::check;
using namespace std::chrono_literals;
using Kind = upstream::auth::Verdict::Kind;

namespace {

constexpr const char* kPassword = "s3cret-Pa55";
// "alice:s3cret-Pa55" in base64: what must not be printed either.
constexpr const char* kEncoded = "YWxpY2U6czNjcmV0LVBhNTU=";

config::Cluster cluster(bool with_credentials,
                        std::optional<config::ProxyAuthentication::Scheme> scheme) {
  config::Cluster c;
  c.name = "corp";
  c.endpoints.push_back({"proxy.corp", 3128});
  if (with_credentials) c.credentials = config::ProxyCredentials("alice", kPassword);
  if (scheme) {
    c.authentication.emplace();
    c.authentication->scheme = *scheme;
  }
  return c;
}

ResponseHead answer(int status, const char* reason,
                    std::initializer_list<const char*> proxy_authenticate = {}) {
  ResponseHead h;
  h.status = status;
  h.reason = reason;
  for (const char* v : proxy_authenticate) h.headers.push_back({"Proxy-Authenticate", v});
  return h;
}

struct Walk {
  explicit Walk(const config::Cluster* c) {
    walk.setCluster(c);
    walk.startEndpoint(0);
  }
  ~Walk() { walk.resetRequest(); }
  std::string text() const { return out.str(); }
  asio::io_context io;
  std::ostringstream out;
  Report report{out};
  AuthWalk walk{io, report, 2000ms, 1};
};

}  // namespace

TEST_CASE("check auth: Basic configured, sent, accepted; never the password",
          "[check][check_auth]") {
  const config::Cluster c = cluster(true, std::nullopt);
  Walk w(&c);
  bool has_credentials = false;
  REQUIRE(w.walk.describe(false, &has_credentials));
  CHECK(has_credentials);
  CHECK(w.walk.active());
  REQUIRE(w.walk.prepare(false));
  CHECK(w.walk.authorization() == std::string("Basic ") + kEncoded);
  CHECK_FALSE(w.walk.handshake());
  const upstream::auth::Verdict v = w.walk.onResponse(answer(200, "OK"), true, true);
  CHECK(v.kind == Kind::Deliver);
  const std::string text = w.text();
  INFO(text);
  CHECK_THAT(text, Catch::Contains("configured: basic (proxy_credentials) as 'alice'"));
  CHECK_THAT(text, Catch::Contains("sending Basic (24 characters, not shown) as 'alice'"));
  CHECK_THAT(text, Catch::Contains("Basic accepted (200 OK)"));
  CHECK(text.find(kPassword) == std::string::npos);
  CHECK(text.find(kEncoded) == std::string::npos);
  CHECK_FALSE(w.report.failed());
}

TEST_CASE("check auth: Basic rejected: the verdict names the user, not the password",
          "[check][check_auth]") {
  const config::Cluster c = cluster(true, std::nullopt);
  Walk w(&c);
  bool has_credentials = false;
  REQUIRE(w.walk.describe(false, &has_credentials));
  REQUIRE(w.walk.prepare(false));
  const ResponseHead denied = answer(407, "Proxy Authentication Required", {"Basic realm=\"x\""});
  w.walk.onResponse(denied, true, true);
  CHECK_FALSE(w.walk.fail407(denied, "http", has_credentials));
  CHECK(w.report.failed());
  CHECK(w.report.failedStep() == "proxy-auth");
  CHECK_THAT(w.report.failure(),
             Catch::StartsWith("FAIL (proxy-auth): the proxy rejected the Basic credentials as "
                               "'alice' — check user name and password"));
  CHECK_THAT(w.text(), Catch::Contains("407 proxy authentication required (the proxy offers: "
                                       "Basic)"));
  CHECK(w.text().find(kPassword) == std::string::npos);
}

TEST_CASE("check auth: auto learns the scheme from the 407 and retries once with it",
          "[check][check_auth]") {
  const config::Cluster c = cluster(true, config::ProxyAuthentication::Scheme::Auto);
  Walk w(&c);
  bool has_credentials = false;
  REQUIRE(w.walk.describe(false, &has_credentials));
  REQUIRE(w.walk.prepare(false));
  CHECK(w.walk.authorization().empty());  // nothing up front: the scheme is not known yet
  const upstream::auth::Verdict v = w.walk.onResponse(
      answer(407, "Proxy Authentication Required", {"Basic realm=\"corp\""}), true, true);
  CHECK(v.kind == Kind::Retry);
  CHECK(w.walk.retryRequested());
  CHECK_THAT(w.text(), Catch::Contains("configured: auto (the strongest scheme the proxy offers: "
                                       "Negotiate > NTLM > Basic) as 'alice'"));
  CHECK_THAT(w.text(), Catch::Contains("nothing sent up front (the scheme is learnt from the "
                                       "proxy's 407)"));
  CHECK_THAT(w.text(),
             Catch::Contains("407 Proxy Authentication Required, the proxy offers Basic: auto "
                             "picks basic; one retry with it, as the daemon does"));
  // The retry sends Basic.
  w.walk.clearRetry();
  REQUIRE(w.walk.prepare(false));
  CHECK(w.walk.authorization() == std::string("Basic ") + kEncoded);
}

TEST_CASE("check auth: nothing configured, or the header carried by upstream_headers",
          "[check][check_auth]") {
  const config::Cluster none = cluster(false, std::nullopt);
  {
    Walk w(&none);
    bool has_credentials = false;
    REQUIRE(w.walk.describe(false, &has_credentials));
    CHECK_FALSE(has_credentials);
    CHECK_FALSE(w.walk.active());
    REQUIRE(w.walk.prepare(true));
    CHECK(w.walk.authorization().empty());
    const ResponseHead denied =
        answer(407, "Proxy Authentication Required", {"Negotiate", "NTLM", "Basic realm=\"x\""});
    CHECK_FALSE(w.walk.fail407(denied, "http", has_credentials));
    CHECK_THAT(w.text(), Catch::Contains("none configured"));
    CHECK_THAT(w.report.failure(), Catch::Contains("(the proxy offers: Negotiate, NTLM, Basic)"));
    CHECK_THAT(w.report.failure(), Catch::EndsWith("give credentials: "
                                                   "https://USER:PASSWORD@HOST:PORT in --upstream, "
                                                   "or credentials in the cluster"));
  }
  {
    const config::Cluster c = cluster(true, std::nullopt);
    Walk w(&c);
    bool has_credentials = false;
    REQUIRE(w.walk.describe(true, &has_credentials));
    CHECK(has_credentials);
    CHECK_FALSE(w.walk.active());  // the carried header wins, as in the daemon
    CHECK_THAT(w.text(), Catch::Contains("Proxy-Authorization from upstream_headers"));
  }
}

TEST_CASE("check auth: a proxy's list of schemes, shortened", "[check][check_auth]") {
  CHECK(AuthWalk::offersText(answer(407, "x")) == "no Proxy-Authenticate");
  ResponseHead many = answer(407, "x");
  for (int i = 0; i < 11; ++i)
    many.headers.push_back({"Proxy-Authenticate", "S" + std::to_string(i)});
  CHECK(AuthWalk::offersText(many) == "S0, S1, S2, S3, S4, S5, S6, S7 and 3 more");
}
