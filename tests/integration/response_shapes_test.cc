// The response-shape matrix: every request kind (CONNECT, absolute-form GET,
// HEAD, POST with a body) x every response shape (a body with
// Content-Length, Content-Length: 0, chunked, chunked with no data, 204, 304,
// 1xx before the final answer, Connection: close, a close-delimited body, the
// proxy's own 407 and 502 with and without a body) x every path a request
// can take (direct, squid as a plain and as a TLS HTTP/1.1 proxy, nghttpx as
// an h2 proxy, a proxy a PAC file names, one that also wants Basic
// credentials for every request (h2gate learns the scheme from its first
// 407: pac.proxies.proxy_authentication {scheme: auto}), and an HTTP/1.1
// proxy that sends each shape itself: tests/support/shape_server.py).
//
// Each cell sends three requests. Every one must get the status and bytes
// that curl gets from the same server without h2gate (the reference, run
// first: it also proves the fixtures), and after the cell the cluster must
// hold no more connections than it should, with no stream or request left
// in it. Clusters allow two connections: a kept-alive connection that is
// not freed after a response shape shows as the third request's 503.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/h2_env.h"
#include "tests/support/net.h"
#include "tests/support/scrape.h"
#include "tests/support/shape_server.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

enum class Kind { Get, Head, Post, Connect };

const char* kindName(Kind k) {
  switch (k) {
    case Kind::Get:
      return "GET";
    case Kind::Head:
      return "HEAD";
    case Kind::Post:
      return "POST";
    case Kind::Connect:
      return "CONNECT";
  }
  return "?";
}

struct Shape {
  std::string name;                  // shape_server.py's name for it
  std::string nginx;                 // nginx's location serving it ("" = the shape server)
  bool proxy_answer = false;         // the proxy's own answer, not the origin's
  bool closes = false;               // its server closes the connection after it
  std::vector<std::string> headers;  // request headers it needs
};

// The origin's shapes, then the proxy's own answers.
const std::vector<Shape>& shapes() {
  auto shape = [](std::string name, std::string nginx, bool proxy_answer = false,
                  bool closes = false, std::vector<std::string> headers = {}) {
    return Shape{std::move(name), std::move(nginx), proxy_answer, closes, std::move(headers)};
  };
  static const std::vector<Shape> all = {
      shape("cl", "/n/1k"),
      shape("cl0", "/n/empty"),
      shape("chunked", "/c/1k"),
      shape("chunked0", ""),
      shape("204", "/n/204"),
      shape("304", "/n/1k", false, false, {"If-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT"}),
      shape("1xx", ""),
      shape("close", "", false, true),
      shape("eof", "", false, true),
      shape("407", "", true),
      shape("407-empty", "", true),
      shape("407-chunked", "", true),
      shape("407-close", "", true, true),
      shape("502", "", true),
      shape("502-empty", "", true),
  };
  return all;
}

struct Path {
  std::string listener;      // h2gate's listener for it
  std::string cluster;       // its metrics label ("" = direct)
  bool h1 = false;           // HTTP/1.1 to the proxy: connections are reused
  bool shape_proxy = false;  // the shape server is the proxy
  bool auth = false;         // the proxy wants credentials (squid_auth)
};

// One answer as curl saw it.
struct Got {
  int exit_code = -1;
  int status = 0;  // the final status (for a CONNECT the proxy refused: its answer)
  uint64_t size = 0;
  std::string sha;
  std::string title;  // an HTML body's <title>
  std::string err;
};

struct World {
  World()
      : nginx(nginxOptions(ca)),
        squid(squidOptions(ca, false)),
        squid_back(squidOptions(ca, true)),
        squid_auth(squidAuthOptions()),
        nghttpx(nghttpxOptions(ca, squid_back.httpPort())) {}

