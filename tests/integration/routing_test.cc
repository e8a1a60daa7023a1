// Routing and policy filters with real peers: forward_proxy routes (DIRECT
// to a local origin, the rest through nghttpx -> squid -> nginx), the acl,
// upstream_headers per listener and per cluster, proxy_auth, and the PAC
// file evaluated by a real PAC engine (pacparser). [routing]
//
// web.internal.test resolves to 127.0.0.1 for h2gate alone (its own
// /etc/hosts in a mount namespace: H2gate::Options::hosts, needs root);
// origin.test only for squid, so whatever reached nginx under that name
// went through the upstream proxy.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/h2_env.h"
#include "tests/support/listeners_env.h"
#include "tests/support/scrape.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

const std::string kPython = "/opt/h2gate-test/venv/bin/python";

struct RoutingEnv {
  explicit RoutingEnv(bool squid_auth = false)
      : nginx(nginxOptions(ca)), squid(squidOptions(squid_auth)), nghttpx(nghttpxOptions()) {
    testFile("1m");
  }

  static Nginx::Options nginxOptions(TestCA& ca) {
    Nginx::Options n;
    n.ca = &ca;
    n.dns_names = {"origin.test", "web.internal.test"};
    return n;
  }
  static Squid::Options squidOptions(bool auth) {
    Squid::Options s;
    s.hosts = {"origin.test"};
    s.auth = auth;  // alice / s3cret
    return s;
  }
  Nghttpx::Options nghttpxOptions() {
    Nghttpx::Options n = H2Env::nghttpxOptions(H2Env::Options{}, ca, squid.httpPort());
    n.log_headers = {"x-identity", "proxy-authorization"};
    return n;
  }

  // h2gate with these listeners and clusters "proxy" and "second_proxy_cluster" (both
  // nghttpx, no credentials of their own).
  H2gate& start(const std::string& listeners, const std::vector<std::string>& names,
                std::map<std::string, std::optional<std::string>> env = {}) {
    H2gate::Options o = listenersOptions(
        gateYaml(listeners, "127.0.0.1",
                 "  clusters:\n" + clusterYaml("proxy", {nghttpx.port()}, ca.caCertPath()) +
                     clusterYaml("second_proxy_cluster", {nghttpx.port()}, ca.caCertPath())),
        names, "127.0.0.1 web.internal.test\n");
    o.env = std::move(env);
    gate = std::make_unique<H2gate>(std::move(o));
    INFO(gate->process().logTail());
    REQUIRE(gate->process().waitForLog(
        "proxy 127\\.0\\.0\\.1:" + str(nghttpx.port()) + " negotiated h2", milliseconds(10000)));
    return *gate;
  }

  std::string internalUrl(bool tls, const std::string& path) const {
    return nginxUrl(nginx, "web.internal.test", tls, path);
  }
  std::string originUrl(bool tls, const std::string& path) const {
    return nginxUrl(nginx, "origin.test", tls, path);
  }

  // curl through `listener`; stdout is what -w writes.
  CommandResult curl(const std::string& listener, const std::vector<std::string>& args) {
    return curlThrough(*gate, listener, ca, args);
  }
  // A 1 MiB download through `listener`: true when 200 and whole.
  bool fetch(const std::string& listener, const std::string& url, const std::string& name,
             std::vector<std::string> extra = {}) {
    return fetch1m(*gate, listener, ca, url, out.file(name), std::move(extra));
  }

  TempDir work{"routing"};
  TestCA ca{work.path().string()};
  Nginx nginx;
  Squid squid;
  Nghttpx nghttpx;
  TempDir out{"out"};
  std::unique_ptr<H2gate> gate;  // stops first
};

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

}  // namespace

