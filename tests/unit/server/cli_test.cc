#include "gateway/server/cli.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>

#include <catch2/catch.hpp>

#include "config/dump.h"
#include "filters/forward_proxy.h"
#include "filters/pac_routing.h"
#include "filters/registry.h"
#include "gateway/base/keyring.h"
#include "tests/support/config_util.h"
#include "tests/support/temp_dir.h"

using namespace h2gate;
using namespace h2gate::cli;
using h2gate::testing::allProblems;

namespace {

ParseResult run(std::initializer_list<const char*> args) {
  std::vector<const char*> argv{"h2gate"};
  argv.insert(argv.end(), args.begin(), args.end());
  return parse(static_cast<int>(argv.size()), argv.data());
}

std::string errorsOf(const ParseResult& r) {
  std::string out;
  for (const auto& e : r.errors) out += e + "\n";
  return out;
}

const config::FilterConfig& forwardProxy(const config::Bootstrap& b, std::size_t listener = 0) {
  return b.listeners.at(listener).filters.back();
}

std::string routedCluster(const config::Bootstrap& b, std::size_t listener = 0) {
  const YAML::Node& t = forwardProxy(b, listener).typed_config;
  return t.IsMap() && t["cluster"] ? t["cluster"].as<std::string>() : "";
}

}  // namespace

TEST_CASE("no flags: the default", "[cli]") {
  const ParseResult p = run({});
  REQUIRE(p.ok());
  CHECK_FALSE(p.options.help);
  CHECK(p.options.config_path.empty());
  const config::LoadResult r = buildBootstrap(p.options, std::nullopt);
  INFO(allProblems(r.problems));
  REQUIRE(r.ok());
  CHECK(r.bootstrap.listeners.at(0).address.address == "127.0.0.1");
  CHECK(r.bootstrap.listeners.at(0).additional_addresses.size() == 1);
  CHECK(r.bootstrap.clusters.empty());
  CHECK(routedCluster(r.bootstrap).empty());
}

TEST_CASE("every flag parses, in both spellings", "[cli]") {
  const ParseResult a = run({"--help", "--version", "-c", "x.yaml", "--validate", "--listen",
                             "127.0.0.1:8080", "--admin=[::1]:9902", "--upstream",
                             "https://p.example", "--upstream=http://q.example:3128", "--cacert",
                             "/ca.pem", "--insecure", "--concurrency=4", "--log-level", "debug"});
  INFO(errorsOf(a));
  REQUIRE(a.ok());
  const Options& o = a.options;
  CHECK(o.help);
  CHECK(o.version);
  CHECK(o.validate);
  CHECK(o.config_path == "x.yaml");
  CHECK(o.listen == "127.0.0.1:8080");
  CHECK(o.admin == "[::1]:9902");
  CHECK(o.upstreams == std::vector<std::string>{"https://p.example", "http://q.example:3128"});
  CHECK(o.cacert == "/ca.pem");
  CHECK(o.insecure);
  CHECK(o.concurrency == 4u);
  CHECK(o.log_level == "debug");

  const ParseResult b =
      run({"-h", "-V", "--config=y.yaml", "--listen=[::1]:1", "--admin", "127.0.0.1:0",
           "--cacert=/c", "--concurrency", "1024", "--log-level=error"});
  INFO(errorsOf(b));
  REQUIRE(b.ok());
  CHECK(b.options.help);
  CHECK(b.options.version);
  CHECK(b.options.config_path == "y.yaml");
  CHECK(b.options.listen == "[::1]:1");
  CHECK(b.options.admin == "127.0.0.1:0");
  CHECK(b.options.cacert == "/c");
  CHECK(b.options.concurrency == 1024u);
  CHECK(b.options.log_level == "error");
  for (const char* level : {"trace", "debug", "info", "warn", "error"}) {
    CHECK(run({"--log-level", level}).ok());
  }
}

TEST_CASE("bad flags are friendly errors", "[cli]") {
  CHECK(errorsOf(run({"--bogus"})) == "unknown flag '--bogus' (see --help)\n");
  CHECK(errorsOf(run({"--bogus=1"})) == "unknown flag '--bogus' (see --help)\n");
  CHECK(errorsOf(run({"stray"})) == "unexpected argument 'stray' (see --help)\n");
  CHECK(errorsOf(run({"--listen"})) == "--listen: missing value\n");
  CHECK(errorsOf(run({"--listen", "--insecure"})) == "--listen: missing value\n");
  CHECK(errorsOf(run({"-c"})) == "-c: missing value\n");
  CHECK(errorsOf(run({"--config="})) == "--config: missing value\n");
  CHECK(errorsOf(run({"--insecure=yes"})) == "--insecure: takes no value\n");
  CHECK(errorsOf(run({"--validate"})) ==
        "--validate needs -c FILE (the built-in default is always valid)\n");
  CHECK(errorsOf(run({"--concurrency", "0"})) ==
        "--concurrency: expected a number from 1 to 1024, got '0'\n");
  CHECK(errorsOf(run({"--concurrency=lots"})) ==
        "--concurrency: expected a number from 1 to 1024, got 'lots'\n");
  CHECK(errorsOf(run({"--concurrency=99999999999999"})) ==
        "--concurrency: expected a number from 1 to 1024, got '99999999999999'\n");
  CHECK(errorsOf(run({"--log-level", "loud"})) ==
        "--log-level: expected one of trace, debug, info, warn, error, got 'loud'\n");
  CHECK(errorsOf(run({"--listen", "3128"})) ==
        "--listen: expected HOST:PORT or [IPv6]:PORT, got '3128'\n");
  CHECK(errorsOf(run({"--listen", "example.com:3128"})) ==
        "--listen: 'example.com' is not an IP address (use e.g. 127.0.0.1:3128 or [::1]:3128)\n");
  CHECK(errorsOf(run({"--admin", "::1:9901"})) ==
        "--admin: put IPv6 addresses in brackets, e.g. [::1]:3128 (got '::1:9901')\n");
  CHECK(errorsOf(run({"--listen", "127.0.0.1:65536"})) ==
        "--listen: invalid port in '127.0.0.1:65536' (expected 0-65535)\n");
  CHECK(errorsOf(run({"--listen", ":3128"})) == "--listen: missing host in ':3128'\n");
  CHECK(errorsOf(run({"--upstream", "proxy.example:443"})) ==
        "--upstream: not a URL (expected https://[user:pass@]HOST[:PORT])\n");
  // Several problems: all reported.
  CHECK(run({"--bogus", "--listen", "x", "--concurrency", "0"}).errors.size() == 3);
}

