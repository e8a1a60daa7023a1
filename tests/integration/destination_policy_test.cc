// What the destination policy judges is what h2gate connects to:
// every notation of an IP address a browser or inet_aton(3) accepts is
// judged as that address (direct mode and through an h2 proxy, CONNECT and
// absolute-form); in direct mode the acl's deny ranges and reject routes
// also judge the addresses a name resolves to; the app's Host header never
// picks the origin's virtual host; request targets with control or
// non-ASCII bytes and unknown transfer codings are refused. Requests are
// written by hand (RawConnection): curl would canonicalise the hosts itself.
// [direct] [routing]
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tests/support/h2_env.h"
#include "tests/support/net.h"
#include "tests/support/scrape.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

// Notations of 127.0.0.1 (and [::127.0.0.1], which hung until the connect
// timeout): each one connected to the origin despite "deny 127.0.0.0/8".
const std::vector<std::string> kLoopbackForms{"127.0.0.1",
                                              "127.0.0.01",
                                              "127.000.000.001",
                                              "0x7f.0x0.0x0.0x1",
                                              "2130706433",
                                              "0x7f000001",
                                              "0177.0.0.1",
                                              "127.1",
                                              "0x7f.1",
                                              "127.0.0.1.",
                                              "[::ffff:127.0.0.1]",
                                              "[::ffff:7f00:1]",
                                              "[::127.0.0.1]",
                                              "[0:0:0:0:0:ffff:127.0.0.1]"};
// Notations of the cloud metadata address.
const std::vector<std::string> kMetadataForms{"169.254.169.254", "0xa9.0xfe.0xa9.0xfe",
                                              "2852039166",      "0251.0376.0251.0376",
                                              "169.254.43518",   "[::ffff:a9fe:a9fe]"};
// Not destinations at all: 400 before any rule runs.
const std::vector<std::string> kNeverForms{"0", "0.0.0.0", "0x0", "[::]", "1.2.3.256"};

const char* kAclFilter =
    "      - name: h2gate.filters.acl\n"
    "        typed_config:\n"
    "          deny:\n"
    "          - match: {cidrs: [127.0.0.0/8, \"::1\"]}\n"
    "            reason: loopback\n"
    "          - match: {cidrs: [169.254.0.0/16]}\n"
    "            reason: link-local (cloud metadata)\n";

// A listener on 127.0.0.1:0 with the access log, `filters`, and the
// forward_proxy typed_config `route` (e.g. "{}" for DIRECT).
std::string listener(const std::string& name, const std::string& filters,
                     const std::string& route) {
  return listenerYaml(name, filters +
                                "      - name: h2gate.filters.forward_proxy\n"
                                "        typed_config: " +
                                route + "\n");
}

std::string config(const std::string& listeners, const std::string& clusters = "") {
  return "admin:\n"
         "  address:\n"
         "    socket_address: {address: 127.0.0.1, port_value: 0}\n"
         "static_resources:\n"
         "  listeners:\n" +
         listeners + (clusters.empty() ? "" : "  clusters:\n" + clusters);
}

// One request on a fresh connection to `port`; the response (status 0: none
// within `timeout`).
HttpResponse ask(uint16_t port, const std::string& request,
                 milliseconds timeout = milliseconds(5000)) {
  RawConnection c(port);
  if (!c.send(request)) return {};
  return c.readResponse(timeout);
}

std::string connectTo(const std::string& host, uint16_t port) {
  const std::string authority = host + ":" + std::to_string(port);
  return "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n";
}

std::string getFrom(const std::string& host, uint16_t port, const std::string& path) {
  const std::string authority = host + ":" + std::to_string(port);
  return "GET http://" + authority + path + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n";
}