  static Nginx::Options nginxOptions(TestCA& ca) {
    Nginx::Options n;
    n.ca = &ca;
    n.with_sink = false;
    // /n/: the files as they are (Content-Length; 304 to a later
    // If-Modified-Since); /c/: the same files chunked (sub_filter drops the
    // length); /n/204.
    n.extra_server_config = "location /n/ { alias " + testDataDir() +
                            "/; if_modified_since before; }\n"
                            "location = /n/204 { return 204; }\n"
                            "location /c/ { alias " +
                            testDataDir() +
                            "/; sub_filter_types *; sub_filter 'h2gate-no-such-text' ''; }\n";
    return n;
  }
  // `behind_nghttpx`: nghttpx's backend. squid (5.7; 6.13 on Debian 13)
  // leaves a kept-alive connection stuck after an error answer to a request
  // body (h2gate does not reuse such a connection: Http1Exchange::Release),
  // and nghttpx (1.52; 1.64 on Debian 13) reuses its backend connections:
  // that squid closes after each answer.
  static Squid::Options squidOptions(TestCA& ca, bool behind_nghttpx) {
    Squid::Options s;
    s.ca = &ca;
    s.https = !behind_nghttpx;
    s.auth = true;  // 407 for auth.test only
    s.auth_domain = "auth.test";
    s.hosts = {"x.auth.test"};
    if (behind_nghttpx) s.extra_config = "client_persistent_connections off\n";
    return s;
  }
  // The PAC-named proxy that wants Basic credentials for every request.
  static Squid::Options squidAuthOptions() {
    Squid::Options s;
    s.auth = true;
    s.hosts = {"x.auth.test"};
    return s;
  }
  // curl's --proxy-user for squid_auth (the references on that path).
  std::string proxyUser() const { return squid_auth_user + ":" + squid_auth_password; }
  static Nghttpx::Options nghttpxOptions(TestCA& ca, uint16_t backend) {
    Nghttpx::Options n;
    n.ca = &ca;
    n.backend_port = backend;
    return n;
  }

  std::string clusterYaml(const std::string& name, uint16_t port, bool tls) const {
    std::string y = "  - name: " + name +
                    "\n"
                    "    circuit_breakers: {thresholds: [{max_connections: 2}]}\n"
                    "    load_assignment:\n"
                    "      endpoints:\n"
                    "      - lb_endpoints:\n"
                    "        - endpoint: {address: {socket_address: {address: 127.0.0.1, "
                    "port_value: " +
                    str(port) + "}}}\n";
    if (tls)
      y += "    transport_socket:\n"
           "      name: envoy.transport_sockets.tls\n"
           "      typed_config:\n"
           "        common_tls_context:\n"
           "          alpn_protocols: [h2, http/1.1]\n"
           "          validation_context: {trusted_ca: {filename: " +
           ca.caCertPath() + "}}\n";
    return y;
  }