TEST_CASE("routing: *.internal.test DIRECT, the rest through the h2 proxy; acl and reject",
          "[routing]") {
  if (!haveMountNamespaces()) FAIL("needs root for a private /etc/hosts (unshare -m)");
  RoutingEnv env;
  env.start(listenerYaml("local_proxy",
                         "      - name: h2gate.filters.acl\n"
                         "        typed_config:\n"
                         "          deny:\n"
                         "          - match: {cidrs: [169.254.0.0/16, \"fe80::/10\"]}\n"
                         "            reason: link-local and cloud metadata addresses\n"
                         "          - match: {hosts: [blocked.internal.test]}\n"
                         "            reason: blocked for the test\n"
                         "      - name: h2gate.filters.forward_proxy\n"
                         "        typed_config:\n"
                         "          routes:\n"
                         "          - match: {hosts: [\"*.ads.test\"]}\n"
                         "            reject: 451\n"
                         "            reason: no ads here\n"
                         "          - match: {host_suffixes: [internal.test]}\n"
                         "            direct: true\n"
                         "          cluster: proxy\n"),
            {"local_proxy"});

  // DIRECT: h2gate resolves web.internal.test itself and reaches nginx.
  CHECK(env.fetch("", env.internalUrl(true, "/1m?d1"), "d1"));
  CHECK(env.fetch("", env.internalUrl(false, "/1m?d2"), "d2"));
  // The rest: through nghttpx (squid resolves origin.test).
  CHECK(env.fetch("", env.originUrl(true, "/1m?p1"), "p1"));
  CHECK(env.fetch("", env.originUrl(false, "/1m?p2"), "p2"));

  // acl: 403 with the reason, for CONNECT and absolute-form.
  auto denied =
      env.curl("", {"-o", env.out.file("m"), "-w", "%{http_code}", "http://169.254.169.254/x"});
  CHECK(denied.out == "403");
  CHECK(readFile(env.out.file("m")) ==
        "destination 169.254.169.254:80 denied by policy: link-local and cloud metadata "
        "addresses\n");
  auto tunnel = env.curl("", {"-w", "%{http_connect}", "https://blocked.internal.test:443/"});
  CHECK(tunnel.exit_code != 0);
  CHECK(tunnel.out == "403");
  auto v6 = env.curl("", {"-w", "%{http_connect}", "https://[fe80::1]:443/"});
  CHECK(v6.out == "403");
  // A reject route answers its own status and reason.
  auto ads = env.curl("", {"-o", env.out.file("a"), "-w", "%{http_code}", "http://x.ads.test/"});
  CHECK(ads.out == "451");
  CHECK(readFile(env.out.file("a")) == "no ads here\n");

  // The proxy saw exactly the two origin.test requests, nothing else.
  const auto lines = env.nghttpx.waitForAccessLines(2, "", milliseconds(5000));
  INFO(env.nghttpx.accessLog());
  CHECK(lines.size() == 2);
  CHECK(countOccurrences(joined(lines), "origin.test") == 2);
  for (const char* never : {"internal.test", "169.254", "ads.test", "fe80"})
    CHECK(env.nghttpx.accessLog().find(never) == std::string::npos);
  // ...and nginx served the DIRECT ones too.
  CHECK(env.nginx.waitForAccessCount("/1m?d", 2) == 2);

  const auto log = env.gate->waitForAccessLog(8, milliseconds(5000));
  REQUIRE(log.size() == 8);
  for (const auto& e : log) {
    INFO(e.line);
    const std::string target = e.get("target");
    if (target.find("web.internal.test") != std::string::npos) {
      CHECK(e.get("cluster").empty());
      CHECK(e.get("protocol") == "direct");
      CHECK(e.num("status") == 200);
    } else if (target.find("origin.test") != std::string::npos) {
      CHECK(e.get("cluster") == "proxy");
      CHECK(e.get("protocol") == "h2");
    } else {
      CHECK(e.get("result") == "rejected");
      CHECK((e.num("status") == 403 || e.num("status") == 451));
      CHECK(e.get("protocol").empty());
    }
  }
  const Scrape m = scrapeMetrics(env.gate->adminPort());
  CHECK(m.sum("h2gate_downstream_errors_total", {{"status", "403"}}) == 3);
  CHECK(m.sum("h2gate_requests_finished_total", {{"result", "rejected"}}) == 4);
}

