#include "filters/pac_route.h"

#include <catch2/catch.hpp>

#include <fstream>

#include "filter_env.h"
#include "filters/forward_proxy.h"
#include "tests/support/temp_dir.h"

using namespace h2gate;
using namespace h2gate::filters;
using h2gate::testing::requestHead;

namespace {

// A forward_proxy whose only route follows the PAC file `text` (written to
// a temporary file), started; the listener is 127.0.0.1:3128.
struct PacEnv : h2gate::testing::FilterEnv {
  explicit PacEnv(const std::string& text, const std::string& extra = "")
      : FilterEnv("pac.yaml", {"corp"}) {
    listener.address = config::SocketAddress{"127.0.0.1", 3128};
    const std::string path = dir.write("proxy.pac", text);
    filter =
        make(kForwardProxy, "routes:\n- match: {}\n  pac:\n    file: " + path +
                                "\n    evaluation: {timeout: 300ms, dns_timeout: 100ms}\n" + extra);
    for (const auto& p : diag.problems()) UNSCOPED_INFO(p.str());
    REQUIRE(filter);
    REQUIRE(const_cast<Filter&>(*filter).init().empty());
    pac = dynamic_cast<const ForwardProxyFilter&>(*filter).pacRoutes().at(0);
    // The file loads on the source's thread, then on the evaluator's.
    for (int i = 0; i < 200 && !pac->counters().have_script; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  // The routes decided for a request ("DIRECT" for ""), " > "-joined, or
  // "STATUS reason".
  static std::string str(const upstream::RouteDecider::Decision& d) {
    if (d.routes.empty()) return std::to_string(d.status) + " " + d.reason;
    std::string out;
    for (const std::string& r : d.routes)
      out += (out.empty() ? "" : " > ") + (r.empty() ? "DIRECT" : r);
    return out;
  }
  std::string decide(const RequestHead& head) {
    StreamInfo info;
    filter->onRequestHead(head, info);
    REQUIRE(info.route_decider);
    std::string out = "none";
    info.route_decider->decide(head, info, io.get_executor(),
                               [&](upstream::RouteDecider::Decision d) { out = str(d); });
    io.restart();
    io.run_for(std::chrono::seconds(5));
    return out;
  }
  // The same from decideNow(): "none" when it has no answer at hand.
  std::string decideNow(const RequestHead& head) {
    StreamInfo info;
    filter->onRequestHead(head, info);
    REQUIRE(info.route_decider);
    const std::optional<upstream::RouteDecider::Decision> d =
        info.route_decider->decideNow(head, info);
    return d ? str(*d) : "none";
  }

  h2gate::test::TempDir dir{"pacroute"};
  FilterPtr filter;
  std::shared_ptr<PacRoute> pac;
  asio::io_context io;
};

}  // namespace

TEST_CASE("pac route: the answer becomes the request's ordered routes", "[pac_route]") {
  PacEnv env(
      "function FindProxyForURL(url, host) {\n"
      "  if (host == 'list.test') return 'PROXY a.test:8080; HTTPS b.test; SOCKS5 s:1080; "
      "DIRECT';\n"
      "  if (url.indexOf('secret') >= 0) return 'PROXY saw-path.test:1';\n"
      "  if (host == 'v6.test') return 'HTTPS [2001:db8::1]:8443';\n"
      "  return 'DIRECT';\n"
      "}\n");
  REQUIRE(env.pac->counters().have_script);
  CHECK(env.decide(requestHead("list.test", 443, true)) ==
        "PROXY a.test:8080 > HTTPS b.test:443 > DIRECT");
  CHECK(env.decide(requestHead("v6.test", 443, true)) == "HTTPS [2001:db8::1]:8443");
  // https / CONNECT: no path reaches the file; http: the whole URL.
  RequestHead http = requestHead("www.test", 80, false);
  http.path = "/secret?x";
  http.target = "http://www.test/secret?x";
  CHECK(env.decide(http) == "PROXY saw-path.test:1");
  CHECK(env.decide(requestHead("www.test", 443, true)) == "DIRECT");
  const PacRoute::Counters c = env.pac->counters();
  CHECK(c.evaluations >= 3);
  CHECK(c.fallbacks == 0);
}

TEST_CASE("pac route: no usable answer takes the fallback; loops are DIRECT", "[pac_route]") {
  SECTION("a throw: the fallback cluster") {
    PacEnv env("function FindProxyForURL(url, host) { throw new Error('nope'); }\n",
               "    fallback: {cluster: corp}\n");
    CHECK(env.decide(requestHead("a.test", 443, true)) == "corp");
    CHECK(env.pac->counters().fallbacks == 1);
  }
  SECTION("an endless loop: cut off, reject 503") {
    PacEnv env("function FindProxyForURL(url, host) { while (true) {} }\n",
               "    fallback: {reject: 503}\n");
    const std::string d = env.decide(requestHead("a.test", 443, true));
    CHECK(d.starts_with("503 "));
    CHECK(env.pac->counters().timeouts == 1);
  }
  SECTION("only SOCKS: the fallback (DIRECT by default)") {
    PacEnv env("function FindProxyForURL(url, host) { return 'SOCKS5 s:1080'; }\n");
    CHECK(env.decide(requestHead("a.test", 443, true)) == "DIRECT");
  }
  SECTION("h2gate's own listener: DIRECT, the rest kept") {
    PacEnv env(
        "function FindProxyForURL(url, host) { return 'PROXY localhost:3128; PROXY b.test:1'; }\n");
    CHECK(env.decide(requestHead("a.test", 443, true)) == "DIRECT > PROXY b.test:1");
  }
  SECTION("h2gate's own listener with on_loop: reject") {
    PacEnv env("function FindProxyForURL(url, host) { return 'PROXY 127.0.0.1:3128'; }\n",
               "    on_loop: reject\n");
    CHECK(env.decide(requestHead("a.test", 443, true)).starts_with("503 "));
  }
}

TEST_CASE("pac route: a pac rule takes no cluster keys", "[pac_route]") {
  h2gate::testing::FilterEnv env("pac.yaml", {"corp"});
  const FilterPtr f = env.make(kForwardProxy,
                               "routes:\n- match: {}\n  pac: {file: /x.pac}\n  direct_fallback: "
                               "true\n");
  CHECK_FALSE(f);
  const FilterPtr g =
      env.make(kForwardProxy, "routes:\n- match: {}\n  pac: {file: /x.pac}\n  direct: true\n");
  CHECK_FALSE(g);
}

TEST_CASE("pac route: a cached answer is decided at once, as decide() decides it", "[pac_route]") {
  PacEnv env(
      "function FindProxyForURL(url, host) {\n"
      "  if (host == 'loop.test') return 'PROXY localhost:3128; PROXY b.test:1';\n"
      "  if (url.substring(0, 5) == 'http:') return 'PROXY plain.test:8080';\n"
      "  return 'HTTPS tls.test:8443; DIRECT';\n"
      "}\n");
  REQUIRE(env.pac->counters().have_script);
  // Nothing cached yet: no answer at hand, nothing evaluated for asking.
  CHECK(env.decideNow(requestHead("a.test", 443, true)) == "none");
  CHECK(env.pac->counters().evaluations == 0);
  CHECK(env.decide(requestHead("a.test", 443, true)) == "HTTPS tls.test:8443 > DIRECT");
  CHECK(env.decideNow(requestHead("a.test", 443, true)) == "HTTPS tls.test:8443 > DIRECT");
  // The cache is per scheme, host (any case) and port.
  CHECK(env.decideNow(requestHead("A.Test", 443, true)) == "HTTPS tls.test:8443 > DIRECT");
  CHECK(env.decideNow(requestHead("a.test", 8443, true)) == "none");
  RequestHead http = requestHead("a.test", 80, false);
  http.path = "/x";
  http.target = "http://a.test/x";
  CHECK(env.decideNow(http) == "none");
  CHECK(env.decide(http) == "PROXY plain.test:8080");
  CHECK(env.decideNow(http) == "PROXY plain.test:8080");
  // A loop to h2gate's own listener is recognised in a cached answer too.
  CHECK(env.decide(requestHead("loop.test", 443, true)) == "DIRECT > PROXY b.test:1");
  CHECK(env.decideNow(requestHead("loop.test", 443, true)) == "DIRECT > PROXY b.test:1");
  const PacRoute::Counters c = env.pac->counters();
  CHECK(c.evaluations == 3);
  CHECK(c.cache_hits == 4);
}