  void startGate() {
    auto pacFor = [&](const std::string& name, uint16_t port) {
      return work.write(name, "function FindProxyForURL(url, host) { return \"PROXY 127.0.0.1:" +
                                  str(port) + "\"; }\n");
    };
    const std::string pac = pacFor("proxy.pac", squid.httpPort());
    const std::string pac_auth = pacFor("proxy-auth.pac", squid_auth.httpPort());
    const std::string password = work.write("squid-auth.password", squid_auth_password + "\n");
    auto toCluster = [](const std::string& c) {
      return "      - name: h2gate.filters.forward_proxy\n        typed_config: {cluster: " + c +
             "}\n";
    };
    std::string y =
        "h2gate: {concurrency: 1}\n"
        "admin:\n"
        "  address:\n"
        "    socket_address: {address: 127.0.0.1, port_value: 0}\n"
        "static_resources:\n"
        "  listeners:\n";
    y += listenerYaml("direct", "      - name: h2gate.filters.forward_proxy\n");
    y += listenerYaml("squid", toCluster("squid"));
    y += listenerYaml("squid_tls", toCluster("squid_tls"));
    y += listenerYaml("nghttpx", toCluster("nghttpx"));
    y += listenerYaml("shapes", toCluster("shapes"));
    // A forward_proxy whose one route follows `file`, its proxies as `proxies`
    // says (YAML lines under "proxies:").
    auto pacRoute = [](const std::string& file, const std::string& proxies) {
      return "      - name: h2gate.filters.forward_proxy\n"
             "        typed_config:\n"
             "          routes:\n"
             "          - match: {}\n"
             "            pac:\n"
             "              file: " +
             file + "\n              proxies:" + proxies;
    };
    y += listenerYaml("pac", pacRoute(pac, " {max_connections: 2}\n"));
    y += listenerYaml("pac_auth",
                      pacRoute(pac_auth,
                               "\n"
                               "                max_connections: 2\n"
                               "                proxy_authentication:\n"
                               "                  scheme: auto\n"
                               "                  credentials: {username: " +
                                   squid_auth_user + ", password_file: {filename: " + password +
                                   "}}\n"
                                   "                authenticate_to: [127.0.0.1]\n"));
    y += "  clusters:\n";
    y += clusterYaml("squid", squid.httpPort(), false);
    y += clusterYaml("squid_tls", squid.httpsPort(), true);
    y += clusterYaml("nghttpx", nghttpx.port(), true);
    y += clusterYaml("shapes", shapes_server.port(), false);
    H2gate::Options o;
    o.binary = H2GATE_BINARY;
    o.yaml = y;
    o.args = {"--log-level", "debug"};
    o.listeners = {"direct", "squid", "squid_tls", "nghttpx", "shapes", "pac", "pac_auth"};
    gate = std::make_unique<H2gate>(std::move(o));
    INFO(gate->process().logTail());
    REQUIRE(gate->process().waitForLog(
        "proxy 127\\.0\\.0\\.1:" + str(nghttpx.port()) + " negotiated h2", milliseconds(10000)));
  }

  // The URL a cell asks for on `path`. `cell` makes it unique (the query).
  std::string url(const Path& path, Kind kind, const Shape& s, const std::string& cell) const {
    const std::string q = "?c=" + cell;
    if (path.shape_proxy) {
      // The shape proxy answers a CONNECT by its target's first label.
      if (kind == Kind::Connect)
        return "http://" + std::string(s.proxy_answer ? s.name : "ok") + ".shape.test:80/s/" +
               (s.proxy_answer ? "cl" : s.name) + q;
      return "http://origin.shape.test/s/" + s.name + q;
    }
    if (s.name == "407")  // squid wants credentials for auth.test
      return "http://x.auth.test:" + str(nginx.httpPort()) + "/n/1k" + q;
    if (s.name == "502")  // a broken head from the origin: squid answers 502
      return kind == Kind::Connect ? "http://127.0.0.1:" + str(closed_port) + "/" + q
                                   : shapes_server.url("badlength") + q;
    if (!s.nginx.empty() && kind != Kind::Post)
      return "http://127.0.0.1:" + str(nginx.httpPort()) + s.nginx + q;
    return shapes_server.url(s.name) + q;
  }