// Every form, CONNECT to `tls_port` and GET from `http_port`, through
// `proxy_port`: 403 with the rule's reason, or 400 for kNeverForms.
void checkFormsRefused(uint16_t proxy_port, uint16_t http_port, uint16_t tls_port) {
  auto check = [&](const std::string& form, int status, const std::string& body) {
    for (const bool connect : {true, false}) {
      INFO((connect ? "CONNECT " : "GET http://") << form);
      const HttpResponse r =
          ask(proxy_port, connect ? connectTo(form, tls_port) : getFrom(form, http_port, "/1k"));
      INFO(r.raw.substr(0, 600));
      CHECK(r.status == status);
      CHECK(r.body.find(body) != std::string::npos);
    }
  };
  for (const std::string& form : kLoopbackForms) check(form, 403, "denied by policy: loopback\n");
  for (const std::string& form : kMetadataForms)
    check(form, 403, "denied by policy: link-local (cloud metadata)\n");
  for (const std::string& form : kNeverForms)
    check(form, 400, form == "1.2.3.256" ? "IPv4" : "unspecified");
}

}  // namespace

TEST_CASE("direct mode: the acl judges every notation of an address as that address",
          "[direct][acl]") {
  Nginx nginx;
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  o.yaml = config(listener("acl", kAclFilter, "{}") + listener("open", "", "{}"));
  o.listeners = {"acl", "open"};
  H2gate gate(std::move(o));

  checkFormsRefused(gate.port("acl"), nginx.httpPort(), nginx.tlsPort());
  // Nothing reached the origin.
  CHECK(nginx.accessLog().empty());

  // Without the acl the same notations reach the origin, as the canonical
  // address: the access log and the tunnel say 127.0.0.1.
  const HttpResponse get = ask(gate.port("open"), getFrom("0x7f.1", nginx.httpPort(), "/1k"));
  CHECK(get.status == 200);
  CHECK(get.body.size() == 1024);
  RawConnection tunnel(gate.port("open"));
  REQUIRE(tunnel.send(connectTo("[::ffff:7f00:1]", nginx.httpPort())));
  CHECK(tunnel.readResponse(milliseconds(5000), /*head_only=*/true).status == 200);
  REQUIRE(tunnel.send(getFrom("127.0.0.1", nginx.httpPort(), "/1k")));
  CHECK(tunnel.readResponse(milliseconds(5000)).status == 200);
  tunnel.close();
  const auto log = gate.waitForAccessLog(
      2 * (kLoopbackForms.size() + kMetadataForms.size() + kNeverForms.size()) + 2);
  const std::string port = std::to_string(nginx.httpPort());
  bool saw_get = false, saw_connect = false;
  for (const auto& e : log) {
    if (e.get("listener") != "open") continue;
    INFO(e.line);
    CHECK(e.num("status") == 200);
    saw_get = saw_get || e.get("target") == "http://127.0.0.1:" + port + "/1k";
    saw_connect = saw_connect || e.get("target") == "127.0.0.1:" + port;
  }
  CHECK(saw_get);
  CHECK(saw_connect);
  CHECK(nginx.waitForAccessCount("/1k HTTP/1.1\"", 2) == 2);
}

