// The proposed `pac` block of a forward_proxy route: what it reads and the
// errors it gives, with file, line, column and field.
#include "filters/pac_routing_config.h"

#include <catch2/catch.hpp>

#include "filter_env.h"
#include "gateway/base/keyring.h"
#include "tests/support/config_util.h"

using namespace h2gate;
using namespace h2gate::filters;
using h2gate::testing::allProblems;
using namespace std::chrono_literals;

namespace {

struct PacRoutingEnv : h2gate::testing::FilterEnv {
  PacRoutingEnv() : FilterEnv("p.yaml", {"corp"}) {}
  std::optional<PacRouteConfig> parse(const std::string& yaml) {
    config::NodeReader r(YAML::Load(yaml), "routes[0].pac", diag);
    return parsePacRoute(r, FactoryContext{bootstrap, listener}, "routes[0]");
  }
  std::string problems() const { return allProblems(diag.problems()); }
};

}  // namespace

TEST_CASE("pac route config: sources and defaults", "[filters][pac_routing_config]") {
  PacRoutingEnv e;
  auto c = e.parse("url: http://wpad.corp.example/proxy.pac");
  REQUIRE(c);
  CHECK(c->source.kind == pac::PacSourceConfig::Kind::Url);
  CHECK(c->source.location == "http://wpad.corp.example/proxy.pac");
  CHECK(c->source.name == "routes[0]");
  CHECK(c->source.refresh_interval == 600s);
  CHECK(c->source.retry_interval == 30s);
  CHECK(c->source.fetch.timeout == 10s);
  CHECK(c->evaluation.timeout == 2s);
  CHECK(c->dns_timeout == 1s);
  CHECK(c->memory_limit == 32u << 20);
  CHECK(c->fallback.kind == PacRouteConfig::Fallback::Kind::Direct);
  CHECK(c->on_loop == PacRouteConfig::OnLoop::Direct);

  c = e.parse("file: /etc/h2gate/proxy.pac\nrefresh_interval: 0s");
  REQUIRE(c);
  CHECK(c->source.kind == pac::PacSourceConfig::Kind::File);
  CHECK(c->source.refresh_interval == 0s);
  c = e.parse("wpad: true");
  REQUIRE(c);
  CHECK(c->source.kind == pac::PacSourceConfig::Kind::Wpad);
  c = e.parse("system: true");
  REQUIRE(c);
  CHECK(c->source.kind == pac::PacSourceConfig::Kind::System);
  CHECK(e.problems().empty());
}

TEST_CASE("pac route config: every setting", "[filters][pac_routing_config]") {
  PacRoutingEnv e;
  auto c = e.parse(R"(url: https://pac.corp.example/p.pac
refresh_interval: 5m
retry_interval: 10s
fetch_timeout: 3s
max_size: 65536
trusted_ca: /etc/ssl/corp.pem
evaluation:
  timeout: 500ms
  dns_timeout: 200ms
  memory_limit: 16777216
  threads: 4
  cache_entries: 0
  cache_bytes: 1048576
  cache_ttl: 5s
fallback: {cluster: corp}
on_loop: reject
)");
  INFO(e.problems());
  REQUIRE(c);
  CHECK(c->source.refresh_interval == 300s);
  CHECK(c->source.retry_interval == 10s);
  CHECK(c->source.fetch.timeout == 3s);
  CHECK(c->source.fetch.max_bytes == 65536);
  CHECK(c->source.fetch.trusted_ca == "/etc/ssl/corp.pem");
  CHECK(c->evaluation.timeout == 500ms);
  CHECK(c->dns_timeout == 200ms);
  CHECK(c->memory_limit == 16u << 20);
  CHECK(c->evaluation.threads == 4);
  CHECK(c->evaluation.cache_entries == 0);
  CHECK(c->evaluation.cache_bytes == 1048576);
  CHECK(c->evaluation.cache_ttl == 5s);
  CHECK(c->fallback.kind == PacRouteConfig::Fallback::Kind::Cluster);
  CHECK(c->fallback.cluster == "corp");
  CHECK(c->on_loop == PacRouteConfig::OnLoop::Reject);
  c = e.parse("wpad: true\nfallback: {reject: 503}");
  REQUIRE(c);
  CHECK(c->fallback.kind == PacRouteConfig::Fallback::Kind::Reject);
  CHECK(c->fallback.status == 503);
}

