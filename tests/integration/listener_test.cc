// Listener behaviour a user notices: the default pair of loopback addresses
// (127.0.0.1 and ::1 on one port), the rule and the warning for non-loopback
// addresses, and several workers serving one port.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "tests/support/h2gate.h"
#include "tests/support/net.h"
#include "tests/support/origin.h"
#include "tests/support/util.h"

using namespace h2gate::test;

namespace {

H2gate::Options withYaml(std::string yaml) {
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  o.yaml = std::move(yaml);
  return o;
}

bool ipv6LoopbackUsable() {
  const int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

std::string listenerYaml(const std::string& address_block, const std::string& h2gate = "") {
  std::string y = directModeYaml(h2gate);
  const std::string from =
      "    address:\n      socket_address: {address: 127.0.0.1, port_value: 0}\n";
  const size_t at = y.find(from);
  REQUIRE(at != std::string::npos);
  y.replace(at, from.size(), address_block);
  return y;
}

}  // namespace

TEST_CASE("the default listener shape serves 127.0.0.1 and ::1 on one port", "[listener]") {
  if (!ipv6LoopbackUsable()) {
    WARN("SKIPPED: no IPv6 loopback on this host");
    return;
  }
  Nginx nginx;
  const uint16_t port = freePort();
  const std::string p = std::to_string(port);
  H2gate gate(withYaml(listenerYaml(
      "    address:\n      socket_address: {address: 127.0.0.1, port_value: " + p +
      "}\n    additional_addresses:\n    - address:\n        socket_address: {address: "
      "\"::1\", port_value: " +
      p + "}\n")));
  const std::string err = gate.stderrText();
  CHECK(err.find("listening on 127.0.0.1:" + p + " (listener local_proxy)") != std::string::npos);
  CHECK(err.find("listening on [::1]:" + p + " (listener local_proxy)") != std::string::npos);
  const TestFile& f = testFile("1k");
  for (const std::string& proxy : {"http://127.0.0.1:" + p, "http://[::1]:" + p}) {
    INFO(proxy);
    auto r = runCurl({"-sS", "-x", proxy, "-o", gate.dir().file("out"), "-w", "%{http_code}",
                      nginx.httpUrl("/1k")});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "200");
    CHECK(sha256File(gate.dir().file("out")) == f.sha256);
  }
  auto log = gate.waitForAccessLog(2);
  REQUIRE(log.size() == 2);
  CHECK(log[1].get("client").rfind("[::1]:", 0) == 0);
}

TEST_CASE("a non-loopback listener needs source_prefix_ranges; 0.0.0.0/0 works and is warned about",
          "[listener][sources]") {
  // Without a list h2gate does not start, and says what to do.
  const CommandResult open = runCommand(
      {H2gate::binaryPath(H2GATE_BINARY), "--listen", "0.0.0.0:0", "--admin", "127.0.0.1:0"},
      milliseconds(20000));
  INFO(open.err);
  CHECK(open.exit_code == 1);
  CHECK(open.err.find("listener 'local_proxy' listens on 0.0.0.0:0 without source_prefix_ranges "
                      "(--allow): anyone who can reach it could use the proxy; list the clients' "
                      "ranges, or 0.0.0.0/0 (and ::/0) to allow everyone on purpose") !=
        std::string::npos);
  CHECK(open.err.find("not starting: 1 configuration problem(s)") != std::string::npos);

  std::string yaml =
      listenerYaml("    address:\n      socket_address: {address: 0.0.0.0, port_value: 0}\n");
  const std::string chain = "    - filters:\n";
  REQUIRE(yaml.find(chain) != std::string::npos);
  yaml.replace(yaml.find(chain), chain.size(),
               "    - filter_chain_match:\n"
               "        source_prefix_ranges: [{address_prefix: 0.0.0.0, prefix_len: 0}]\n"
               "      filters:\n");
  H2gate gate(withYaml(yaml));
  const std::string err = gate.stderrText();
  CHECK(err.find("binds non-loopback address 0.0.0.0:") != std::string::npos);
  CHECK(err.find("apps on other machines can use this proxy (source_prefix_ranges: 0.0.0.0/0)") !=
        std::string::npos);
  CHECK(err.find("warn") != std::string::npos);
  // Loopback traffic still gets through the wildcard address.
  Nginx nginx;
  auto r = runCurl({"-sS", "-x", "http://127.0.0.1:" + std::to_string(gate.port()), "-o",
                    "/dev/null", "-w", "%{http_code}", nginx.httpUrl("/1k")});
  CHECK(r.out == "200");
}

TEST_CASE("several workers accept on one port", "[listener]") {
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  o.args = {"--listen",      "127.0.0.1:0", "--admin",     "127.0.0.1:0",
            "--concurrency", "2",           "--log-level", "debug"};
  H2gate gate(o);
  CHECK(gate.stderrText().find("2 worker(s)") != std::string::npos);
  Nginx nginx;
  const TestFile& f = testFile("1m");
  std::vector<std::string> args = {"-sS", "--parallel", "--parallel-max",
                                   "20",  "-x",         gate.proxyUrl()};
  for (int i = 0; i < 40; ++i) {
    args.push_back("-o");
    args.push_back(gate.dir().file("w" + std::to_string(i)));
    args.push_back(nginx.httpUrl("/1m"));
  }
  auto r = runCurl(args);
  REQUIRE(r.exit_code == 0);
  for (int i = 0; i < 40; ++i)
    CHECK(sha256File(gate.dir().file("w" + std::to_string(i))) == f.sha256);
  // Both event loops run (which one accepts a connection is up to the kernel).
  const std::string err = gate.stderrText();
  CHECK(err.find("worker 0 running") != std::string::npos);
  CHECK(err.find("worker 1 running") != std::string::npos);
}
