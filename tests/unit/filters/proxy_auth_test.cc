// proxy_auth: Basic authentication of apps, and its config errors.
#include "filters/proxy_auth.h"

#include <catch2/catch.hpp>

#include "filter_env.h"
#include "filters/registry.h"
#include "tests/support/config_util.h"

using namespace h2gate;
using namespace h2gate::filters;
using h2gate::testing::allProblems;
using h2gate::testing::App1Env;
using h2gate::testing::connectWith;
using h2gate::testing::ScopedEnv;

TEST_CASE("proxy_auth: Basic credentials, 407 otherwise", "[filters][proxy_auth]") {
  ScopedEnv pw("H2GATE_TEST_PW", "s3cret");
  App1Env env;
  const FilterPtr f = env.make(kProxyAuth,
                               "users:\n"
                               "- {username: alice, password: '${H2GATE_TEST_PW}'}\n"
                               "- {username: bob, password: 'p:w d'}\n");
  INFO(allProblems(env.diag.problems()));
  REQUIRE(f);
  auto check = [&](std::optional<std::string> header) {
    Headers h;
    if (header) h.push_back({"Proxy-Authorization", *header});
    StreamInfo info;
    const FilterStatus s = f->onRequestHead(connectWith(h), info);
    return s == FilterStatus::Continue
               ? std::string("ok")
               : std::to_string(info.status) + " " + info.reason + " | " + info.reply_headers;
  };
  CHECK(check("Basic YWxpY2U6czNjcmV0") == "ok");      // alice:s3cret
  CHECK(check("basic   YWxpY2U6czNjcmV0  ") == "ok");  // scheme any case, blanks
  CHECK(check("Basic Ym9iOnA6dyBk") == "ok");          // bob:p:w d
  const std::string challenge = "Proxy-Authenticate: Basic realm=\"h2gate\", charset=\"UTF-8\"\r\n";
  CHECK(check(std::nullopt) == "407 proxy authentication required (Basic) | " + challenge);
  CHECK(check("Basic YWxpY2U6d3Jvbmc=") ==  // alice:wrong
        "407 proxy authentication failed: wrong credentials | " + challenge);
  CHECK(check("Basic Ym9iOnMzY3JldA==") != "ok");  // bob with alice's password
  CHECK(check("Bearer YWxpY2U6czNjcmV0") != "ok");
  CHECK(check("Basic !!!!") != "ok");
  CHECK(check("Basic YWxpY2U6czNjcmV0YQ") != "ok");  // not a multiple of 4
  CHECK(check("Basic " + std::string(10000, 'A')) != "ok");
}

TEST_CASE("proxy_auth: config errors", "[filters][proxy_auth]") {
  App1Env env;
  CHECK_FALSE(env.make(kProxyAuth, "{}"));
  CHECK_FALSE(env.make(kProxyAuth,
                       "realm: 'a\"b'\n"
                       "users:\n"
                       "- {username: 'a:b', password: x}\n"
                       "- {username: c, password: ''}\n"
                       "- {username: d, password: '${H2GATE_TEST_UNSET_VAR}'}\n"));
  CHECK(allProblems(env.diag.problems()) ==
        "h.yaml:1:1: typed_config.users: missing required field\n"
        "h.yaml:1:8: typed_config.realm: must be non-empty, without quotes, backslashes or line "
        "breaks\n"
        "h.yaml:3:14: typed_config.users[0].username: must be non-empty and without ':' (RFC "
        "7617)\n"
        "h.yaml:4:27: typed_config.users[1].password: must not be empty\n"
        "h.yaml:5:27: typed_config.users[2].password: environment variable H2GATE_TEST_UNSET_VAR "
        "is not set\n");
}