TEST_CASE("parseHostPort", "[cli]") {
  config::SocketAddress a;
  CHECK(parseHostPort("127.0.0.1:3128", &a) == "");
  CHECK(a.address == "127.0.0.1");
  CHECK(a.port_value == 3128);
  CHECK(parseHostPort("[::1]:8080", &a) == "");
  CHECK(a.address == "::1");
  CHECK(a.port_value == 8080);
  CHECK(parseHostPort("localhost:0", &a) == "");
  CHECK(a.address == "localhost");
  CHECK(a.port_value == 0);
  CHECK(parseHostPort("[::1]", &a) == "expected HOST:PORT or [IPv6]:PORT, got '[::1]'");
  CHECK(parseHostPort("[1.2.3.4]:80", &a) == "'1.2.3.4' in brackets is not an IPv6 address");
  CHECK(parseHostPort("h:-1", &a) == "invalid port in 'h:-1' (expected 0-65535)");
  CHECK(parseHostPort("h:", &a) == "invalid port in 'h:' (expected 0-65535)");
}

TEST_CASE("--listen and --admin", "[cli]") {
  const ParseResult p = run({"--listen", "localhost:8080", "--admin", "[::1]:9902"});
  REQUIRE(p.ok());
  const config::LoadResult r = buildBootstrap(p.options, std::nullopt);
  INFO(allProblems(r.problems));
  REQUIRE(r.ok());
  const config::Listener& l = r.bootstrap.listeners.at(0);
  CHECK(l.address.address == "127.0.0.1");  // localhost maps to loopback, no DNS
  CHECK(l.address.port_value == 8080);
  CHECK(l.additional_addresses.empty());
  CHECK(r.bootstrap.admin.address.address == "::1");
  CHECK(r.bootstrap.admin.address.port_value == 9902);
  CHECK(r.bootstrap.source == "<flags>");

  const ParseResult v6 = run({"--listen", "[::1]:8080"});
  const config::LoadResult r6 = buildBootstrap(v6.options, std::nullopt);
  REQUIRE(r6.ok());
  CHECK(r6.bootstrap.listeners.at(0).address.address == "::1");

  // The admin interface and the listener on one address: caught by validate().
  const ParseResult clash = run({"--listen", "127.0.0.1:9901"});
  CHECK(allProblems(buildBootstrap(clash.options, std::nullopt).problems) ==
        "<flags>: static_resources.listeners[0].address: address 127.0.0.1:9901 is already used "
        "by the admin interface\n");
}

TEST_CASE("parseUpstreamUrl", "[cli]") {
  config::Cluster c;
  SECTION("https with credentials, percent-decoded") {
    REQUIRE(parseUpstreamUrl("https://al%20ice:p%40ss%3Aw%2Frd@proxy.example.net:8443/", &c) == "");
    REQUIRE(c.endpoints.size() == 1);
    CHECK(c.endpoints[0].address == "proxy.example.net");
    CHECK(c.endpoints[0].port_value == 8443);
    REQUIRE(c.tls);
    CHECK(c.tls->sni == "proxy.example.net");
    CHECK(c.tls->alpn_protocols == std::vector<std::string>{"h2", "http/1.1"});
    CHECK_FALSE(c.tls->insecure_skip_verify);
    REQUIRE(c.credentials);
    CHECK(c.credentials->username == "al ice");
    CHECK(c.credentials->password == "p@ss:w/rd");
  }
  SECTION("defaults") {
    REQUIRE(parseUpstreamUrl("HTTPS://proxy.example", &c) == "");
    CHECK(c.endpoints[0].port_value == 443);
    CHECK_FALSE(c.credentials);
    REQUIRE(parseUpstreamUrl("http://proxy.example", &c) == "");
    CHECK(c.endpoints[0].port_value == 80);
    CHECK_FALSE(c.tls);
  }
  SECTION("IPv6 and IP literals") {
    REQUIRE(parseUpstreamUrl("https://u@[::1]:8080", &c) == "");
    CHECK(c.endpoints[0].address == "::1");
    CHECK(c.endpoints[0].port_value == 8080);
    CHECK(c.tls->sni.empty());  // no SNI for IP literals (RFC 6066)
    CHECK(c.credentials->username == "u");
    CHECK(c.credentials->password.empty());
    REQUIRE(parseUpstreamUrl("https://[2001:db8::1]", &c) == "");
    CHECK(c.endpoints[0].port_value == 443);
    REQUIRE(parseUpstreamUrl("https://10.1.2.3:3129", &c) == "");
    CHECK(c.endpoints[0].address == "10.1.2.3");
  }
  SECTION("an unescaped @ in the password still splits at the last @") {
    REQUIRE(parseUpstreamUrl("https://u:p@ss@proxy.example", &c) == "");
    CHECK(c.credentials->password == "p@ss");
    CHECK(c.endpoints[0].address == "proxy.example");
  }
}

TEST_CASE("bad upstream URLs never echo the password", "[cli]") {
  const std::string shape = " (expected https://[user:pass@]HOST[:PORT])";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ftp://u:s3cret@h", "unsupported scheme 'ftp'" + shape},
      {"https://u:s3cret@h:99999", "invalid port (expected 1-65535)"},
      {"https://u:s3cret@h:0", "invalid port (expected 1-65535)"},
      {"https://u:s3cret@h:x", "invalid port (expected 1-65535)"},
      {"https://u:s3cret", "invalid port (expected 1-65535)"},  // forgot the host
      {"https://u:s3cret@", "missing host" + shape},
      {"https://u:s3cr%zzet@h", "invalid percent-encoding in the password"},
      {"https://u%g0:s3cret@h", "invalid percent-encoding in the user name"},
      {"https://:s3cret@h", "empty user name" + shape},
      {"https://u:s3cret@h/path", "a proxy URL has no path, query or fragment" + shape},
      {"https://u:s3cret@h?q", "a proxy URL has no path, query or fragment" + shape},
      {"https://u:s3cret@::1:443",
       "put IPv6 addresses in brackets, e.g. https://[2001:db8::1]:443"},
      {"https://u:s3cret@[::1", "missing ']' after an IPv6 address" + shape},
      {"https://u:s3cret@[nope]:1", "invalid IPv6 address in brackets" + shape},
      {"https://u:s3cret@[::1]x", "unexpected text after ']'" + shape},
      {"https://u:s3cret@h:", "empty port" + shape},
      {"https://u:s3cret@bad host", "invalid host name" + shape},
      {"u:s3cret@h", "not a URL" + shape},
      {"s3cret://h", "unsupported scheme 's3cret'" + shape},  // the scheme is not a secret
      {"ht:s3cret@tp://h", "unsupported scheme" + shape},
  };
  for (const auto& [url, message] : cases) {
    INFO(url);
    config::Cluster c;
    const std::string err = parseUpstreamUrl(url, &c);
    CHECK(err == message);
    if (url.rfind("s3cret://", 0) != 0) CHECK(err.find("s3cret") == std::string::npos);
    const ParseResult p = run({"--upstream", url.c_str()});
    CHECK(errorsOf(p) == "--upstream: " + message + "\n");
  }
  CHECK(errorsOf(run({"https://u:s3cret@h"})) ==
        "unexpected argument 'https://***@h' (see --help)\n");
}