TEST_CASE("direct mode: deny ranges and reject routes judge the resolved addresses",
          "[direct][acl]") {
  if (!haveMountNamespaces()) FAIL("needs root for a private /etc/hosts (unshare -m)");
  Nginx nginx;
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  o.yaml = config(listener("acl", kAclFilter, "{}") +
                  listener("optout",
                           std::string(kAclFilter) + "          check_resolved_addresses: false\n",
                           "{}") +
                  listener("routes", "",
                           "\n"
                           "          routes:\n"
                           "          - match: {hosts: [named.test]}\n"
                           "            direct: true\n"
                           "          - match: {cidrs: [127.0.0.0/8]}\n"
                           "            reject: 451\n"
                           "            reason: loopback by route"));
  o.listeners = {"acl", "optout", "routes"};
  o.hosts =
      "127.0.0.1 web.test named.test\n"
      "127.0.0.1 dual.test\n"
      "192.0.2.1 dual.test\n"
      "::ffff:127.0.0.1 mapped.test\n"
      "169.254.169.254 meta.test\n"
      "0.0.0.0 zero.test\n";
  H2gate gate(std::move(o));
  const uint16_t http = nginx.httpPort(), tls = nginx.tlsPort();
  const std::string p = std::to_string(http);

  // A name into a denied range: 403 naming the address, CONNECT and GET.
  HttpResponse r = ask(gate.port("acl"), getFrom("web.test", http, "/1k"));
  CHECK(r.status == 403);
  CHECK(r.body == "destination web.test:" + p + " (127.0.0.1) denied by policy: loopback\n");
  r = ask(gate.port("acl"), connectTo("web.test", tls));
  CHECK(r.status == 403);
  CHECK(r.body.find("(127.0.0.1) denied by policy: loopback") != std::string::npos);
  // An AAAA record holding an IPv4-mapped address is that IPv4 address.
  r = ask(gate.port("acl"), getFrom("mapped.test", http, "/1k"));
  CHECK(r.status == 403);
  CHECK(r.body.find("(127.0.0.1) denied by policy: loopback") != std::string::npos);
  r = ask(gate.port("acl"), connectTo("meta.test", 80));
  CHECK(r.status == 403);
  CHECK(r.body.find("(169.254.169.254) denied by policy: link-local") != std::string::npos);
  // One denied address among allowed ones refuses the name (h2gate does not
  // pick the allowed ones: 192.0.2.1 is unreachable here, that would be a
  // 502).
  r = ask(gate.port("acl"), getFrom("dual.test", http, "/1k"));
  CHECK(r.status == 403);
  CHECK(r.body.find("(127.0.0.1) denied by policy: loopback") != std::string::npos);
  // A name that resolves to 0.0.0.0 (as DNS blockers answer) is not
  // connected to: it would reach this host.
  r = ask(gate.port("acl"), getFrom("zero.test", http, "/1k"));
  CHECK(r.status == 502);
  CHECK(r.body.find("resolves only to the unspecified address 0.0.0.0") != std::string::npos);
  r = ask(gate.port("routes"), connectTo("zero.test", http));
  CHECK(r.status == 502);

  // A reject route on a range catches the names that resolve into it, and a
  // rule that names the host first is the exception.
  r = ask(gate.port("routes"), getFrom("web.test", http, "/1k"));
  CHECK(r.status == 451);
  CHECK(r.body == "loopback by route (web.test resolves to 127.0.0.1)\n");
  CHECK(nginx.accessLog().empty());
  r = ask(gate.port("routes"), getFrom("named.test", http, "/1k"));
  CHECK(r.status == 200);
  // check_resolved_addresses: false: names are judged as written only.
  r = ask(gate.port("optout"), getFrom("web.test", http, "/1k"));
  CHECK(r.status == 200);
  CHECK(r.body.size() == 1024);
  r = ask(gate.port("optout"), getFrom("127.1", http, "/1k"));
  CHECK(r.status == 403);
  CHECK(nginx.waitForAccessCount("GET /1k", 2) == 2);

  const Scrape m = scrapeMetrics(gate.adminPort());
  CHECK(m.sum("h2gate_requests_finished_total", {{"result", "rejected"}}) == 7);
}

TEST_CASE("through an h2 proxy: the acl judges the canonical address, the proxy gets it",
          "[routing][acl]") {
  H2Env env;
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  o.yaml = config(
      listener("acl", kAclFilter, "{cluster: proxy}") + listener("open", "", "{cluster: proxy}"),
      clusterYaml("proxy", {env.nghttpx.port()}, env.ca.caCertPath()));
  o.listeners = {"acl", "open"};
  o.args = {"--log-level", "debug"};
  H2gate gate(std::move(o));
  REQUIRE(gate.process().waitForLog("negotiated h2", milliseconds(10000)));

  checkFormsRefused(gate.port("acl"), env.nginx.httpPort(), env.nginx.tlsPort());
  CHECK(env.nghttpx.accessLog().empty());  // none reached the proxy

  // Allowed, the notation reaches the proxy as the canonical address: squid
  // (behind nghttpx) logs what it was asked for.
  const uint16_t http = env.nginx.httpPort();
  const HttpResponse get = ask(gate.port("open"), getFrom("0x7f.1", http, "/1k?canon"));
  CHECK(get.status == 200);
  CHECK(get.body.size() == 1024);
  RawConnection tunnel(gate.port("open"));
  REQUIRE(tunnel.send(connectTo("[::ffff:7f00:1]", http)));
  CHECK(tunnel.readResponse(milliseconds(10000), /*head_only=*/true).status == 200);
  REQUIRE(tunnel.send(getFrom("127.0.0.1", http, "/1k?tunnel")));
  CHECK(tunnel.readResponse(milliseconds(10000)).status == 200);
  tunnel.close();
  // Squid logs a tunnel when it ends, and the URL without its query.
  env.squid.waitForAccessLines(1, "CONNECT", milliseconds(15000));
  const std::string squid = env.squid.accessLog();
  INFO(squid);
  CHECK(squid.find(" GET http://127.0.0.1:" + str(http) + "/1k? 200 ") != std::string::npos);
  CHECK(squid.find(" CONNECT 127.0.0.1:" + str(http) + " 200 ") != std::string::npos);
  CHECK(squid.find("0x7f") == std::string::npos);
  CHECK(squid.find("ffff") == std::string::npos);
}