TEST_CASE("pac route config: errors name file, line, column and field",
          "[filters][pac_routing_config]") {
  PacRoutingEnv e;
  CHECK_FALSE(e.parse("refresh_interval: 5m"));
  CHECK(e.problems() ==
        "p.yaml:1:1: routes[0].pac: needs where the PAC file comes from: one of url, file, "
        "wpad: true or system: true\n");

  PacRoutingEnv e2;
  CHECK_FALSE(e2.parse(R"(url: ftp://x/p.pac
file: /x
)"));
  CHECK(e2.problems() ==
        "p.yaml:1:1: routes[0].pac: takes only one of url, file, wpad and system\n");

  PacRoutingEnv e3;
  CHECK_FALSE(e3.parse(R"(url: ftp://x/p.pac
refresh_interval: 500ms
fetch_timeout: 1h
max_size: 10
trusted_ca: /ca.pem
evaluation:
  timeout: 1s
  dns_timeout: 5s
  threads: 0
  colour: blue
fallback: {cluster: nope, direct: true}
on_loop: maybe
)"));
  CHECK(e3.problems() ==
        "p.yaml:1:6: routes[0].pac.url: 'ftp://x/p.pac' is not an http:// or https:// URL\n"
        "p.yaml:2:19: routes[0].pac.refresh_interval: must be 0s (never) or at least 1s\n"
        "p.yaml:3:16: routes[0].pac.fetch_timeout: must be between 100 ms and 300 s\n"
        "p.yaml:4:11: routes[0].pac.max_size: must be in 1024..268435456, got 10\n"
        "p.yaml:5:13: routes[0].pac.trusted_ca: applies only to an https:// url\n"
        "p.yaml:10:3: routes[0].pac.evaluation.colour: unknown field (expected one of: timeout, "
        "dns_timeout, memory_limit, threads, cache_entries, cache_bytes, cache_ttl)\n"
        "p.yaml:9:12: routes[0].pac.evaluation.threads: must be in 1..64, got 0\n"
        "p.yaml:8:16: routes[0].pac.evaluation.dns_timeout: is longer than timeout (1000 ms), "
        "which bounds every evaluation with its DNS calls\n"
        "p.yaml:11:11: routes[0].pac.fallback: takes only one of direct, cluster and reject\n"
        "p.yaml:12:10: routes[0].pac.on_loop: expected one of direct, reject, got 'maybe'\n");

  PacRoutingEnv e4;
  CHECK_FALSE(e4.parse("wpad: false\nfallback: {cluster: nope}\n"));
  CHECK(e4.problems() ==
        "p.yaml:1:7: routes[0].pac.wpad: takes only true (leave it out, or choose url or file)\n"
        "p.yaml:2:21: routes[0].pac.fallback.cluster: unknown cluster 'nope' (known: corp)\n");
}

TEST_CASE("pac route config: proxy_authentication and authenticate_to",
          "[filters][pac_routing_config][pac_auth]") {
  PacRoutingEnv e;
  auto c = e.parse(R"(wpad: true
proxies:
  proxy_authentication:
    scheme: negotiate
    spn: HTTP@proxy.corp.example
    principal: alice@CORP.EXAMPLE
  authenticate_to: [Proxy.Corp.Example., .branch.example, 10.0.0.1, "[2001:db8::1]", "2001:DB8::2"]
)");
  INFO(e.problems());
  REQUIRE(c);
  REQUIRE(c->proxies.cluster.authentication);
  CHECK(c->proxies.cluster.authentication->scheme ==
        config::ProxyAuthentication::Scheme::Negotiate);
  CHECK(c->proxies.cluster.authentication->spn == "HTTP@proxy.corp.example");
  CHECK(c->proxies.cluster.authentication->principal == "alice@CORP.EXAMPLE");
  CHECK_FALSE(c->proxies.cluster.credentials);
  REQUIRE(c->proxies.authenticate_to);
  CHECK(c->proxies.authenticate_to->str() ==
        "[proxy.corp.example, .branch.example, 10.0.0.1, 2001:db8::1, 2001:db8::2]");

  // The credentials, as a cluster's; no authenticate_to: the default.
  c = e.parse(R"(url: http://wpad.corp.example/proxy.pac
proxies:
  proxy_authentication:
    scheme: ntlm
    credentials: {username: 'CORP\alice', password: s3cret}
)");
  REQUIRE(c);
  CHECK(c->proxies.cluster.authentication->scheme == config::ProxyAuthentication::Scheme::Ntlm);
  REQUIRE(c->proxies.cluster.credentials);
  CHECK(c->proxies.cluster.credentials->username == "CORP\\alice");
  CHECK(c->proxies.cluster.credentials->password == "s3cret");
  CHECK_FALSE(c->proxies.authenticate_to);

  // [] is none; "*" every proxy.
  c = e.parse(R"(file: /x.pac
proxies:
  proxy_authentication: {scheme: auto}
  authenticate_to: []
)");
  REQUIRE(c);
  REQUIRE(c->proxies.authenticate_to);
  CHECK(c->proxies.authenticate_to->str() == "[]");
  CHECK_FALSE(c->proxies.authenticate_to->allows("localhost"));
  CHECK(e.problems().empty());

  // Without proxy_authentication: nothing to send.
  c = e.parse("file: /x.pac\nproxies: {max_proxies: 3}\n");
  REQUIRE(c);
  CHECK_FALSE(c->proxies.cluster.authentication);
  CHECK_FALSE(c->proxies.cluster.credentials);
}

TEST_CASE("pac route config: the proxies' credentials from the keyring",
          "[filters][pac_routing_config][pac_auth][keyring]") {
  // The keyring as config's parser sees it (gateway/base/keyring.h): "corp"
  // holds CORP\alice and a password, any other name is absent.
  keyring::setLookupForTesting([](const std::string& name, keyring::Entry* out, std::string*) {
    if (name != "corp") return keyring::Status::NotFound;
    out->username = "CORP\\alice";
    out->password = "kr-pw";
    return keyring::Status::Ok;
  });
  struct Restore {
    ~Restore() { keyring::setLookupForTesting({}); }
  } restore;
  PacRoutingEnv e;
  auto c = e.parse(R"(file: /x.pac
proxies:
  proxy_authentication:
    scheme: ntlm
    credentials: {keyring: corp}
)");
  INFO(e.problems());
  REQUIRE(c);
  REQUIRE(c->proxies.cluster.credentials);
  CHECK(c->proxies.cluster.credentials->username == "CORP\\alice");
  CHECK(c->proxies.cluster.credentials->password == "kr-pw");
  CHECK(c->proxies.cluster.credentials->keyring == "corp");

  PacRoutingEnv bad;
  c = bad.parse(R"(file: /x.pac
proxies:
  proxy_authentication:
    scheme: basic
    credentials: {keyring: other}
)");
  CHECK(bad.problems().find("p.yaml:5:28: routes[0].pac.proxies.proxy_authentication.credentials."
                            "keyring: no entry 'other' in ") != std::string::npos);
}

TEST_CASE("pac route config: proxy_authentication errors name file, line, column and field",
          "[filters][pac_routing_config][pac_auth]") {
  PacRoutingEnv e;
  CHECK_FALSE(e.parse(R"(url: http://wpad.corp.example/proxy.pac
proxies:
  proxy_authentication:
    scheme: kerberos
    spn: HTTP/proxy.corp.example@CORP
    colour: blue
  authenticate_to: [proxy.corp.example, "*.corp.example", "proxy:3128", {a: b}, "", ".", "bad host"]
)"));
  CHECK(e.problems() ==
        "p.yaml:6:5: routes[0].pac.proxies.proxy_authentication.colour: unknown field (expected "
        "one of: scheme, spn, client_keytab, principal, credentials)\n"
        "p.yaml:4:13: routes[0].pac.proxies.proxy_authentication.scheme: expected one of auto, "
        "negotiate, ntlm, basic, got 'kerberos'\n"
        "p.yaml:5:10: routes[0].pac.proxies.proxy_authentication.spn: expected GSSAPI's "
        "SERVICE@HOST form, e.g. HTTP@proxy.example.com (not a Kerberos principal name like "
        "HTTP/proxy.example.com@REALM)\n"
        "p.yaml:7:41: routes[0].pac.proxies.authenticate_to[1]: '*.corp.example': only \"*\" "
        "alone is a wildcard; for a domain and every host under it write .example.com\n"
        "p.yaml:7:59: routes[0].pac.proxies.authenticate_to[2]: 'proxy:3128' is not a host: "
        "write the host without a port\n"
        "p.yaml:7:73: routes[0].pac.proxies.authenticate_to[3]: expected a host name, .domain, "
        "an IP address or \"*\"\n"
        "p.yaml:7:81: routes[0].pac.proxies.authenticate_to[4]: an empty entry (for none at all, "
        "write authenticate_to: [])\n"
        "p.yaml:7:85: routes[0].pac.proxies.authenticate_to[5]: '.' is not a .domain (empty host "
        "name)\n"
        "p.yaml:7:90: routes[0].pac.proxies.authenticate_to[6]: 'bad host' is not a host name or "
        "an IP address\n");

  PacRoutingEnv e2;
  CHECK_FALSE(e2.parse(R"(file: /x.pac
proxies:
  authenticate_to: [localhost]
  proxy_authentication:
    scheme: basic
)"));
  CHECK(e2.problems() ==
        "p.yaml:5:5: routes[0].pac.proxies.proxy_authentication: scheme basic needs credentials "
        "(a username and a password)\n");

  PacRoutingEnv e3;
  CHECK_FALSE(e3.parse("file: /x.pac\nproxies:\n  authenticate_to: [localhost]\n"));
  CHECK(e3.problems() ==
        "p.yaml:3:20: routes[0].pac.proxies.authenticate_to: says which proxies get "
        "proxy_authentication's credentials, but there is no proxy_authentication\n");

  PacRoutingEnv e4;
  CHECK_FALSE(e4.parse(R"(file: /x.pac
proxies:
  proxy_authentication:
    scheme: negotiate
    credentials: {username: alice}
  authenticate_to: localhost
)"));
  CHECK(e4.problems() ==
        "p.yaml:5:18: routes[0].pac.proxies.proxy_authentication.credentials.password: missing "
        "required field\n"
        "p.yaml:6:20: routes[0].pac.proxies.authenticate_to: expected a list\n");
}

TEST_CASE("authenticate_to: exact names, .domains, IP addresses, \"*\" and []",
          "[filters][pac_routing_config][pac_auth]") {
  AuthenticateTo to;
  for (const char* entry : {"Proxy.Corp.Example.", ".branch.example", "10.0.0.1", "[2001:db8::1]"})
    REQUIRE(to.add(entry).empty());
  // Exact: case and one trailing dot do not matter; a host under it is not it.
  CHECK(to.allows("proxy.corp.example"));
  CHECK(to.allows("PROXY.corp.EXAMPLE."));
  CHECK_FALSE(to.allows("x.proxy.corp.example"));
  CHECK_FALSE(to.allows("corp.example"));
  // .domain: the domain itself and every host under it, nothing else.
  CHECK(to.allows("branch.example"));
  CHECK(to.allows("proxy.branch.example"));
  CHECK(to.allows("a.b.Branch.Example."));
  CHECK_FALSE(to.allows("xbranch.example"));
  CHECK_FALSE(to.allows("branch.example.evil.test"));
  // IP addresses: that address, in any notation; no other.
  CHECK(to.allows("10.0.0.1"));
  CHECK(to.allows("10.0.0.01"));
  CHECK(to.allows("167772161"));
  CHECK_FALSE(to.allows("10.0.0.2"));
  CHECK(to.allows("2001:db8::1"));
  CHECK(to.allows("2001:0db8:0:0::1"));
  CHECK_FALSE(to.allows("2001:db8::2"));
  CHECK_FALSE(to.allows(""));
  CHECK_FALSE(to.allows("localhost"));

  AuthenticateTo none;
  CHECK(none.str() == "[]");
  CHECK_FALSE(none.allows("localhost"));
  CHECK_FALSE(none.allows("127.0.0.1"));

  const AuthenticateTo every = AuthenticateTo::everyProxy();
  CHECK(every.str() == "[*]");
  CHECK(every.allows("anything.example"));
  CHECK(every.allows("192.0.2.7"));
  CHECK(every.allows("::1"));
}

TEST_CASE("authenticate_to: the default is the PAC file's own domain",
          "[filters][pac_routing_config][pac_auth]") {
  using Kind = pac::PacSourceConfig::Kind;
  auto source = [](Kind kind, std::string location = {}) {
    pac::PacSourceConfig s;
    s.kind = kind;
    s.location = std::move(location);
    return s;
  };
  std::string from;
  auto fromUrl = [&](const std::string& url) {
    return defaultAuthenticateTo(source(Kind::Url, url), nullptr, &from).str();
  };
  // url: three labels or more, the host without its first; fewer, the host.
  CHECK(fromUrl("http://wpad.corp.example.com/proxy.pac") == "[.corp.example.com]");
  CHECK(from == "the domain of http://wpad.corp.example.com/proxy.pac");
  CHECK(fromUrl("https://PAC.Corp.Example./p.pac") == "[.corp.example]");
  CHECK(fromUrl("http://pac.example:8080/p.pac") == "[pac.example]");
  CHECK(fromUrl("http://localhost/p.pac") == "[localhost]");
  CHECK(fromUrl("http://127.0.0.1:8080/p.pac") == "[127.0.0.1]");
  CHECK(fromUrl("http://[::1]:8080/p.pac") == "[::1]");
  const AuthenticateTo corp = defaultAuthenticateTo(
      source(Kind::Url, "http://wpad.corp.example.com/proxy.pac"), nullptr, &from);
  CHECK(corp.allows("corp.example.com"));
  CHECK(corp.allows("proxy.corp.example.com"));
  CHECK(corp.allows("wpad.corp.example.com"));
  CHECK_FALSE(corp.allows("example.com"));
  CHECK_FALSE(corp.allows("proxy.evil.example"));
  CHECK_FALSE(corp.allows("10.1.2.3"));

  // file: every proxy (the operator's own disk).
  CHECK(defaultAuthenticateTo(source(Kind::File, "/etc/h2gate/proxy.pac"), nullptr, &from).str() ==
        "[*]");

  // wpad: the URL that found the file in use; none before there is one.
  CHECK(defaultAuthenticateTo(source(Kind::Wpad), nullptr, &from).str() == "[]");
  auto script = pac::makeScript("function FindProxyForURL(u, h) { return 'DIRECT'; }",
                                "http://wpad.branch.corp.example/wpad.dat (WPAD)");
  script->url = "http://wpad.branch.corp.example/wpad.dat";
  CHECK(defaultAuthenticateTo(source(Kind::Wpad), script.get(), &from).str() ==
        "[.branch.corp.example]");
  CHECK(from == "the domain of http://wpad.branch.corp.example/wpad.dat");

  // system: its PAC URL (or the WPAD URL its automatic detection found)...
  CHECK(defaultAuthenticateTo(source(Kind::System), script.get(), &from).str() ==
        "[.branch.corp.example]");
  // ... or, for manual settings, the proxies they name.
  auto manual = pac::makeScript("function FindProxyForURL(u, h) { return 'DIRECT'; }",
                                "system: environment: manual settings");
  manual->manual_proxies = {"PROXY Proxy.Corp.Example:3128", "HTTPS [2001:db8::5]:443"};
  const AuthenticateTo m = defaultAuthenticateTo(source(Kind::System), manual.get(), &from);
  CHECK(m.str() == "[proxy.corp.example, 2001:db8::5]");
  CHECK(from == "the proxies of the system's manual settings");
  CHECK(m.allows("proxy.corp.example"));
  CHECK_FALSE(m.allows("other.corp.example"));
  // "no proxy": nothing to allow.
  auto direct = pac::makeScript("function FindProxyForURL(u, h) { return 'DIRECT'; }",
                                "system: environment: no proxy");
  CHECK(defaultAuthenticateTo(source(Kind::System), direct.get(), &from).str() == "[]");
}