TEST_CASE("--upstream makes one cluster and routes every listener to it", "[cli]") {
  const ParseResult p = run({"--upstream", "https://u:pw@p1.example", "--upstream",
                             "https://u:pw@p2.example:8443", "--concurrency", "3"});
  REQUIRE(p.ok());
  const config::LoadResult r = buildBootstrap(p.options, std::string("https://env.example"));
  INFO(allProblems(r.problems));
  REQUIRE(r.ok());
  const config::Bootstrap& b = r.bootstrap;
  REQUIRE(b.clusters.size() == 1);
  const config::Cluster& c = b.clusters[0];
  CHECK(c.name == "upstream");
  REQUIRE(c.endpoints.size() == 2);  // the environment is ignored when --upstream is given
  CHECK(c.endpoints[0].address == "p1.example");
  CHECK(c.endpoints[1].address == "p2.example");
  CHECK(c.endpoints[1].port_value == 8443);
  REQUIRE(c.tls);
  CHECK(c.tls->sni.empty());  // each endpoint uses its own name
  CHECK(c.credentials->username == "u");
  CHECK(c.credentials->password == "pw");
  CHECK(routedCluster(b) == "upstream");
  CHECK(b.concurrency == 3);

  const ParseResult one = run({"--upstream", "https://p1.example"});
  const config::LoadResult r1 = buildBootstrap(one.options, std::nullopt);
  REQUIRE(r1.ok());
  CHECK(r1.bootstrap.clusters.at(0).tls->sni == "p1.example");
}

TEST_CASE("upstreams of one cluster must agree", "[cli]") {
  const ParseResult p =
      run({"--upstream", "https://u:pw@p1.example", "--upstream",
           "https://u:other-secret@p2.example", "--upstream", "http://p3.example"});
  REQUIRE(p.ok());
  const config::LoadResult r = buildBootstrap(p.options, std::nullopt);
  const std::string all = allProblems(r.problems);
  CHECK(all ==
        "--upstream: all upstreams must use the same scheme and credentials (they are endpoints "
        "of one cluster)\n"
        "--upstream: all upstreams must use the same scheme and credentials (they are endpoints "
        "of one cluster)\n");
  CHECK(all.find("other-secret") == std::string::npos);
}

TEST_CASE("H2GATE_UPSTREAM is used only without --upstream and -c", "[cli]") {
  const ParseResult none = run({});
  const config::LoadResult r =
      buildBootstrap(none.options, std::string("https://u:pw@env.example"));
  INFO(allProblems(r.problems));
  REQUIRE(r.ok());
  REQUIRE(r.bootstrap.clusters.size() == 1);
  CHECK(r.bootstrap.clusters[0].endpoints.at(0).address == "env.example");
  CHECK(r.bootstrap.clusters[0].credentials->password == "pw");
  CHECK(routedCluster(r.bootstrap) == "upstream");

  const config::LoadResult empty = buildBootstrap(none.options, std::string());
  REQUIRE(empty.ok());
  CHECK(empty.bootstrap.clusters.empty());

  const config::LoadResult bad =
      buildBootstrap(none.options, std::string("https://u:s3cret@h:99999"));
  CHECK(allProblems(bad.problems) == "H2GATE_UPSTREAM: invalid port (expected 1-65535)\n");

  const std::string file = std::string(H2GATE_SOURCE_DIR) + "/config/examples/default.yaml";
  const ParseResult with_config = run({"-c", file.c_str()});
  const config::LoadResult rc =
      buildBootstrap(with_config.options, std::string("https://env.example"));
  INFO(allProblems(rc.problems));
  REQUIRE(rc.ok());
  CHECK(rc.bootstrap.clusters.empty());
  CHECK(rc.bootstrap.source == file);
}

TEST_CASE("-c with flags on top", "[cli]") {
  const std::string file = std::string(H2GATE_SOURCE_DIR) + "/config/examples/two_listeners.yaml";
  const ParseResult p =
      run({"-c", file.c_str(), "--listen", "127.0.0.1:4000", "--upstream", "https://flag.example"});
  REQUIRE(p.ok());
  const config::LoadResult r = buildBootstrap(p.options, std::nullopt);
  INFO(allProblems(r.problems));
  REQUIRE(r.ok());
  const config::Bootstrap& b = r.bootstrap;
  CHECK(b.listeners.at(0).address.port_value == 4000);
  CHECK(b.listeners.at(1).address.port_value == 3129);  // only the first listener moves
  CHECK(b.listeners.at(1).additional_addresses.size() == 1);
  REQUIRE(b.clusters.size() == 2);
  CHECK(b.clusters[1].name == "upstream");
  CHECK(routedCluster(b, 0) == "upstream");
  CHECK(routedCluster(b, 1) == "upstream");
  // The filters the server will use were built from the routed typed_config
  // (the ones loadFile built first routed elsewhere).
  for (size_t i = 0; i < 2; ++i) {
    const auto* fp =
        dynamic_cast<const filters::ForwardProxyFilter*>(forwardProxy(b, i).filter.get());
    REQUIRE(fp);
    CHECK(fp->config().cluster == "upstream");
  }

  const ParseResult missing = run({"-c", "/nonexistent/h2gate.yaml"});
  CHECK(allProblems(buildBootstrap(missing.options, std::nullopt).problems) ==
        "cannot read '/nonexistent/h2gate.yaml': No such file or directory\n");
}

TEST_CASE("--upstream keeps the forward_proxy filter's other settings", "[cli]") {
  const std::string path = "/tmp/h2gate_cli_test_" + std::to_string(::getpid()) + ".yaml";
  {
    std::ofstream out(path);
    out << h2gate::testing::kMinimalConfig
        << R"(        typed_config: {"@type": type.googleapis.com/h2gate.filters.forward_proxy.v1.Config}
  clusters:
  - name: upstream
    load_assignment: {endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: a.example, port_value: 1}}}}]}]}
)";
  }
  const ParseResult p = run({"-c", path.c_str(), "--upstream", "https://b.example"});
  const config::LoadResult clash = buildBootstrap(p.options, std::nullopt);
  CHECK(allProblems(clash.problems) ==
        "--upstream: the config already has a cluster named 'upstream'\n");
  std::remove(path.c_str());
}