TEST_CASE("routing: two listeners, each with its own upstream headers and credentials",
          "[routing]") {
  if (!haveMountNamespaces()) FAIL("needs root for a private /etc/hosts (unshare -m)");
  RoutingEnv env(/*squid_auth=*/true);  // squid wants alice / s3cret
  env.start(listenerYaml("app1",
                         "      - name: h2gate.filters.upstream_headers\n"
                         "        typed_config:\n"
                         "          request_headers_to_add:\n"
                         "          - header: {key: X-Identity, value: "
                         "\"app1-${H2GATE_TEST_APP1_TOKEN}\"}\n"
                         "          proxy_credentials: {username: alice, password: "
                         "\"${H2GATE_TEST_APP1_PASSWORD}\"}\n"
                         "      - name: h2gate.filters.forward_proxy\n"
                         "        typed_config: {cluster: proxy}\n") +
                listenerYaml("app2",
                             "      - name: h2gate.filters.upstream_headers\n"
                             "        typed_config:\n"
                             "          request_headers_to_add:\n"
                             "          - header: {key: X-Identity, value: app2}\n"
                             "          clusters:\n"
                             "          - cluster: second_proxy_cluster\n"
                             "            request_headers_to_add:\n"
                             "            - header: {key: X-Identity, value: app2-via-b}\n"
                             "      - name: h2gate.filters.forward_proxy\n"
                             "        typed_config: {cluster: second_proxy_cluster}\n"),
            {"app1", "app2"},
            {{"H2GATE_TEST_APP1_TOKEN", "t0k3n"}, {"H2GATE_TEST_APP1_PASSWORD", "s3cret"}});

  // app1: its listener's credentials reach squid; the app's own
  // Proxy-Authorization (mallory) is dropped, not forwarded.
  CHECK(env.fetch("app1", env.originUrl(false, "/1m?a1"), "a1", {"--proxy-user", "mallory:evil"}));
  CHECK(env.fetch("app1", env.originUrl(true, "/1m?a2"), "a2"));
  // app2: no credentials on its listener or cluster: squid says 407.
  auto r = env.curl(
      "app2", {"-o", env.out.file("b1"), "-w", "%{http_code}", env.originUrl(false, "/1m?b1")});
  CHECK(r.out == "407");

  const auto lines = env.nghttpx.waitForAccessLines(3, "", milliseconds(5000));
  INFO(env.nghttpx.accessLog());
  REQUIRE(lines.size() == 3);
  const std::string alice = "proxy-authorization=Basic YWxpY2U6czNjcmV0";  // alice:s3cret
  for (const std::string& line : lines) {
    INFO(line);
    if (line.find("?b1") != std::string::npos) {
      CHECK(line.find("x-identity=app2-via-b") != std::string::npos);
      CHECK(line.find("proxy-authorization=-") != std::string::npos);
    } else {
      CHECK(line.find("x-identity=app1-t0k3n") != std::string::npos);
      CHECK(line.find(alice) != std::string::npos);
    }
  }
  CHECK(env.nghttpx.accessLog().find("bWFsbG9yeTpldmls") == std::string::npos);  // mallory

  // Access log and metrics carry the listener.
  const auto log = env.gate->waitForAccessLog(3, milliseconds(5000));
  REQUIRE(log.size() == 3);
  for (const auto& e : log) {
    INFO(e.line);
    CHECK(e.get("cluster") == (e.get("listener") == "app1" ? "proxy" : "second_proxy_cluster"));
  }
  // (second_proxy_cluster: a name too long for std::string's inline buffer,
  // as a PAC proxy's "HTTPS host:port" is, so a label taken from a dead
  // temporary string would show here as garbage.)
  const Scrape m = scrapeMetrics(env.gate->adminPort());
  CHECK(m.sum("h2gate_requests_finished_total", {{"listener", "app1"}, {"cluster", "proxy"}}) == 2);
  CHECK(m.sum("h2gate_requests_finished_total",
              {{"listener", "app2"}, {"cluster", "second_proxy_cluster"}}) == 1);

  // Secrets stay out of the log and of /config_dump.
  const std::string dump = adminGet(env.gate->adminPort(), "/config_dump").body;
  for (const std::string& secret : {std::string("s3cret"), std::string("t0k3n"),
                                    std::string("YWxpY2U6czNjcmV0"), std::string("mallory")}) {
    INFO(secret);
    CHECK(env.gate->stderrText().find(secret) == std::string::npos);
    CHECK(dump.find(secret) == std::string::npos);
  }
  CHECK(dump.find("app2-via-b") == std::string::npos);  // header values are redacted
  CHECK(dump.find("X-Identity") != std::string::npos);
}

