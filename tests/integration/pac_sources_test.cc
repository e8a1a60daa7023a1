// WPAD by DNS for real: in a mount and network namespace of its own (its
// own /etc/hosts and /etc/resolv.conf with search domains, only loopback),
// nginx answers on 127.0.0.1:80 for several wpad.* names as virtual hosts,
// and h2gate's PAC source (tests/tools/pac_probe.cc) must find the nearest
// one, fall back up the domain, and never ask beyond the registrable
// domain. nginx is first proven with curl in the same namespace.
// [pac][wpad]
//
// And myIpAddress()/myIpAddressEx() from the system resolver in a network
// namespace with a veth pair: the default routes' source addresses, the
// interfaces' without routes, 127.0.0.1 with loopback only. [pac][myip]
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tests/support/h2gate.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t nl = text.find('\n', start);
    out.push_back(text.substr(start, nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

bool haveNamespaces() {
  return runCommand({"unshare", "-m", "-n", "true"}, milliseconds(5000)).exit_code == 0;
}

struct Wpad {
  std::string name;    // the virtual host, e.g. wpad.corp.example.test
  std::string answer;  // what its wpad.dat returns, "" for a 404
};

struct Outcome {
  int exit_code = -1;
  std::string curl;    // what curl got from the first virtual host
  std::string probe;   // pac_probe's output
  std::string access;  // nginx: "$host $request $status" per line, readiness checks left out
  std::string err;
};

// Runs nginx with `servers` and `pac_probe source wpad` in a fresh namespace
// whose resolv.conf says `search`.
Outcome runWpad(const std::string& search, const std::vector<Wpad>& servers) {
  TempDir dir("pac-wpad");
  std::string hosts = "127.0.0.1 localhost\n";
  std::string conf = std::string(geteuid() == 0 ? "user root root;\n" : "") +
                     "daemon off;\n"
                     "pid " +
                     dir.file("nginx.pid") +
                     ";\n"
                     "error_log " +
                     dir.file("error.log") +
                     ";\n"
                     "events {}\n"
                     "http {\n"
                     "  log_format hosts '$host $request $status';\n"
                     "  access_log " +
                     dir.file("access.log") +
                     " hosts;\n"
                     "  client_body_temp_path " +
                     dir.file("tmp") +
                     ";\n"
                     "  proxy_temp_path " +
                     dir.file("tmp") +
                     ";\n"
                     "  fastcgi_temp_path " +
                     dir.file("tmp") +
                     ";\n"
                     "  uwsgi_temp_path " +
                     dir.file("tmp") +
                     ";\n"
                     "  scgi_temp_path " +
                     dir.file("tmp") +
                     ";\n"
                     "  server { listen 127.0.0.1:80 default_server; return 404; }\n";
  for (const Wpad& w : servers) {
    hosts += "127.0.0.1 " + w.name + "\n";
    conf += "  server {\n    listen 127.0.0.1:80;\n    server_name " + w.name + ";\n";
    if (!w.answer.empty())
      conf +=
          "    location = /wpad.dat { default_type application/x-ns-proxy-autoconfig; "
          "return 200 'function FindProxyForURL(url, host) { return \"" +
          w.answer + "\"; }'; }\n";
    conf += "    location / { return 404; }\n  }\n";
  }
  conf += "}\n";
  dir.write("hosts", hosts);
  dir.write("resolv.conf",
            "nameserver 127.0.0.1\noptions timeout:1 attempts:1\nsearch " + search + "\n");
  dir.write("nginx.conf", conf);
  const std::string first = servers.empty() ? "localhost" : servers.front().name;
  const std::string script = dir.write("run.sh", R"SH(#!/bin/sh
set -e
ip link set lo up
mount --bind "$D/hosts" /etc/hosts
mount --bind "$D/resolv.conf" /etc/resolv.conf
mkdir -p "$D/tmp"
nginx -p "$D" -c "$D/nginx.conf" &
NGINX=$!
i=0
until curl -s -o /dev/null http://127.0.0.1/; do
  i=$((i + 1)); [ $i -lt 200 ] || exit 3; sleep 0.05
done
curl -s "http://$FIRST/wpad.dat" > "$D/curl.out" || true
"$PROBE" source wpad --query "https://www.example.com/ www.example.com" > "$D/probe.out" 2> "$D/probe.err" && rc=0 || rc=$?
kill $NGINX
wait $NGINX || true
exit $rc
)SH");
  CommandResult r = runCommand(
      {"env", "D=" + dir.path().string(), "FIRST=" + first,
       "PROBE=" + H2gate::pacProbePath(H2GATE_PAC_PROBE), "unshare", "-m", "-n", "sh", script},
      milliseconds(60000));
  Outcome o;
  o.exit_code = r.exit_code;
  o.curl = readFile(dir.file("curl.out"));
  o.probe = readFile(dir.file("probe.out"));
  // Without the script's readiness checks ("127.0.0.1 GET / ...").
  for (const std::string& line : lines(readFile(dir.file("access.log"))))
    if (!line.starts_with("127.0.0.1 ")) o.access += line + "\n";
  o.err = r.err + readFile(dir.file("probe.err")) + readFile(dir.file("error.log"));
  return o;
}

std::string pacText(const std::string& answer) {
  return "function FindProxyForURL(url, host) { return \"" + answer + "\"; }";
}

}  // namespace

TEST_CASE("pac wpad: the nearest wpad.<domain> up the search domains wins", "[pac][wpad]") {
  if (!haveNamespaces()) FAIL("needs root for mount and network namespaces (unshare -m -n)");
  // wpad.a.b... and wpad.b... do not resolve; wpad.corp... does and answers.
  const Outcome o =
      runWpad("a.b.corp.example.test", {{"wpad.corp.example.test", "PROXY corp-level:8080"},
                                        {"wpad.example.test", "PROXY example-level:8080"},
                                        {"wpad.test", "PROXY beyond:666"}});
  INFO(o.err);
  REQUIRE(o.exit_code == 0);
  CHECK(o.curl == pacText("PROXY corp-level:8080"));  // the fixture, seen by curl
  CHECK_THAT(o.probe, Catch::Contains("origin: http://wpad.corp.example.test/wpad.dat (WPAD)\n"));
  CHECK_THAT(o.probe, Catch::Contains("error: \n"));
  CHECK_THAT(o.probe, Catch::Contains("answer: PROXY corp-level:8080\n"));
  // curl's request, then h2gate's: nothing else.
  CHECK(o.access ==
        "wpad.corp.example.test GET /wpad.dat HTTP/1.1 200\n"
        "wpad.corp.example.test GET /wpad.dat HTTP/1.1 200\n");
}

TEST_CASE("pac wpad: a 404 moves one level up, and never past the registrable domain",
          "[pac][wpad]") {
  if (!haveNamespaces()) FAIL("needs root for mount and network namespaces (unshare -m -n)");
  Outcome o = runWpad("corp.example.test", {{"wpad.corp.example.test", ""},
                                            {"wpad.example.test", "PROXY example-level:8080"},
                                            {"wpad.test", "PROXY beyond:666"}});
  INFO(o.err);
  REQUIRE(o.exit_code == 0);
  CHECK_THAT(o.probe, Catch::Contains("origin: http://wpad.example.test/wpad.dat (WPAD)\n"));
  CHECK_THAT(o.probe, Catch::Contains("answer: PROXY example-level:8080\n"));
  CHECK(o.access ==
        "wpad.corp.example.test GET /wpad.dat HTTP/1.1 404\n"  // curl
        "wpad.corp.example.test GET /wpad.dat HTTP/1.1 404\n"
        "wpad.example.test GET /wpad.dat HTTP/1.1 200\n");

  // Nothing at either level: no PAC file, and wpad.test (which resolves and
  // would answer) is never asked.
  o = runWpad("corp.example.test", {{"wpad.corp.example.test", ""},
                                    {"wpad.example.test", ""},
                                    {"wpad.test", "PROXY beyond:666"}});
  INFO(o.err);
  CHECK(o.exit_code == 1);
  CHECK_THAT(o.probe, Catch::Contains("error: WPAD: no candidate answered: "
                                      "wpad.corp.example.test: HTTP 404 Not Found; "
                                      "wpad.example.test: HTTP 404 Not Found\n"));
  CHECK(o.access.find("wpad.test ") == std::string::npos);
  CHECK(o.access.find("beyond") == std::string::npos);
}

TEST_CASE("pac wpad: no usable search domain", "[pac][wpad]") {
  if (!haveNamespaces()) FAIL("needs root for mount and network namespaces (unshare -m -n)");
  const Outcome o = runWpad("lan", {{"wpad.lan", "PROXY lan:1"}});
  INFO(o.err);
  CHECK(o.exit_code == 1);
  CHECK_THAT(o.probe, Catch::Contains("error: WPAD: no DNS search domain below a public suffix"));
  CHECK(o.access == "wpad.lan GET /wpad.dat HTTP/1.1 200\n");  // curl only
}

TEST_CASE("pac myIpAddress: the default route's source address, else the interfaces'",
          "[pac][myip]") {
  if (!haveNamespaces()) FAIL("needs root for a network namespace (unshare -n)");
  TempDir dir("pac-myip");
  dir.write("myip.pac",
            "function FindProxyForURL(url, host) {\n"
            "  return \"PROXY \" + myIpAddress() + \":1 | \" + myIpAddressEx();\n"
            "}\n");
  dir.write("q.txt", "http://x.example/ x.example\n");
  // A namespace with a veth pair: 10.77.0.5 and fd77::5 on v0; first with
  // default routes through them, then without, then with loopback only.
  const std::string script = dir.write("run.sh", R"SH(#!/bin/sh
set -e
ip link set lo up
probe() { "$PROBE" eval --pac "$D/myip.pac" --queries "$D/q.txt" 2>/dev/null; }
probe > "$D/loopback.out"
ip link add v0 type veth peer name v1
ip addr add 10.77.0.5/24 dev v0
ip -6 addr add fd77::5/64 dev v0 nodad
ip link set v0 up
ip link set v1 up
ip route add default via 10.77.0.1
ip -6 route add default via fd77::1
ip route get 8.8.8.8 > "$D/route.out"
probe > "$D/routes.out"
ip route del default
ip -6 route del default
probe > "$D/interfaces.out"
)SH");
  const CommandResult r =
      runCommand({"env", "D=" + dir.path().string(),
                  "PROBE=" + H2gate::pacProbePath(H2GATE_PAC_PROBE), "unshare", "-n", "sh", script},
                 milliseconds(30000));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  // The fixture, as ip(8) sees it: the kernel routes 8.8.8.8 from 10.77.0.5.
  CHECK_THAT(readFile(dir.file("route.out")), Catch::Contains("src 10.77.0.5"));
  CHECK(readFile(dir.file("routes.out")) == "PROXY 10.77.0.5:1 | 10.77.0.5;fd77::5\n");
  CHECK(readFile(dir.file("interfaces.out")) == "PROXY 10.77.0.5:1 | 10.77.0.5;fd77::5\n");
  // Loopback only: Chromium's answers.
  CHECK(readFile(dir.file("loopback.out")) == "PROXY 127.0.0.1:1 | \n");
}