  // `times` requests for `url` through `proxy` ("" = none): one curl and
  // one app connection for GET, HEAD and POST (a curl each with
  // `separately`), a curl and a tunnel each for CONNECT (curl -p).
  // `proxy_user`: curl's --proxy-user (Basic) for `proxy`.
  std::vector<Got> fetch(const std::string& proxy, Kind kind, const std::string& url,
                         const Shape& s, int times, const std::string& tag, bool separately = false,
                         const std::string& proxy_user = "") {
    if (separately && times > 1) {
      std::vector<Got> out;
      for (int i = 0; i < times; ++i)
        out.push_back(fetch(proxy, kind, url, s, 1, tag + "." + str(static_cast<uint64_t>(i)),
                            false, proxy_user)[0]);
      return out;
    }
    std::vector<Got> out;
    std::vector<std::string> common{"-sS", "--max-time", "20"};
    if (!proxy.empty()) common.insert(common.end(), {"-x", proxy});
    if (!proxy_user.empty()) common.insert(common.end(), {"--proxy-user", proxy_user});
    for (const auto& h : s.headers) common.insert(common.end(), {"-H", h});
    if (kind == Kind::Head) common.push_back("--head");
    if (kind == Kind::Post)
      common.insert(common.end(), {"--data-binary", "@" + post_body.path, "-H",
                                   "Content-Type: application/octet-stream"});
    auto parse = [&](const std::string& line, const std::string& file, Got& g) {
      std::istringstream in(line);
      int connect_code = 0;
      in >> connect_code >> g.status >> g.size;
      if (kind == Kind::Connect && connect_code != 200 && connect_code != 0)
        g.status = connect_code;
      if (kind == Kind::Head) return;
      g.sha = sha256File(file);
      const std::string body = readFile(file);
      const size_t open = body.find("<title>"), close = body.find("</title>");
      if (open != std::string::npos && close != std::string::npos && close > open)
        g.title = body.substr(open + 7, close - open - 7);
    };
    const std::string fmt = "%{http_connect} %{http_code} %{size_download}\\n";
    if (kind == Kind::Connect && !proxy.empty()) {
      for (int i = 0; i < times; ++i) {
        const std::string file = out_dir.file(tag + "." + str(i));
        std::vector<std::string> args = common;
        args.insert(args.end(), {"-p", "-w", fmt, "-o", file, url});
        CommandResult r = runCurl(args, milliseconds(25000));
        Got g;
        g.exit_code = r.exit_code;
        g.err = r.err;
        parse(r.out, file, g);
        out.push_back(g);
      }
      return out;
    }
    std::vector<std::string> args = common;
    args.insert(args.end(), {"-w", fmt});
    for (int i = 0; i < times; ++i)
      args.insert(args.end(), {"-o", out_dir.file(tag + "." + str(i)), url});
    CommandResult r = runCurl(args, milliseconds(70000));
    std::istringstream lines(r.out);
    for (int i = 0; i < times; ++i) {
      Got g;
      g.exit_code = r.exit_code;
      g.err = r.err;
      std::string line;
      if (std::getline(lines, line)) parse(line, out_dir.file(tag + "." + str(i)), g);
      out.push_back(g);
    }
    return out;
  }

  // Connections, streams and waiting requests of a cluster, from /metrics.
  struct Pool {
    double connections = 0, streams = 0, waiting = 0;
  };
  Pool pool(const std::string& cluster) {
    Scrape s = scrapeMetrics(gate->adminPort());
    Pool p;
    p.connections = s.sum("h2gate_upstream_connections_active", {{"cluster", cluster}});
    p.streams = s.sum("h2gate_upstream_streams_active", {{"cluster", cluster}});
    p.waiting = s.sum("h2gate_upstream_pool_waiting", {{"cluster", cluster}});
    return p;
  }

  TempDir work{"shapes"};
  TestCA ca{work.path().string()};
  Nginx nginx;
  Squid squid;       // the HTTP/1.1 paths' proxy
  Squid squid_back;  // nghttpx's backend
  Squid squid_auth;  // the PAC-named proxy that wants credentials
  const std::string squid_auth_user = "alice", squid_auth_password = "s3cret";
  Nghttpx nghttpx;
  ShapeServer shapes_server;
  uint16_t closed_port = freePort();  // nothing listens there
  const SizedFile& post_body = sizedTestFile("post-100k", 100 * 1024);
  TempDir out_dir{"shapes-out"};
  std::unique_ptr<H2gate> gate;
};