TEST_CASE("routing: proxy_auth asks apps for credentials and keeps them from the upstream",
          "[routing]") {
  if (!haveMountNamespaces()) FAIL("needs root for a private /etc/hosts (unshare -m)");
  RoutingEnv env(/*squid_auth=*/true);
  env.start(listenerYaml("local_proxy",
                         "      - name: h2gate.filters.proxy_auth\n"
                         "        typed_config:\n"
                         "          users: [{username: app, password: letmein}]\n"
                         "      - name: h2gate.filters.upstream_headers\n"
                         "        typed_config:\n"
                         "          proxy_credentials: {username: alice, password: s3cret}\n"
                         "      - name: h2gate.filters.forward_proxy\n"
                         "        typed_config: {cluster: proxy}\n"),
            {"local_proxy"});
  auto none = env.curl("", {"-D", env.out.file("h"), "-o", env.out.file("n"), "-w", "%{http_code}",
                            env.originUrl(false, "/1m?n")});
  CHECK(none.out == "407");
  CHECK(readFile(env.out.file("h")).find("Proxy-Authenticate: Basic realm=\"h2gate\"") !=
        std::string::npos);
  auto wrong = env.curl("", {"--proxy-user", "app:wrong", "-o", env.out.file("w"), "-w",
                             "%{http_code}", env.originUrl(false, "/1m?w")});
  CHECK(wrong.out == "407");
  auto tunnel = env.curl("", {"-w", "%{http_connect}", env.originUrl(true, "/1m?t")});
  CHECK(tunnel.out == "407");
  CHECK(env.fetch("", env.originUrl(false, "/1m?ok1"), "ok1", {"--proxy-user", "app:letmein"}));
  CHECK(env.fetch("", env.originUrl(true, "/1m?ok2"), "ok2", {"--proxy-user", "app:letmein"}));
  // Only the two authenticated requests reached the proxy, with h2gate's
  // credentials for squid, never the app's.
  const auto lines = env.nghttpx.waitForAccessLines(2, "", milliseconds(5000));
  INFO(env.nghttpx.accessLog());
  CHECK(lines.size() == 2);
  CHECK(countOccurrences(env.nghttpx.accessLog(), "Basic YWxpY2U6czNjcmV0") == 2);
  CHECK(env.nghttpx.accessLog().find("YXBwOmxldG1laW4") == std::string::npos);  // app:letmein
  CHECK(env.gate->stderrText().find("letmein") == std::string::npos);
}

