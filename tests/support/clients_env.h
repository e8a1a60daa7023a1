// The chain the client-compatibility tests run real clients through: app ->
// h2gate -> nghttpx (h2) -> squid -> nginx, all on loopback with ephemeral
// ports. The origin is addressed as origin.test, a name only squid resolves
// (its hosts_file), so a client that skipped the proxy fails instead of
// passing by accident. Used by tests/integration/clients_test.cc and
// system_proxy_test.cc. Header-only: it uses H2GATE_BINARY and
// H2GATE_SOURCE_DIR, which only the integration test binary defines.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/h2_env.h"

namespace h2gate::test {

// The client programs (tests/clients/).
inline const std::string kClientsDir = std::string(H2GATE_SOURCE_DIR) + "/tests/clients";

inline void writeFile(const std::string& path, const std::string& content) {
  std::ofstream f(path, std::ios::binary);
  f << content;
  REQUIRE(f.good());
}

inline bool haveProgram(const std::string& name) {
  return runCommand({"sh", "-c", "command -v " + name}, milliseconds(5000)).exit_code == 0;
}

struct ClientsEnv {
  ClientsEnv()
      : nginx(nginxOptions(ca, work.path().string())),
        squid(squidOptions()),
        nghttpx(H2Env::nghttpxOptions(H2Env::Options{}, ca, squid.httpPort())) {
    testFile("1m");
    upload = work.path().string() + "/upload.bin";
    upload_sha = makeRandomFile(upload, 1 << 20);
    H2gate::Options o;
    o.binary = H2GATE_BINARY;
    o.yaml = upstreamModeYaml(nghttpx.port(), ca.caCertPath());
    o.args = {"--log-level", "debug"};
    gate = std::make_unique<H2gate>(std::move(o));
    INFO(gate->process().logTail());
    REQUIRE(gate->process().waitForLog(
        "proxy 127\\.0\\.0\\.1:" + str(nghttpx.port()) + " negotiated h2", milliseconds(10000)));
  }

  static Nginx::Options nginxOptions(TestCA& ca, const std::string& work) {
    Nginx::Options n;
    n.ca = &ca;
    n.dns_names = {"origin.test"};
    // A git repository served over git's dumb HTTP protocol (static files).
    n.extra_server_config =
        "    location /git/ { alias " + work +
        "/git/; }\n"
        // A page with sub-resources for the browser.
        "    location /web/ { alias " +
        work +
        "/web/; types { text/html html; text/css css; application/javascript js; "
        "image/png png; } }\n"
        // A one-package Python index (PEP 503 simple) and npm registry.
        "    location /pypi/ { alias " +
        work + "/pypi/; types { text/html html; } }\n" + "    location /npm/ { alias " + work +
        "/npm/; default_type application/json; types { application/gzip tgz; } }\n";
    return n;
  }
  static Squid::Options squidOptions() {
    Squid::Options s;
    s.hosts = {"origin.test"};
    return s;
  }

  std::string httpsUrl(const std::string& path) const {
    return "https://origin.test:" + str(nginx.tlsPort()) + path;
  }
  std::string httpUrl(const std::string& path) const {
    return "http://origin.test:" + str(nginx.httpPort()) + path;
  }
  std::string proxy() const { return gate->proxyUrl(); }
  // The 1 MiB file arrived whole.
  bool same(const std::string& file) const {
    return std::filesystem::exists(file) && sha256File(file) == testFile("1m").sha256;
  }
  // The sink's answer to the upload: "<sha256> <length>".
  std::string uploadAnswer() const { return upload_sha + " " + str(1 << 20) + "\n"; }

  // Runs argv with the environment variables `env` (NAME=value) set; the
  // proxy variables of the test's own environment are cleared by runCommand.
  CommandResult run(const std::vector<std::string>& env, const std::vector<std::string>& argv,
                    milliseconds timeout = milliseconds(90000)) {
    std::vector<std::string> all{"env"};
    all.insert(all.end(), env.begin(), env.end());
    all.insert(all.end(), argv.begin(), argv.end());
    CommandResult r = runCommand(all, timeout);
    UNSCOPED_INFO("ran: " << join(argv) << "\nexit " << r.exit_code << "\nstdout: " << r.out
                          << "\nstderr: " << r.err);
    return r;
  }
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
    return s;
  }

  // Both downloads and, when `put` is given, the upload, for one client.
  // `get(url, out)` / `put(url, in)` build the client's command.
  template <typename Get, typename Put>
  void check(const std::string& tag, Get get, Put put, bool can_upload = true) {
    const std::string a = out.file(tag + "-https"), b = out.file(tag + "-http");
    const size_t before = nghttpx.accessLines().size();
    {
      auto r = get(httpsUrl("/1m?" + tag), a);
      CHECK(r.exit_code == 0);
      CHECK(same(a));
    }
    {
      auto r = get(httpUrl("/1m?" + tag), b);
      CHECK(r.exit_code == 0);
      CHECK(same(b));
    }
    if (can_upload) {
      auto r = put(httpsUrl("/upload?" + tag), upload);
      CHECK(r.exit_code == 0);
      CHECK(r.out == uploadAnswer());
    }
    // Everything went through h2gate and the h2 proxy (which logs a stream
    // when it ends).
    const size_t want = before + (can_upload ? 3 : 2);
    CHECK(nghttpx.waitForAccessLines(want, "", milliseconds(5000)).size() >= want);
  }

  TempDir work{"clients"};
  TestCA ca{work.path().string()};
  Nginx nginx;
  Squid squid;
  Nghttpx nghttpx;
  TempDir out{"out"};
  std::string upload;
  std::string upload_sha;
  std::unique_ptr<H2gate> gate;  // stops first
};

}  // namespace h2gate::test