TEST_CASE("--cacert and --insecure", "[cli]") {
  const ParseResult p = run({"--upstream", "https://p.example", "--cacert",
                             "/etc/ssl/certs/ca-certificates.crt", "--insecure"});
  const config::LoadResult r = buildBootstrap(p.options, std::nullopt);
  INFO(allProblems(r.problems));
  REQUIRE(r.ok());
  CHECK(r.bootstrap.clusters.at(0).tls->trusted_ca == "/etc/ssl/certs/ca-certificates.crt");
  CHECK(r.bootstrap.clusters.at(0).tls->insecure_skip_verify);

  const ParseResult plain = run({"--upstream", "https://p.example"});
  CHECK_FALSE(buildBootstrap(plain.options, std::nullopt)
                  .bootstrap.clusters.at(0)
                  .tls->insecure_skip_verify);

  const ParseResult env_cacert = run({"--cacert", "/etc/ssl/certs/ca-certificates.crt"});
  const config::LoadResult re =
      buildBootstrap(env_cacert.options, std::string("https://e.example"));
  REQUIRE(re.ok());
  CHECK(re.bootstrap.clusters.at(0).tls->trusted_ca == "/etc/ssl/certs/ca-certificates.crt");

  const ParseResult missing =
      run({"--upstream", "https://p.example", "--cacert", "/nonexistent.pem"});
  CHECK(allProblems(buildBootstrap(missing.options, std::nullopt).problems) ==
        "--cacert: cannot read '/nonexistent.pem': No such file or directory\n");

  const ParseResult no_upstream = run({"--insecure"});
  CHECK(allProblems(buildBootstrap(no_upstream.options, std::nullopt).problems) ==
        "--insecure applies to --upstream (or H2GATE_UPSTREAM) proxies; for clusters in a config "
        "file set common_tls_context.validation_context instead\n");

  const ParseResult http = run({"--upstream", "http://p.example", "--insecure"});
  CHECK(allProblems(buildBootstrap(http.options, std::nullopt).problems) ==
        "--insecure needs an https:// upstream\n");
}

TEST_CASE("--proxy-auth sets the --upstream cluster's proxy_authentication", "[cli]") {
  using Scheme = config::ProxyAuthentication::Scheme;
  const ParseResult p =
      run({"--upstream", "https://proxy.corp.example:8443", "--proxy-auth", "negotiate"});
  INFO(errorsOf(p));
  REQUIRE(p.ok());
  config::LoadResult r = buildBootstrap(p.options, std::nullopt);
  INFO(allProblems(r.problems));
  REQUIRE(r.ok());
  const config::Cluster& c = r.bootstrap.clusters.at(0);
  REQUIRE(c.authentication);
  CHECK(c.authentication->scheme == Scheme::Negotiate);
  CHECK(c.tls->alpn_protocols == std::vector<std::string>{"h2", "http/1.1"});

  // NTLM: the URL's credentials, HTTP/1.1 only.
  r = buildBootstrap(
      run({"--upstream", "https://CORP%5Calice:pw@p.example", "--proxy-auth=ntlm"}).options,
      std::nullopt);
  REQUIRE(r.ok());
  CHECK(r.bootstrap.clusters.at(0).authentication->scheme == Scheme::Ntlm);
  CHECK(r.bootstrap.clusters.at(0).credentials->username == "CORP\\alice");
  CHECK(r.bootstrap.clusters.at(0).tls->alpn_protocols == std::vector<std::string>{"http/1.1"});

  CHECK(errorsOf(run({"--proxy-auth", "kerberos"})) ==
        "--proxy-auth: expected one of auto, negotiate, ntlm, basic, got 'kerberos'\n");
  CHECK(allProblems(buildBootstrap(run({"--proxy-auth", "auto"}).options, std::nullopt).problems) ==
        "--proxy-auth applies to --upstream (or H2GATE_UPSTREAM) proxies; for clusters in a "
        "config file set proxy_authentication instead\n");
  CHECK(allProblems(buildBootstrap(
                        run({"--upstream", "https://p.example", "--proxy-auth", "basic"}).options,
                        std::nullopt)
                        .problems) ==
        "--proxy-auth basic needs user:pass@ in the --upstream URL or --proxy-credentials\n");
}

TEST_CASE("usage mentions every flag", "[cli]") {
  const std::string u = usage();
  for (const char* flag : {"--help",
                           "--version",
                           "--config",
                           "--validate",
                           "--listen",
                           "--admin",
                           "--upstream",
                           "--cacert",
                           "--insecure",
                           "--proxy-auth",
                           "--concurrency",
                           "--log-level",
                           "--max-config-size",
                           "H2GATE_UPSTREAM",
                           "--pac",
                           "--wpad",
                           "--system-proxy",
                           "--proxy-auth-allow",
                           "--allow",
                           "--proxy-credentials",
                           "credentials set NAME USER",
                           "credentials show NAME",
                           "credentials delete NAME"}) {
    INFO(flag);
    CHECK(u.find(flag) != std::string::npos);
  }
}