TEST_CASE("routing: the PAC file, evaluated by pacparser, says what h2gate would do",
          "[routing][pac]") {
  if (runCommand({kPython, "-c", "import pacparser"}).exit_code != 0)
    FAIL("pacparser not installed: run deploy/install-deps.sh --test");
  RoutingEnv env;
  const std::string pac_listener = listenerYaml(
      "local_proxy",
      "      - name: h2gate.filters.acl\n"
      "        typed_config:\n"
      "          deny: [{match: {cidrs: [169.254.0.0/16]}}]\n"
      "      - name: h2gate.filters.forward_proxy\n"
      "        typed_config:\n"
      "          routes:\n"
      "          - match: {host_suffixes: [internal.test], cidrs: [10.0.0.0/8, \"fd00::/8\"]}\n"
      "            direct: true\n"
      "          - match: {cidrs: [169.254.0.0/16]}\n"  // the acl wins: PROXY
      "            direct: true\n"
      "          - match: {hosts: [\"*.ads.test\"]}\n"
      "            reject: 403\n"
      "          - match: {ports: [\"8000-8999\"], kind: absolute}\n"
      "            direct: true\n"
      "          - match: {no_proxy: \"localhost,.svc,bücher.example\", no_proxy_mode: go}\n"
      "            direct: true\n"
      "          cluster: proxy\n"
      "          pac: {serve_on_listener: true}\n");
  const std::string plain = listenerYaml("plain",
                                         "      - name: h2gate.filters.forward_proxy\n"
                                         "        typed_config: {cluster: proxy}\n");
  env.start(pac_listener + plain, {"local_proxy", "plain"});
  const std::string proxy = "PROXY 127.0.0.1:" + str(env.gate->port("local_proxy"));

  const AdminReply admin = adminGet(env.gate->adminPort(), "/proxy.pac");
  REQUIRE(admin.status == 200);
  CHECK(admin.content_type == "application/x-ns-proxy-autoconfig");
  CHECK(adminGet(env.gate->adminPort(), "/proxy.pac?listener=local_proxy").body == admin.body);
  const AdminReply other = adminGet(env.gate->adminPort(), "/proxy.pac?listener=plain");
  CHECK(other.body.find("PROXY 127.0.0.1:" + str(env.gate->port("plain"))) != std::string::npos);
  CHECK(adminGet(env.gate->adminPort(), "/proxy.pac?listener=nope").status == 404);

  // The proxy listener serves the same file to an origin-form GET (opt-in);
  // the other listener still says "this is a proxy".
  const std::string served = env.out.file("served.pac");
  auto get = runCurl({"-sS", "-o", served, "-w", "%{http_code} %{content_type}",
                      "http://127.0.0.1:" + str(env.gate->port("local_proxy")) + "/proxy.pac"});
  CHECK(get.out == "200 application/x-ns-proxy-autoconfig");
  CHECK(readFile(served) == admin.body);
  auto refused = runCurl({"-sS", "-o", "/dev/null", "-w", "%{http_code}",
                          "http://127.0.0.1:" + str(env.gate->port("plain")) + "/proxy.pac"});
  CHECK(refused.out == "400");

  // url -> what the PAC must answer.
  const std::vector<std::pair<std::string, std::string>> table{
      {"https://git.internal.test/", "DIRECT"},
      {"https://internal.test/", "DIRECT"},
      {"https://GIT.Internal.Test./x", "DIRECT"},
      {"https://notinternal.test/", proxy},
      {"http://10.1.2.3/x", "DIRECT"},
      {"http://11.1.2.3/x", proxy},
      {"http://169.254.169.254/latest", proxy},  // acl deny before the direct route
      {"https://x.ads.test/", proxy},            // h2gate answers 403
      {"http://app.example:8080/", "DIRECT"},
      {"https://app.example:8080/", proxy},  // kind: absolute only
      {"http://app.example:9000/", proxy},
      {"http://[fd00::1]/", "DIRECT"},
      {"http://[fe80::1]:9443/", proxy},
      {"https://api.default.svc/", "DIRECT"},
      {"https://svc/", proxy},  // ".svc" is subdomains only in go mode
      {"http://localhost:5000/", "DIRECT"},
      {"http://127.0.0.1:5000/", "DIRECT"},  // go mode: loopback always
      {"https://www.xn--bcher-kva.example/", "DIRECT"},
      {"https://example.com/", proxy},
  };
  std::string script =
      "import sys, pacparser\n"
      "pacparser.init()\n"
      "pacparser.parse_pac_file(sys.argv[1])\n"
      "for url in sys.argv[2:]:\n"
      "    host = url.split('//', 1)[1].split('/', 1)[0]\n"
      "    host = host[1:host.index(']')] if host.startswith('[') else host.split(':')[0]\n"
      "    print(pacparser.find_proxy(url, host))\n";
  std::vector<std::string> argv{kPython, "-c", script, served};
  for (const auto& [url, want] : table) argv.push_back(url);
  const CommandResult r = runCommand(argv);
  INFO(r.err << "\n" << admin.body);
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> got;
  for (size_t start = 0, end; (end = r.out.find('\n', start)) != std::string::npos; start = end + 1)
    got.push_back(r.out.substr(start, end - start));
  REQUIRE(got.size() == table.size());
  for (size_t i = 0; i < table.size(); ++i) {
    INFO(table[i].first);
    CHECK(got[i] == table[i].second);
  }

  // A reload makes the file again from the new routes.
  std::string yaml = readFile(env.gate->dir().file("h2gate.yaml"));
  const size_t at = yaml.find("host_suffixes: [internal.test]");
  REQUIRE(at != std::string::npos);
  yaml.replace(at, 30, "host_suffixes: [elsewhere.test]");
  env.gate->writeFile("h2gate.yaml", yaml);
  REQUIRE(adminPost(env.gate->adminPort(), "/reload").status == 200);
  const std::string reloaded = adminGet(env.gate->adminPort(), "/proxy.pac").body;
  CHECK(reloaded.find("\".elsewhere.test\"") != std::string::npos);
  CHECK(reloaded.find("internal.test") == std::string::npos);
  CHECK(reloaded.find(proxy + "\"") != std::string::npos);  // same listener, same port
}

