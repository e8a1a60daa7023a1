// h2gate started by an integration test with named listeners and an
// /etc/hosts of its own, and curl through each listener: what PacEnv
// (tests/support/pac_env.h) and RoutingEnv (tests/integration/routing_test.cc)
// share; upstream_auth_test.cc's fixtures curl through h2gate with it too.
// Header-only: it uses H2GATE_BINARY, which only the integration test binary
// defines.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/support/h2gate.h"
#include "tests/support/kerberos.h"
#include "tests/support/origin.h"
#include "tests/support/test_ca.h"
#include "tests/support/util.h"

namespace h2gate::test {

// The whole config: admin on `admin_address`:0, `listeners` (items of
// static_resources.listeners), then `clusters` (e.g. "  clusters:\n...").
inline std::string gateYaml(const std::string& listeners,
                            const std::string& admin_address = "127.0.0.1",
                            const std::string& clusters = "") {
  return "admin:\n"
         "  address:\n"
         "    socket_address: {address: " +
         admin_address +
         ", port_value: 0}\n"
         "static_resources:\n"
         "  listeners:\n" +
         listeners + clusters;
}

// h2gate (debug log) with `yaml`, waiting for the listeners `names`, with
// `hosts` as its /etc/hosts.
inline H2gate::Options listenersOptions(std::string yaml, std::vector<std::string> names,
                                        std::string hosts) {
  H2gate::Options o;
  o.binary = H2GATE_BINARY;
  o.yaml = std::move(yaml);
  o.args = {"--log-level", "debug"};
  o.listeners = std::move(names);
  o.hosts = std::move(hosts);
  return o;
}

// curl -sS through `listener` of `gate`, trusting `ca`, 30 s at most;
// stdout is what -w writes. What it did goes to the test's report.
inline CommandResult curlThrough(const H2gate& gate, const std::string& listener, const TestCA& ca,
                                 const std::vector<std::string>& args) {
  std::vector<std::string> all{
      "-sS", "-x", gate.proxyUrl(listener), "--cacert", ca.caCertPath(), "--max-time", "30"};
  all.insert(all.end(), args.begin(), args.end());
  CommandResult r = runCurl(all, std::chrono::milliseconds(40000));
  UNSCOPED_INFO("curl " << args.back() << ": exit " << r.exit_code << " out " << r.out << " err "
                        << r.err);
  return r;
}

// A 1 MiB download (testFile("1m")) through `listener` into `file`, with
// `extra` curl arguments first: true when 200 and byte for byte.
inline bool fetch1m(const H2gate& gate, const std::string& listener, const TestCA& ca,
                    const std::string& url, const std::string& file,
                    std::vector<std::string> extra = {}) {
  extra.insert(extra.end(), {"-o", file, "-w", "%{http_code}", url});
  const CommandResult r = curlThrough(gate, listener, ca, extra);
  return r.exit_code == 0 && r.out == "200" && sha256File(file) == testFile("1m").sha256;
}

// For an ASan build of h2gate that uses NTLM: gss-ntlmssp's own leak is
// suppressed (tests/lsan.supp), which needs full stack unwinding. Without
// ASan these variables do nothing.
inline void ntlmSanitizerEnv(H2gate::Options& o) {
  const char* asan = std::getenv("ASAN_OPTIONS");
  o.env["ASAN_OPTIONS"] = std::string(asan ? asan : "") + ":fast_unwind_on_malloc=0";
  o.env["LSAN_OPTIONS"] = "suppressions=" H2GATE_SOURCE_DIR "/tests/lsan.supp";
}

// Nothing `gate` logged (stderr and stdout) holds any of `secrets`
// (tokens, passwords), nor a Kerberos token (hasGssToken).
inline void checkNotLogged(H2gate& gate, const std::vector<std::string>& secrets) {
  const std::string log = gate.stderrText() + gate.process().stdoutText();
  CHECK(!hasGssToken(log));
  for (const std::string& secret : secrets) {
    INFO(secret);
    CHECK(log.find(secret) == std::string::npos);
  }
}

// `path` on `nginx` under the name `host`: its TLS port or its plain one.
inline std::string nginxUrl(const Nginx& nginx, const std::string& host, bool tls,
                            const std::string& path) {
  return tls ? "https://" + host + ":" + std::to_string(nginx.tlsPort()) + path
             : "http://" + host + ":" + std::to_string(nginx.httpPort()) + path;
}

}  // namespace h2gate::test