std::string describe(const Got& g) {
  return "exit " + str(static_cast<uint64_t>(g.exit_code < 0 ? 999 : g.exit_code)) + " status " +
         str(static_cast<uint64_t>(g.status)) + " bytes " + str(g.size) +
         (g.err.empty() ? "" : " (" + g.err.substr(0, 200) + ")");
}

}  // namespace

TEST_CASE(
    "response shapes: every request kind x response shape x path is served, and the pool "
    "stays free",
    "[shapes]") {
  sizedTestFile("empty", 0);
  testFile("1k");
  World w;
  w.startGate();
  H2gate& gate = *w.gate;

  std::vector<Path> paths = {
      {"direct", "", false, false},
      {"squid", "squid", true, false},
      {"squid_tls", "squid_tls", true, false},
      {"nghttpx", "nghttpx", false, false},
      {"pac", "PROXY 127.0.0.1:" + str(w.squid.httpPort()), true, false},
      {"pac_auth", "PROXY 127.0.0.1:" + str(w.squid_auth.httpPort()), true, false, true},
      {"shapes", "shapes", true, true},
  };
  // H2GATE_SHAPES_PATHS=squid,pac: only those paths (to look at one).
  if (const char* only = std::getenv("H2GATE_SHAPES_PATHS"); only && *only)
    std::erase_if(paths, [&](const Path& p) {
      return ("," + std::string(only) + ",").find("," + p.listener + ",") == std::string::npos;
    });
  const std::vector<Kind> kinds = {Kind::Get, Kind::Head, Kind::Post, Kind::Connect};
  constexpr int kTimes = 3;  // one more than the clusters' max_connections

  std::map<std::string, Got> references;  // by reference URL + kind
  std::vector<std::string> failures;
  std::ostringstream table;
  int cells = 0;
  for (const Path& path : paths) {
    for (Kind kind : kinds) {
      for (const Shape& s : shapes()) {
        // The proxy's answers need a proxy; squid's family gives only its
        // own 407 and 502 (with bodies): the other framings come from the
        // shape proxy.
        if (s.proxy_answer && path.listener == "direct") continue;
        if (s.proxy_answer && !path.shape_proxy && s.name != "407" && s.name != "502") continue;
        const std::string cell = path.listener + "-" + kindName(kind) + "-" + s.name;
        const std::string url = w.url(path, kind, s, cell);
        ++cells;

        // The reference: the same request without h2gate, from the server
        // that answers it (the origin; for the proxy's answers the proxy).
        // A CONNECT's reference is what the origin says inside the tunnel.
        // On the authenticating path the references go through that proxy,
        // with curl's own credentials: h2gate's must give the same answers.
        std::string ref_proxy;
        if (path.auth)
          ref_proxy = "http://127.0.0.1:" + str(w.squid_auth.httpPort());
        else if (s.proxy_answer)
          ref_proxy = path.shape_proxy ? "http://127.0.0.1:" + str(w.shapes_server.port())
                                       : "http://127.0.0.1:" + str(w.squid.httpPort());
        else if (path.shape_proxy)
          ref_proxy = "http://127.0.0.1:" + str(w.shapes_server.port());
        const Kind ref_kind = kind == Kind::Connect && ref_proxy.empty() ? Kind::Get : kind;
        // One connection per request: squid 5.7 leaves a kept-alive
        // connection stuck after an error answer to a request body (h2gate
        // does not reuse such a connection: Http1Exchange::Release).
        const std::vector<Got> refs = w.fetch(ref_proxy, ref_kind, url, s, kTimes, cell + ".ref",
                                              /*separately=*/true, path.auth ? w.proxyUser() : "");

        const std::vector<Got> got =
            w.fetch(gate.proxyUrl(path.listener), kind, url, s, kTimes, cell);
        // squid's 407 for auth.test is no answer of the proxy's where
        // h2gate (and the reference) have the credentials: the origin's.
        const bool proxy_answer = s.proxy_answer && !(path.auth && s.name == "407");
        std::string result = "ok";
        for (int i = 0; i < kTimes; ++i) {
          const Got& g = got[static_cast<size_t>(i)];
          const Got& ref = refs[static_cast<size_t>(i)];
          const bool refused_connect = kind == Kind::Connect && proxy_answer;
          const bool exit_ok = g.exit_code == 0 || (refused_connect && g.exit_code == 56);
          // squid's error pages carry the time and the request (in a
          // mailto link): their title says which page it is.
          const bool same_bytes = kind == Kind::Head || refused_connect ? g.size == ref.size
                                  : proxy_answer && !path.shape_proxy
                                      ? !g.title.empty() && g.title == ref.title
                                      : g.sha == ref.sha;
          if (!exit_ok || g.status != ref.status || g.status == 0 || !same_bytes) {
            result = "request " + str(static_cast<uint64_t>(i + 1)) + ": " + describe(g) +
                     ", expected status " + str(static_cast<uint64_t>(ref.status)) + " bytes " +
                     str(ref.size) + (same_bytes ? "" : " (other bytes)");
            break;
          }
        }
        // The pool afterwards: nothing in flight, at most one connection
        // (an idle kept-alive one, or h2's shared one; over HTTP/1.1 each
        // refused CONNECT leaves its own kept-alive one, up to the
        // cluster's max_connections, since a CONNECT never takes an idle
        // connection). A tunnel's
        // connection closes just after its app does (up to the listener's
        // tunnel_half_close_timeout, 1 s, later): allow it that, and a
        // loaded machine's delay.
        if (result == "ok" && !path.cluster.empty()) {
          const double max_conns = path.h1 && kind == Kind::Connect ? 2 : 1;
          World::Pool p;
          const auto deadline = Clock::now() + milliseconds(10000);
          do {
            p = w.pool(path.cluster);
            if (p.connections <= max_conns && p.streams == 0 && p.waiting == 0) break;
            std::this_thread::sleep_for(milliseconds(50));
          } while (Clock::now() < deadline);
          if (p.connections > max_conns || p.streams != 0 || p.waiting != 0)
            result = "pool holds " + std::to_string(p.connections) + " connections, " +
                     std::to_string(p.streams) + " streams, " + std::to_string(p.waiting) +
                     " waiting";
        }
        // The shape proxy sees each connection: a kept-alive one carries
        // all three requests, one closed after its answer only one.
        if (result == "ok" && path.shape_proxy && kind != Kind::Connect) {
          std::set<std::string> clients;
          for (const auto& r : w.shapes_server.requests())
            if (r.count("target") && r.at("target").find("?c=" + cell) != std::string::npos &&
                r.count("tunnel") && r.at("tunnel") == "false")
              clients.insert(r.at("client"));
          // Plus the references, one connection each.
          // h2gate closes one after an error answer to a request body
          // (Http1Exchange::Release).
          const bool closes = (s.closes && !(s.name == "eof" && kind == Kind::Head)) ||
                              (kind == Kind::Post && s.proxy_answer);
          const size_t want = (closes ? kTimes : 1) + kTimes;
          if (clients.size() != want)
            result = "the proxy saw " + str(clients.size()) + " connections for the cell, not " +
                     str(want) + (closes ? " (one per request)" : " (one kept alive)");
        }
        table << "  " << cell << ": " << result << "\n";
        if (result != "ok") failures.push_back(cell + ": " + result);
      }
    }
  }
  std::cout << "response shapes: " << cells << " cells, " << failures.size() << " failed\n"
            << table.str();
  INFO(gate.process().logTail(40));
  auto tail = [](const std::string& text) {
    return text.size() > 4000 ? text.substr(text.size() - 4000) : text;
  };
  INFO("squid cache.log:\n" << tail(w.squid.cacheLog()));
  INFO("nghttpx error log:\n" << tail(w.nghttpx.errorLog()));
  INFO(w.shapes_server.logText().substr(0, 4000));
  std::string all;
  for (const auto& f : failures) all += f + "\n";
  INFO(all);
  CHECK(failures.empty());
  if (paths.size() == 7) CHECK(cells > 230);
}