TEST_CASE("routing: --validate names file, line, column and path of bad routing config",
          "[routing]") {
  TempDir dir("routing-validate");
  const std::string path = dir.write("bad.yaml",
                                     "static_resources:\n"
                                     "  listeners:\n"
                                     "  - name: l\n"
                                     "    address: {socket_address: {address: 127.0.0.1, "
                                     "port_value: 0}}\n"
                                     "    filter_chains:\n"
                                     "    - filters:\n"
                                     "      - name: h2gate.filters.acl\n"
                                     "        typed_config:\n"
                                     "          deny: [{match: {cidr: [10.0.0.0/8]}}]\n"
                                     "      - name: h2gate.filters.forward_proxy\n"
                                     "        typed_config:\n"
                                     "          routes:\n"
                                     "          - match: {cidrs: [10.0.0.0/40]}\n"
                                     "            direct: true\n"
                                     "          - match: {}\n"
                                     "            direct: true\n"
                                     "          - match: {hosts: [a.test]}\n"
                                     "            reject: 302\n");
  const CommandResult r = runCommand({H2gate::binaryPath(H2GATE_BINARY), "--validate", "-c", path});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  const std::string f = "static_resources.listeners[0].filter_chains[0].filters[";
  for (const std::string& want :
       {path + ":9:27: " + f + "0].typed_config.deny[0].match.cidr: unknown field",
        path + ":13:29: " + f + "1].typed_config.routes[0].match.cidrs[0]: bad CIDR range",
        path + ":17:13: " + f + "1].typed_config.routes[2]: unreachable: routes[1] before it",
        path + ":18:21: " + f + "1].typed_config.routes[2].reject: must be in 400..599"}) {
    INFO(want);
    CHECK((r.out + r.err).find(want) != std::string::npos);
  }
}
