#include "filters/pac_routing.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <map>

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

TEST_CASE("pac route: the answer becomes the request's ordered routes", "[filters][pac_routing]") {
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

TEST_CASE("pac route: no usable answer takes the fallback; loops are DIRECT",
          "[filters][pac_routing]") {
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

TEST_CASE("pac route: a pac rule takes no cluster keys", "[filters][pac_routing]") {
  h2gate::testing::FilterEnv env("pac.yaml", {"corp"});
  const FilterPtr f = env.make(kForwardProxy,
                               "routes:\n- match: {}\n  pac: {file: /x.pac}\n  direct_fallback: "
                               "true\n");
  CHECK_FALSE(f);
  const FilterPtr g =
      env.make(kForwardProxy, "routes:\n- match: {}\n  pac: {file: /x.pac}\n  direct: true\n");
  CHECK_FALSE(g);
}

TEST_CASE("pac route: a cached answer is decided at once, as decide() decides it",
          "[filters][pac_routing]") {
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

TEST_CASE("pac route: two http URLs of one host are routed by their own answers",
          "[filters][pac_routing][pac_per_url]") {
  PacEnv env(
      "function FindProxyForURL(url, host) {\n"
      "  if (shExpMatch(url, 'http://*/*.iso')) return 'PROXY iso.test:3128';\n"
      "  if (shExpMatch(url, '*/downloads/*')) return 'PROXY dl.test:3128';\n"
      "  return 'DIRECT';\n"
      "}\n");
  REQUIRE(env.pac->counters().have_script);
  auto http = [](const std::string& path) {
    RequestHead h = requestHead("files.test", 80, false);
    h.path = path;
    h.target = "http://files.test" + path;
    return h;
  };
  CHECK(env.decide(http("/debian.iso")) == "PROXY iso.test:3128");
  CHECK(env.decide(http("/index.html")) == "DIRECT");
  CHECK(env.decide(http("/downloads/tool.tgz")) == "PROXY dl.test:3128");
  // Each at once from the cache, still its own.
  CHECK(env.decideNow(http("/debian.iso")) == "PROXY iso.test:3128");
  CHECK(env.decideNow(http("/index.html")) == "DIRECT");
  CHECK(env.decideNow(http("/downloads/tool.tgz")) == "PROXY dl.test:3128");
  CHECK(env.decideNow(http("/other.iso")) == "none");
  // A tunnel's URL has no path: one answer per host and port.
  CHECK(env.decide(requestHead("files.test", 443, true)) == "DIRECT");
  CHECK(env.decideNow(requestHead("files.test", 443, true)) == "DIRECT");
  CHECK(env.pac->counters().evaluations == 4);
}

TEST_CASE("pac route: a loop is h2gate's own address however the PAC file spells it",
          "[filters][pac_routing][pac_loop]") {
  // The listener is 127.0.0.1:3128. Each host gets the answer its name says.
  const std::vector<std::pair<std::string, std::string>> loops{
      {"plain", "PROXY 127.0.0.1:3128"},           {"short", "PROXY 127.1:3128"},
      {"decimal", "PROXY 2130706433:3128"},        {"hex", "PROXY 0x7f000001:3128"},
      {"octal", "PROXY 0177.0.0.1:3128"},          {"mapped", "PROXY [::ffff:127.0.0.1]:3128"},
      {"mappedhex", "HTTPS [::ffff:7f00:1]:3128"}, {"localhost", "PROXY localhost:3128"},
      {"localhostdot", "PROXY LocalHost.:3128"},   {"sublocalhost", "PROXY gate.localhost:3128"},
      {"unspecified", "PROXY 0.0.0.0:3128"},       {"trailingdot", "PROXY 127.0.0.1.:3128"},
      {"name", "PROXY self.corp.test:3128"},
  };
  const std::vector<std::pair<std::string, std::string>> others{
      {"otherport", "PROXY 127.1:3129"},
      {"otheraddress", "PROXY 127.0.0.2:3128"},
      {"v6loopback", "PROXY [::1]:3128"},
      {"othername", "PROXY proxy.corp.test:3128"},
      {"unresolvable", "PROXY nowhere.corp.test:3128"},
  };
  std::string pac = "var answers = {\n";
  for (const auto& list : {loops, others})
    for (const auto& [host, answer] : list) pac += "  '" + host + ".test': '" + answer + "',\n";
  pac += "};\nfunction FindProxyForURL(url, host) { return answers[host] + '; PROXY b.test:1'; }\n";
  PacEnv env(pac, "    on_loop: reject\n");
  REQUIRE(env.pac->counters().have_script);
  // Names resolve as the test says, and are counted.
  std::map<std::string, int> lookups;
  env.pac->setNameLookup([&lookups](const std::string& host, asio::any_io_executor ex,
                                    std::function<void(std::vector<asio::ip::address>)> done) {
    ++lookups[host];
    std::vector<asio::ip::address> a;
    if (host == "self.corp.test")
      a = {asio::ip::make_address("10.9.9.9"), asio::ip::make_address("127.0.0.1")};
    if (host == "proxy.corp.test") a = {asio::ip::make_address("10.1.1.1")};
    asio::post(ex, [done = std::move(done), a] { done(a); });
  });
  for (const auto& [host, answer] : loops) {
    INFO(host << ": " << answer);
    const std::string d = env.decide(requestHead(host + ".test", 443, true));
    CHECK(d.starts_with("503 "));
    CHECK_THAT(d, Catch::Contains("names h2gate itself"));
    CHECK(env.decideNow(requestHead(host + ".test", 443, true)) == d);
  }
  for (const auto& [host, answer] : others) {
    INFO(host << ": " << answer);
    const std::string d = env.decide(requestHead(host + ".test", 443, true));
    CHECK(d == answer + " > PROXY b.test:1");
    CHECK(env.decideNow(requestHead(host + ".test", 443, true)) == d);
  }
  // Names are looked up once, before their first decision, and only those
  // on the listener's port.
  CHECK(lookups["self.corp.test"] == 1);
  CHECK(lookups["proxy.corp.test"] == 1);
  CHECK(lookups["nowhere.corp.test"] == 1);
  CHECK(lookups["b.test"] == 0);
  CHECK(lookups.size() == 4);
}

TEST_CASE("pac route: a loop by a resolved name with on_loop: direct keeps the rest",
          "[filters][pac_routing][pac_loop]") {
  PacEnv env(
      "function FindProxyForURL(url, host) { return 'PROXY gate.corp.test:3128; PROXY "
      "b.test:1'; }\n");
  env.pac->setNameLookup([](const std::string&, asio::any_io_executor ex,
                            std::function<void(std::vector<asio::ip::address>)> done) {
    asio::post(ex,
               [done = std::move(done)] { done({asio::ip::make_address("::ffff:127.0.0.1")}); });
  });
  CHECK(env.decide(requestHead("a.test", 443, true)) == "DIRECT > PROXY b.test:1");
  CHECK(env.decideNow(requestHead("a.test", 443, true)) == "DIRECT > PROXY b.test:1");
}

TEST_CASE("pac route: which proxies the PAC file names get the credentials",
          "[filters][pac_routing][pac_auth]") {
  const std::string pac =
      "function FindProxyForURL(url, host) {\n"
      "  return 'PROXY 127.0.0.1:8080; HTTPS LocalHost:8443; DIRECT';\n"
      "}\n";
  // authenticate_to: [localhost]: 127.0.0.1 is another host.
  PacEnv env(pac,
             "    proxies:\n"
             "      proxy_authentication: {scheme: negotiate}\n"
             "      authenticate_to: [localhost]\n");
  CHECK(env.pac->mayAuthenticate("HTTPS localhost:8443", "localhost", false).empty());
  CHECK(env.pac->mayAuthenticate("PROXY 127.0.0.1:8080", "127.0.0.1", false) ==
        "not in authenticate_to [localhost]");
  // The template the router makes pools from asks the same.
  const auto tmpl = env.pac->proxies();
  REQUIRE(tmpl->may_authenticate);
  CHECK(tmpl->may_authenticate("PROXY 127.0.0.1:8080", "127.0.0.1") ==
        "not in authenticate_to [localhost]");
  CHECK(tmpl->may_authenticate("HTTPS localhost:8443", "localhost").empty());
  REQUIRE(tmpl->cluster.authentication);

  // /pac/eval's answer says it for each proxy of the answer.
  std::string text;
  env.pac->explain("http://web.example/", env.io.get_executor(),
                   [&](int, std::string t) { text = std::move(t); });
  env.io.restart();
  env.io.run_for(std::chrono::seconds(5));
  INFO(text);
  CHECK(text.find("credentials for PROXY 127.0.0.1:8080: none, not in authenticate_to "
                  "[localhost]\n") != std::string::npos);
  CHECK(text.find("credentials for HTTPS localhost:8443: negotiate\n") != std::string::npos);

  // A file on h2gate's own disk: every proxy by default.
  PacEnv file(pac, "    proxies:\n      proxy_authentication: {scheme: auto}\n");
  CHECK(file.pac->mayAuthenticate("PROXY 127.0.0.1:8080", "127.0.0.1", false).empty());
  // No proxy_authentication: nothing to refuse, and /pac/eval says there is none.
  PacEnv none(pac);
  CHECK(none.pac->mayAuthenticate("PROXY 127.0.0.1:8080", "127.0.0.1", false).empty());
  none.pac->explain("http://web.example/", none.io.get_executor(),
                    [&](int, std::string t) { text = std::move(t); });
  none.io.restart();
  none.io.run_for(std::chrono::seconds(5));
  CHECK(text.find("credentials for PROXY 127.0.0.1:8080: none (pac.proxies has no "
                  "proxy_authentication)") != std::string::npos);
}