TEST_CASE(
    "response shapes: a kept-alive proxy connection closed as a request arrives: the request "
    "goes again on a new one",
    "[shapes]") {
  // The shape proxy answers /s/dropnext and keeps the connection, then
  // closes it as the next request arrives, unanswered: what a proxy closing
  // an idle connection does when the close crosses a client's request.
  ShapeServer proxy;
  TempDir out("shapes-drop");
  const std::string proxy_url = "http://127.0.0.1:" + str(proxy.port());
  const std::string first = "http://origin.shape.test/s/dropnext";
  const std::string second = "http://origin.shape.test/s/cl";
  auto dropped = [&] {
    size_t n = 0;
    for (const auto& r : proxy.requests())
      if (r.count("shape") && r.at("shape") == "dropped") ++n;
    return n;
  };
  // curl first: it sends the second request again on a new connection.
  CommandResult c = runCurl({"-sS", "-x", proxy_url, "-w", "%{http_code} ", "-o", out.file("c1"),
                             first, "-o", out.file("c2"), second});
  INFO(c.err << proxy.logText());
  REQUIRE(c.exit_code == 0);
  REQUIRE(c.out == "200 200 ");
  REQUIRE(dropped() == 1);

  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  o.yaml = directModeYaml() +
           "        typed_config: {cluster: shapes}\n"
           "  clusters:\n"
           "  - name: shapes\n"
           "    load_assignment:\n"
           "      endpoints:\n"
           "      - lb_endpoints:\n"
           "        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: " +
           str(proxy.port()) + "}}}\n";
  o.args = {"--log-level", "debug"};
  H2gate gate(std::move(o));
  INFO(gate.process().logTail(30));
  // Three rounds on one app connection: each second request meets the
  // dropped connection and goes again.
  std::vector<std::string> args{"-sS", "-x", gate.proxyUrl(), "-w", "%{http_code} "};
  for (int i = 0; i < 3; ++i)
    args.insert(args.end(), {"-o", out.file("a" + str(static_cast<uint64_t>(i))), first, "-o",
                             out.file("b" + str(static_cast<uint64_t>(i))), second});
  CommandResult r = runCurl(args);
  INFO(r.err << proxy.logText());
  CHECK(r.exit_code == 0);
  CHECK(r.out == "200 200 200 200 200 200 ");
  CHECK(readFile(out.file("b2")) == readFile(out.file("c2")));
  CHECK(dropped() == 4);
  CHECK(
      gate.process().waitForLog("the request goes again on a new connection", milliseconds(2000)));
  const Scrape s = scrapeMetrics(gate.adminPort());
  CHECK(s.sum("h2gate_upstream_http1_connections_closed_total",
              {{"cluster", "shapes"}, {"reason", "proxy_closed_idle"}}) == 3);

  // A request whose body went out cannot be sent again (the app's bytes are
  // gone): it gets 502 saying why, and the next request is served.
  const std::string body = out.write("body", std::string(1000, 'x'));
  CommandResult p =
      runCurl({"-sS", "-x", gate.proxyUrl(), "-w", "%{http_code} ", "-o", out.file("p1"), first,
               "--next", "-sS", "-x", gate.proxyUrl(), "-w", "%{http_code} ", "-o", out.file("p2"),
               "--data-binary", "@" + body, second});
  INFO(p.err);
  CHECK(p.out == "200 502 ");
  CHECK(readFile(out.file("p2")).find("closed the connection without sending a response") !=
        std::string::npos);
  CommandResult after = runCurl(
      {"-sS", "-x", gate.proxyUrl(), "-w", "%{http_code}", "-o", out.file("after"), second});
  CHECK(after.out == "200");
}