TEST_CASE("direct mode: the origin sees the target's authority as Host, not the app's",
          "[direct][host]") {
  Nginx::Options n;
  n.virtual_hosts = {"secret.internal"};
  Nginx nginx(n);
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  H2gate gate(std::move(o));
  const std::string origin = "127.0.0.1:" + std::to_string(nginx.httpPort());

  // The fixture: asked directly, nginx picks the virtual host by Host.
  const CommandResult direct =
      runCurl({"-sS", "-H", "Host: secret.internal", "http://" + origin + "/headers"});
  REQUIRE(direct.exit_code == 0);
  REQUIRE(direct.out == "virtual host secret.internal\n");

  // Through h2gate (curl sends its -H Host on): the default server answers,
  // and it saw the URL's authority.
  const CommandResult via = runCurl({"-sS", "-x", gate.proxyUrl(), "-H", "Host: secret.internal",
                                     "http://" + origin + "/headers"});
  INFO(via.err);
  REQUIRE(via.exit_code == 0);
  CHECK(via.out.find("virtual host") == std::string::npos);
  CHECK(via.out.find("host=" + origin + "\n") != std::string::npos);

  // Two Host headers, neither the target's: one Host goes out, the target's
  // (nginx answers two with 400 "client sent duplicate host header").
  const HttpResponse r = ask(gate.port(), "GET http://" + origin +
                                              "/headers HTTP/1.1\r\nHost: secret.internal\r\n"
                                              "Host: secret.internal\r\n\r\n");
  CHECK(r.status == 200);
  CHECK(r.body.find("host=" + origin + "\n") != std::string::npos);
  CHECK(r.body.find("virtual host") == std::string::npos);
}

TEST_CASE("direct mode: control or non-ASCII bytes in the target give 400, unknown codings 501",
          "[direct][bad]") {
  Nginx nginx;
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  H2gate gate(std::move(o));
  const std::string origin = "127.0.0.1:" + std::to_string(nginx.httpPort());
  for (const std::string& bad :
       {std::string("/a\tb"), std::string("/a\fb"), std::string("/caf\xc3\xa9"),
        std::string("/\x80"), std::string("/\xff")}) {
    INFO(bad);
    const HttpResponse r = ask(
        gate.port(), "GET http://" + origin + bad + " HTTP/1.1\r\nHost: " + origin + "\r\n\r\n");
    CHECK(r.status == 400);
    CHECK(r.body.find("request target contains the byte 0x") != std::string::npos);
  }
  const HttpResponse te =
      ask(gate.port(), "POST http://" + origin + "/upload HTTP/1.1\r\nHost: " + origin +
                           "\r\nTransfer-Encoding: xchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
  CHECK(te.status == 501);
  CHECK(te.body ==
        "unsupported transfer coding 'xchunked' (h2gate decodes only chunked request "
        "bodies)\n");
  CHECK(nginx.accessLog().empty());
  // Percent-encoded, the same bytes are fine.
  CHECK(ask(gate.port(),
            "GET http://" + origin + "/1k?q=a%09b%C3%A9 HTTP/1.1\r\nHost: " + origin + "\r\n\r\n")
            .status == 200);
}