TEST_CASE("--max-config-size", "[cli]") {
  CHECK(run({}).options.max_config_bytes == 8u << 20);
  CHECK(run({"--max-config-size", "64M"}).options.max_config_bytes == 64u << 20);
  CHECK(run({"--max-config-size=1536K"}).options.max_config_bytes == 1536u << 10);
  CHECK(run({"--max-config-size", "1GiB"}).options.max_config_bytes == 1u << 30);
  CHECK(run({"--max-config-size", "2mb"}).options.max_config_bytes == 2u << 20);
  CHECK(run({"--max-config-size", "100000"}).options.max_config_bytes == 100000);
  for (const char* bad : {"0", "1023", "2G", "8X", "M", "-1", "99999999999"}) {
    INFO(bad);
    CHECK(errorsOf(run({"--max-config-size", bad})) ==
          "--max-config-size: expected a size from 1K to 1G (e.g. 64M, 1048576), got '" +
              std::string(bad) + "'\n");
  }
  // Applied to -c.
  const std::string path = "/tmp/h2gate_cli_size_" + std::to_string(::getpid()) + ".yaml";
  {
    std::ofstream out(path);
    out << h2gate::testing::kMinimalConfig << std::string(2000, '#') << "\n";
  }
  const ParseResult p = run({"-c", path.c_str(), "--max-config-size", "1K"});
  REQUIRE(p.ok());
  const std::string problems = allProblems(buildBootstrap(p.options, std::nullopt).problems);
  CHECK(problems.find("bytes, more than the 1 KiB a config file may have") != std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("check: a subcommand with an optional URL", "[cli]") {
  ParseResult p = run({"check"});
  REQUIRE(p.ok());
  CHECK(p.options.check);
  CHECK(p.options.check_url.empty());
  p = run({"check", "https://example.com/x", "--upstream", "https://proxy.example:8443"});
  REQUIRE(p.ok());
  CHECK(p.options.check);
  CHECK(p.options.check_url == "https://example.com/x");
  CHECK(p.options.upstreams.size() == 1);
  // Only as the first argument; one URL; a URL it must be.
  CHECK(errorsOf(run({"--insecure", "check"})) == "unexpected argument 'check' (see --help)\n");
  CHECK(errorsOf(run({"check", "https://a/", "https://b/"})) ==
        "unexpected argument 'https://b/' (see --help)\n");
  CHECK(errorsOf(run({"check", "example.com"})) ==
        "check: expected a URL such as https://example.com/, got 'example.com'\n");
  CHECK(errorsOf(run({"check", "-c", "x.yaml", "--validate"})) ==
        "check and --validate cannot be combined\n");
}

TEST_CASE("check: --step-timeout, one deadline per step", "[cli]") {
  CHECK_FALSE(run({"check"}).options.step_timeout);
  ParseResult p = run({"check", "https://example.com/", "--step-timeout", "2.5s"});
  REQUIRE(p.ok());
  CHECK(p.options.step_timeout == std::chrono::milliseconds(2500));
  CHECK(run({"check", "--step-timeout=100ms"}).options.step_timeout ==
        std::chrono::milliseconds(100));
  CHECK(run({"check", "--step-timeout", "10m"}).options.step_timeout == std::chrono::minutes(10));
  for (const char* bad : {"50ms", "11m", "5", "-1s", "soon"})
    CHECK(errorsOf(run({"check", "--step-timeout", bad})) ==
          "--step-timeout: expected a duration from 100ms to 10m (e.g. 30s), got '" +
              std::string(bad) + "'\n");
  CHECK(errorsOf(run({"--step-timeout", "5s"})) == "--step-timeout is an option of h2gate check\n");
}

TEST_CASE("autostart: a subcommand with an action", "[cli]") {
  ParseResult p = run({"autostart", "install", "-c", "h2gate.yaml", "--proxy-auth", "auto",
                       "--upstream", "http://proxy.corp.example:8080"});
  INFO(errorsOf(p));
  CHECK(p.ok());
  CHECK(p.options.autostart == "install");
  CHECK(p.options.config_path == "h2gate.yaml");
  CHECK(p.options.service.empty());
  CHECK(run({"autostart", "uninstall"}).options.autostart == "uninstall");
  CHECK(run({"autostart", "status"}).options.autostart == "status");
  CHECK(run({"autostart", "run", "--log-file=x.log"}).options.log_file == "x.log");
  CHECK(run({"--listen", "127.0.0.1:3128"}).options.autostart.empty());
  CHECK(errorsOf(run({"autostart"})) == "autostart: expected install, uninstall, status or run\n");
  CHECK(errorsOf(run({"autostart", "enable"})) ==
        "autostart: expected install, uninstall, status or run\nunexpected argument 'enable' "
        "(see --help)\n");
  // Only as the first argument.
  CHECK(errorsOf(run({"--insecure", "autostart", "install"})) ==
        "unexpected argument 'autostart' (see --help)\nunexpected argument 'install' (see "
        "--help)\n");
  CHECK(errorsOf(run({"autostart", "status", "--listen", "127.0.0.1:1"})) ==
        "autostart status takes no flags\n");
  CHECK(errorsOf(run({"autostart", "uninstall", "-c", "x"})) ==
        "autostart uninstall takes no flags\n");
  CHECK(errorsOf(run({"autostart", "install", "-c", "x", "--validate"})) ==
        "autostart and --validate cannot be combined\n");
}

TEST_CASE("service: a subcommand with an action; --log-file", "[cli]") {
  ParseResult p = run({"service", "install", "-c", "h2gate.yaml", "--log-file", "C:\\h2gate.log"});
  REQUIRE(p.ok());
  CHECK(p.options.service == "install");
  CHECK(p.options.config_path == "h2gate.yaml");
  CHECK(p.options.log_file == "C:\\h2gate.log");
  CHECK(run({"service", "uninstall"}).options.service == "uninstall");
  CHECK(run({"service", "run", "--log-file=x.log"}).options.log_file == "x.log");
  CHECK(run({"--log-file", "x.log"}).options.service.empty());
  CHECK(errorsOf(run({"service"})) == "service: expected install, uninstall or run\n");
  CHECK(errorsOf(run({"service", "start"})) ==
        "service: expected install, uninstall or run\nunexpected argument 'start' (see --help)\n");
  CHECK(errorsOf(run({"--insecure", "service", "install"})) ==
        "unexpected argument 'service' (see --help)\nunexpected argument 'install' (see --help)\n");
  CHECK(errorsOf(run({"service", "uninstall", "-c", "x.yaml"})) ==
        "service uninstall takes no flags\n");
  CHECK(errorsOf(run({"service", "install", "-c", "x.yaml", "--validate"})) ==
        "service and --validate cannot be combined\n");
  CHECK(errorsOf(run({"--log-file"})) == "--log-file: missing value\n");
}

TEST_CASE("--log-file-max-size and --log-file-keep: rotation of the log file", "[cli]") {
  ParseResult d = run({"--log-file", "x.log"});
  CHECK(d.options.log_file_options.max_bytes == 10u << 20);
  CHECK(d.options.log_file_options.keep == 5);
  ParseResult p = run({"--log-file", "x.log", "--log-file-max-size", "64M", "--log-file-keep=2"});
  REQUIRE(p.ok());
  CHECK(p.options.log_file_options.max_bytes == 64u << 20);
  CHECK(p.options.log_file_options.keep == 2);
  CHECK(run({"--log-file-max-size", "0"}).options.log_file_options.max_bytes == 0);
  CHECK(run({"--log-file-keep", "0"}).options.log_file_options.keep == 0);
  CHECK(errorsOf(run({"--log-file-max-size", "100"})) ==
        "--log-file-max-size: expected 0 (never rotate) or a size of at least 4K (e.g. 10M), got "
        "'100'\n");
  CHECK(errorsOf(run({"--log-file-keep", "101"})) ==
        "--log-file-keep: expected a number of old files from 0 to 100, got '101'\n");
  CHECK(errorsOf(run({"--log-file-keep", "-1"})) ==
        "--log-file-keep: expected a number of old files from 0 to 100, got '-1'\n");
}

namespace {

// The PAC route the forward_proxy of listener 0 was built with.
const filters::PacRouteConfig& pacRouteOf(const config::Bootstrap& b) {
  const auto* fp = dynamic_cast<const filters::ForwardProxyFilter*>(forwardProxy(b).filter.get());
  REQUIRE(fp);
  REQUIRE(fp->pacRoutes().size() == 1);
  return fp->pacRoutes().front()->config();
}

// A readable PAC file for --pac FILE.
std::string pacFile() {
  const std::string path = "/tmp/h2gate_cli_test_" + std::to_string(::getpid()) + ".pac";
  std::ofstream(path) << "function FindProxyForURL(url, host) { return \"DIRECT\"; }\n";
  return path;
}

}  // namespace

TEST_CASE("--pac, --wpad, --system-proxy: the default listener's route follows a PAC file",
          "[cli][pac_auth]") {
  using Kind = pac::PacSourceConfig::Kind;
  const std::string file = pacFile();
  struct Case {
    std::vector<const char*> args;
    Kind kind;
    std::string location;
  };
  for (const Case& c :
       {Case{{"--pac", "http://wpad.corp.example/proxy.pac"},
             Kind::Url,
             "http://wpad.corp.example/proxy.pac"},
        // A file's path is made absolute (on Windows "/tmp/x" becomes "Z:\tmp\x"
        // under wine).
        Case{{"--pac", file.c_str()}, Kind::File, std::filesystem::absolute(file).string()},
        Case{{"--wpad"}, Kind::Wpad, ""}, Case{{"--system-proxy"}, Kind::System, ""}}) {
    std::vector<const char*> argv{"h2gate"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const ParseResult p = parse(static_cast<int>(argv.size()), argv.data());
    INFO(c.args.front() << ": " << errorsOf(p));
    REQUIRE(p.ok());
    const config::LoadResult r = buildBootstrap(p.options, std::nullopt);
    INFO(allProblems(r.problems));
    REQUIRE(r.ok());
    CHECK(r.bootstrap.clusters.empty());
    // $H2GATE_UPSTREAM, the default proxy, is not used: the PAC file names them.
    const config::LoadResult env = buildBootstrap(p.options, "https://env.example:8443");
    INFO(allProblems(env.problems));
    CHECK(env.ok());
    CHECK(env.bootstrap.clusters.empty());
    const filters::PacRouteConfig& pac = pacRouteOf(r.bootstrap);
    CHECK(pac.source.kind == c.kind);
    CHECK(pac.source.location == c.location);
    CHECK_FALSE(pac.proxies.cluster.authentication);
    CHECK_FALSE(pac.proxies.authenticate_to);
  }
  std::remove(file.c_str());
}

TEST_CASE("--pac with --proxy-auth and --proxy-auth-allow builds what the same YAML builds",
          "[cli][pac_auth]") {
  // --cacert's file is only checked to be readable here.
  const std::string ca = "/tmp/h2gate_cli_test_" + std::to_string(::getpid()) + ".ca.pem";
  std::ofstream(ca) << "not read by this test\n";
  const ParseResult p =
      run({"--pac", "https://wpad.corp.example/proxy.pac", "--proxy-auth", "negotiate",
           "--proxy-auth-allow", "proxy.corp.example, .branch.example",
           "--proxy-auth-allow=10.0.0.1", "--cacert", ca.c_str(), "--listen", "127.0.0.1:4000"});
  INFO(errorsOf(p));
  REQUIRE(p.ok());
  CHECK(p.options.proxy_auth_allow ==
        std::vector<std::string>{"proxy.corp.example", ".branch.example", "10.0.0.1"});
  const config::LoadResult flags = buildBootstrap(p.options, std::nullopt);
  INFO(allProblems(flags.problems));
  REQUIRE(flags.ok());

  const config::LoadResult yaml = h2gate::testing::loadYaml(
      std::string(h2gate::testing::kMinimalConfig) +
      "        typed_config:\n"
      "          routes:\n"
      "          - match: {}\n"
      "            pac:\n"
      "              url: https://wpad.corp.example/proxy.pac\n"
      "              trusted_ca: " +
      ca +
      "\n"
      "              proxies:\n"
      "                trusted_ca: " +
      ca +
      "\n"
      "                proxy_authentication: {scheme: negotiate}\n"
      "                authenticate_to: [proxy.corp.example, .branch.example, 10.0.0.1]\n");
  INFO(allProblems(yaml.problems));
  REQUIRE(yaml.ok());
  const filters::PacRouteConfig& a = pacRouteOf(flags.bootstrap);
  const filters::PacRouteConfig& b = pacRouteOf(yaml.bootstrap);
  CHECK(a.source.kind == b.source.kind);
  CHECK(a.source.location == b.source.location);
  CHECK(a.source.fetch.trusted_ca == ca);
  CHECK(a.source.fetch.trusted_ca == b.source.fetch.trusted_ca);
  CHECK(a.fallback.kind == b.fallback.kind);
  REQUIRE(a.proxies.cluster.authentication);
  CHECK(a.proxies.cluster.authentication->scheme == config::ProxyAuthentication::Scheme::Negotiate);
  CHECK(a.proxies.cluster.authentication->scheme == b.proxies.cluster.authentication->scheme);
  CHECK(a.proxies.cluster.tls->trusted_ca == b.proxies.cluster.tls->trusted_ca);
  REQUIRE(a.proxies.authenticate_to);
  CHECK(*a.proxies.authenticate_to == *b.proxies.authenticate_to);
  CHECK(a.proxies.authenticate_to->allows("proxy.corp.example"));
  CHECK(a.proxies.authenticate_to->allows("p1.branch.example"));
  CHECK_FALSE(a.proxies.authenticate_to->allows("evil.example"));

  // /config_dump shows the route as it would be written.
  const std::string dump = config::dumpYaml(flags.bootstrap);
  INFO(dump);
  // Loaded again, it gives the same route.
  const config::LoadResult again = h2gate::testing::loadYaml(dump);
  INFO(allProblems(again.problems));
  REQUIRE(again.ok());
  const filters::PacRouteConfig& c = pacRouteOf(again.bootstrap);
  CHECK(c.source.location == a.source.location);
  CHECK(*c.proxies.authenticate_to == *a.proxies.authenticate_to);
  CHECK(c.proxies.cluster.authentication->scheme == a.proxies.cluster.authentication->scheme);
  for (const char* line : {"url: https://wpad.corp.example/proxy.pac\n", "scheme: negotiate\n",
                           "authenticate_to:\n", "- .branch.example\n"})
    CHECK(dump.find(line) != std::string::npos);
  CHECK(flags.bootstrap.listeners.at(0).address.port_value == 4000);
  std::remove(ca.c_str());
}

TEST_CASE("--pac: bad combinations are usage errors", "[cli][pac_auth]") {
  const std::string file = pacFile();
  const char* f = file.c_str();
  CHECK(errorsOf(run({"--pac", f, "--wpad"})) ==
        "--pac and --wpad cannot be combined: give one source of the PAC file\n");
  CHECK(errorsOf(run({"--system-proxy", "--pac", f})) ==
        "--system-proxy and --pac cannot be combined: give one source of the PAC file\n");
  CHECK(errorsOf(run({"--wpad", "--upstream", "https://p.example"})) ==
        "--wpad and --upstream cannot be combined: the PAC file chooses the proxies\n");
  CHECK(errorsOf(run({"--pac", f, "-c", "x.yaml"})) ==
        "--pac and -c cannot be combined: in a config file, write the route as the "
        "forward_proxy's pac: (config/README.md)\n");
  CHECK(errorsOf(run({"--pac", "/nonexistent/proxy.pac"})) ==
        "--pac: cannot read '/nonexistent/proxy.pac': No such file or directory\n");
  CHECK(errorsOf(run({"--pac", "ftp://wpad.example/proxy.pac"})) ==
        "--pac: 'ftp://wpad.example/proxy.pac' is not an http:// or https:// URL\n");
  CHECK(errorsOf(run({"--pac", "gopher://alice:secret@wpad.example/proxy.pac"})).find("secret") ==
        std::string::npos);
  CHECK(errorsOf(run({"--pac="})) ==
        "--pac: expected a PAC file's URL (http:// or https://) or path\n");
  CHECK(errorsOf(run({"--wpad=yes"})) == "--wpad: takes no value\n");
  const std::string no_proxy =
      "--proxy-auth needs the proxies it is for: --upstream URL, --pac, --wpad or "
      "--system-proxy (for clusters in a config file set proxy_authentication instead)\n";
  CHECK(errorsOf(run({"--proxy-auth", "negotiate"})) == no_proxy);
  CHECK(errorsOf(run({"-c", "x.yaml", "--proxy-auth", "negotiate"})) == no_proxy);
  {
    // $H2GATE_UPSTREAM may give the proxy (without -c).
    const char* argv[] = {"h2gate", "--proxy-auth", "negotiate"};
    CHECK(parse(3, argv, /*upstream_env=*/true).ok());
  }
  CHECK(errorsOf(run({"--wpad", "--proxy-auth", "basic"})) ==
        "--proxy-auth basic needs a password, which flags never carry: for the proxies a PAC "
        "file names, give --proxy-credentials keyring:NAME (h2gate credentials set NAME USER "
        "stores it) or write proxy_authentication.credentials (password_file) in a config file "
        "(config/README.md)\n");
  CHECK(errorsOf(run({"--wpad", "--insecure"})) ==
        "--insecure applies to --upstream proxies; give the CA of the proxies a PAC file names "
        "with --cacert FILE\n");
  CHECK(errorsOf(run({"--wpad", "--proxy-auth-allow", "p.example"})) ==
        "--proxy-auth-allow says which proxies get --proxy-auth's credentials, but there is no "
        "--proxy-auth\n");
  CHECK(errorsOf(run({"--upstream", "https://p.example", "--proxy-auth", "negotiate",
                      "--proxy-auth-allow", "p.example"})) ==
        "--proxy-auth-allow applies to the proxies a PAC file names (--pac, --wpad, "
        "--system-proxy)\n");
  CHECK(errorsOf(run({"--wpad", "--proxy-auth", "negotiate", "--proxy-auth-allow", "a,,b"})) ==
        "--proxy-auth-allow: an empty entry (expected HOST, .DOMAIN, an IP address or *)\n");
  CHECK(errorsOf(
            run({"--wpad", "--proxy-auth", "negotiate", "--proxy-auth-allow", "*.corp.example"})) ==
        "--proxy-auth-allow: '*.corp.example': only \"*\" alone is a wildcard; for a domain and "
        "every host under it write .example.com\n");
  // ntlm and auto without credentials are fine (the platform's, as with --upstream).
  CHECK(run({"--wpad", "--proxy-auth", "ntlm"}).ok());
  CHECK(run({"--pac", f, "--proxy-auth", "auto", "--proxy-auth-allow", "*"}).ok());
  std::remove(file.c_str());
}

TEST_CASE("--allow: the first listener's clients; required off loopback", "[cli][sources]") {
  const ParseResult p =
      run({"--listen", "0.0.0.0:3128", "--allow", "172.16.0.0/12", "--allow=fd00::/8", "--allow",
           "192.168.1.7", "--allow", "::ffff:10.0.0.0/104"});
  REQUIRE(p.ok());
  const config::LoadResult r = buildBootstrap(p.options, std::nullopt);
  INFO(allProblems(r.problems));
  REQUIRE(r.ok());
  const std::vector<config::SourcePrefixRange>& ranges =
      r.bootstrap.listeners.at(0).source_prefix_ranges;
  REQUIRE(ranges.size() == 4);
  CHECK(ranges[0].address_prefix == "172.16.0.0");
  CHECK(ranges[0].prefix_len == 12);
  CHECK(ranges[1].address_prefix == "fd00::");
  CHECK(ranges[1].prefix_len == 8);
  CHECK(ranges[2].address_prefix == "192.168.1.7");  // one address: /32
  CHECK(ranges[2].prefix_len == 32);
  CHECK(ranges[3].address_prefix == "10.0.0.0");  // IPv4-mapped: the IPv4 range
  CHECK(ranges[3].prefix_len == 8);

  // Without --allow: refused, with what to do.
  const ParseResult open = run({"--listen", "0.0.0.0:3128"});
  REQUIRE(open.ok());
  CHECK(allProblems(buildBootstrap(open.options, std::nullopt).problems) ==
        "<flags>: static_resources.listeners[0].filter_chains[0].filter_chain_match."
        "source_prefix_ranges: listener 'local_proxy' listens on 0.0.0.0:3128 without "
        "source_prefix_ranges (--allow): anyone who can reach it could use the proxy; list the "
        "clients' ranges, or 0.0.0.0/0 (and ::/0) to allow everyone on purpose\n");
  // Everyone, on purpose.
  const ParseResult everyone = run({"--listen", "0.0.0.0:3128", "--allow", "0.0.0.0/0"});
  CHECK(buildBootstrap(everyone.options, std::nullopt).ok());
  // The default (loopback) listener needs none; --allow restricts it all the same.
  CHECK(buildBootstrap(run({}).options, std::nullopt).ok());
  const config::LoadResult local = buildBootstrap(run({"--allow", "127.0.0.1"}).options, {});
  REQUIRE(local.ok());
  CHECK(local.bootstrap.listeners.at(0).source_prefix_ranges.size() == 1);

  // Bad ranges are usage errors.
  CHECK(errorsOf(run({"--allow", "10.1.2.3/8"})) ==
        "--allow: '10.1.2.3/8' has host bits set (did you mean 10.0.0.0/8?) (expected a range "
        "such as 192.168.0.0/16 or fd00::/8)\n");
  CHECK(errorsOf(run({"--allow", "10.0.0.0/33"})) ==
        "--allow: prefix length /33 is longer than the address (at most /32) (expected a range "
        "such as 192.168.0.0/16 or fd00::/8)\n");
  CHECK(errorsOf(run({"--allow", "wsl"})) ==
        "--allow: 'wsl' is not an IPv4 or IPv6 address (expected a range such as "
        "192.168.0.0/16 or fd00::/8)\n");
  CHECK(errorsOf(run({"--allow"})) == "--allow: missing value\n");
}

TEST_CASE("--allow with -c: replaces the first listener's list", "[cli][sources]") {
  h2gate::test::TempDir dir{"cli-allow"};
  const std::string path = dir.file("lan.yaml");
  std::ofstream(path) << R"(static_resources:
  listeners:
  - name: lan
    address: {socket_address: {address: 0.0.0.0, port_value: 3130}}
    filter_chains:
    - filter_chain_match:
        source_prefix_ranges: [{address_prefix: 10.0.0.0, prefix_len: 8}]
      filters: [{name: h2gate.filters.forward_proxy}]
  - name: wide
    address: {socket_address: {address: 0.0.0.0, port_value: 3131}}
    filter_chains: [{filters: [{name: h2gate.filters.forward_proxy}]}]
)";
  // The second listener has no list: refused whatever --allow says (it
  // applies to the first only).
  const config::LoadResult r =
      buildBootstrap(run({"-c", path.c_str(), "--allow", "192.168.0.0/16"}).options, {});
  CHECK(allProblems(r.problems) ==
        path +
            ":9:5: static_resources.listeners[1].filter_chains[0].filter_chain_match."
            "source_prefix_ranges: listener 'wide' listens on 0.0.0.0:3131 without "
            "source_prefix_ranges (--allow): anyone who can reach it could use the proxy; list "
            "the clients' ranges, or 0.0.0.0/0 (and ::/0) to allow everyone on purpose\n");
  REQUIRE(r.bootstrap.listeners.at(0).source_prefix_ranges.size() == 1);
  CHECK(r.bootstrap.listeners.at(0).source_prefix_ranges[0].address_prefix == "192.168.0.0");
}

TEST_CASE("--proxy-credentials keyring:NAME: --proxy-auth's credentials from the keyring",
          "[cli][keyring]") {
  // The keyring as config's parser sees it (gateway/base/keyring.h): "corp"
  // holds alice and kr-pw; "locked" fails; any other name is absent.
  keyring::setLookupForTesting([](const std::string& name, keyring::Entry* out, std::string* e) {
    if (name == "locked") {
      *e = "the keyring is locked";
      return keyring::Status::Failed;
    }
    if (name != "corp") return keyring::Status::NotFound;
    out->username = "alice";
    out->password = "kr-pw";
    return keyring::Status::Ok;
  });
  struct Restore {
    ~Restore() { keyring::setLookupForTesting({}); }
  } restore;

  SECTION("--upstream: the cluster's credentials, named in the dump") {
    const ParseResult p = run({"--upstream", "http://p.example:3128", "--proxy-auth", "basic",
                               "--proxy-credentials", "keyring:corp"});
    INFO(errorsOf(p));
    REQUIRE(p.ok());
    CHECK(p.options.proxy_keyring == "corp");
    const config::LoadResult r = buildBootstrap(p.options, std::nullopt);
    INFO(allProblems(r.problems));
    REQUIRE(r.ok());
    const config::Cluster& c = r.bootstrap.clusters.at(0);
    REQUIRE(c.credentials);
    CHECK(c.credentials->username == "alice");
    CHECK(c.credentials->password == "kr-pw");
    CHECK(c.credentials->keyring == "corp");
    const std::string dump = config::dumpYaml(r.bootstrap);
    CHECK(dump.find("keyring: corp") != std::string::npos);
    CHECK(dump.find("kr-pw") == std::string::npos);
  }
  SECTION("--pac: the PAC route's proxy_authentication.credentials; basic allowed") {
    const std::string file = pacFile();
    const ParseResult p =
        run({"--pac", file.c_str(), "--proxy-auth", "basic", "--proxy-credentials=keyring:corp"});
    INFO(errorsOf(p));
    REQUIRE(p.ok());
    const config::LoadResult r = buildBootstrap(p.options, std::nullopt);
    INFO(allProblems(r.problems));
    REQUIRE(r.ok());
    const filters::PacRouteConfig& route = pacRouteOf(r.bootstrap);
    REQUIRE(route.proxies.cluster.credentials);
    CHECK(route.proxies.cluster.credentials->username == "alice");
    CHECK(route.proxies.cluster.credentials->password == "kr-pw");
    CHECK(route.proxies.cluster.authentication->scheme ==
          config::ProxyAuthentication::Scheme::Basic);
    const std::string dump = config::dumpYaml(r.bootstrap);
    INFO(dump);
    CHECK(dump.find("keyring: corp") != std::string::npos);
    CHECK(dump.find("kr-pw") == std::string::npos);
  }
  SECTION("the keyring's reason, the entry's absence") {
    const config::LoadResult locked =
        buildBootstrap(run({"--upstream", "http://p.example:3128", "--proxy-auth", "ntlm",
                            "--proxy-credentials", "keyring:locked"})
                           .options,
                       std::nullopt);
    CHECK(allProblems(locked.problems) ==
          "--proxy-credentials: keyring entry 'locked': the keyring is locked\n");
    const config::LoadResult absent =
        buildBootstrap(run({"--upstream", "http://p.example:3128", "--proxy-auth", "ntlm",
                            "--proxy-credentials", "keyring:nope"})
                           .options,
                       std::nullopt);
    CHECK(allProblems(absent.problems) == "--proxy-credentials: no entry 'nope' in " +
                                              std::string(keyring::backendName()) +
                                              " (h2gate credentials set nope USER stores one)\n");
  }
  SECTION("usage errors") {
    CHECK(errorsOf(run({"--upstream", "http://p.example", "--proxy-auth", "basic",
                        "--proxy-credentials", "alice:pw"})) ==
          "--proxy-credentials: expected keyring:NAME (a keyring entry; see h2gate credentials)\n");
    CHECK(errorsOf(run({"--upstream", "http://p.example", "--proxy-auth", "basic",
                        "--proxy-credentials", "keyring:"})) ==
          "--proxy-credentials: an entry's name must not be empty\n");
    CHECK(
        errorsOf(run({"--upstream", "http://p.example", "--proxy-credentials", "keyring:corp"})) ==
        "--proxy-credentials gives --proxy-auth's user name and password, but there is no "
        "--proxy-auth\n");
    CHECK(allProblems(buildBootstrap(run({"--upstream", "http://u:p@p.example", "--proxy-auth",
                                          "basic", "--proxy-credentials", "keyring:corp"})
                                         .options,
                                     std::nullopt)
                          .problems) ==
          "--proxy-credentials and user:pass@ in the --upstream URL: give the credentials once\n");
  }
}
