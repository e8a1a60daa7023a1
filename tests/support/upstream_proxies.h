// Upstream proxies for tests, real peers on loopback:
//   Squid    squid (package squid-openssl): a plain HTTP/1.1 proxy (the
//            backend nghttpx needs) and, optionally, an HTTPS proxy that
//            speaks only HTTP/1.1 (https_port, no ALPN); optional basic
//            proxy authentication (basic_ncsa_auth + an apr1 htpasswd file).
//   Nghttpx  nghttpx (package nghttp2-proxy) with http2-proxy=yes: an HTTPS
//            proxy that speaks h2, passing CONNECT and absolute-form requests
//            to a backend HTTP/1.1 proxy (a Squid).
// Both run on ephemeral ports chosen with freePort() (neither can bind port
// 0 and report it), retrying when another process took the port first. All
// configuration, pid and log files live in the fixture's TempDir; the
// process is stopped by its destructor, also when a test fails half-way.
//
// Plus small helpers the upstream tests share: sized random files in the
// nginx document root, curl in the background, /proc figures, ss counts.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/peer_logs.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_ca.h"
#include "tests/support/util.h"

namespace h2gate::test {

class Squid {
 public:
  struct Options {
    // Signs the https_port certificate; required when `https` is set.
    TestCA* ca = nullptr;
    bool https = false;  // also listen with https_port (HTTP/1.1 only)
    // Basic proxy authentication: every request needs these credentials.
    bool auth = false;
    std::string username = "alice";
    std::string password = "s3cret";
    std::string realm = "h2gate-test";
    // The access log lines end with the authenticated user (%un, "-" for
    // none), as they do with Negotiate.
    bool log_user = false;
    // With `auth`: only requests to this domain and its subdomains need the
    // credentials ("" = every request).
    std::string auth_domain;
    // Negotiate (Kerberos) authentication with squid's negotiate_kerberos_auth:
    // every request needs a ticket for `negotiate_principal` (e.g.
    // HTTP/localhost@REALM), whose key is in `negotiate_keytab`; `krb5_conf`
    // names the realm's KDC (see kerberos.h). Both files are copied into
    // squid's directory: the helper runs as squid's user. The access log
    // lines then end with the authenticated user (%un, "-" for none).
    std::string negotiate_keytab;
    std::string negotiate_principal;
    std::string krb5_conf;
    // hosts_file entries "127.0.0.1 <name>" (e.g. origin.test).
    std::vector<std::string> hosts;
    std::string extra_config;  // appended to squid.conf
    // acl/http_access lines placed before "http_access allow localnet" (after
    // the authentication rule), e.g. to deny some CONNECTs.
    std::string access_rules;
  };

  explicit Squid(Options options);
  ~Squid();
  Squid(const Squid&) = delete;
  Squid& operator=(const Squid&) = delete;

  uint16_t httpPort() const { return http_port_; }
  uint16_t httpsPort() const { return https_port_; }  // 0 without https
  const TempDir& dir() const { return dir_; }
  Process& process() { return *process_; }

  // access.log, one line per request (a CONNECT when its tunnel ends):
  //   "<client ip>:<client port> <method> <url> <status> <reply bytes>
  //    <squid result code> <error>/<error detail>[ <user>]"
  // e.g. "... 200 383 TCP_MISS -/-", or "... 0 0 TCP_MISS_ABORTED
  // ERR_CLIENT_GONE/WITH_CLIENT" for a request squid ended without a reply.
  std::string accessLog() const;
  std::string cacheLog() const;
  // Lines of the access log whose method is `method` ("" = every request:
  // not the "-" lines of connections that sent none).
  std::vector<std::string> accessLines(const std::string& method = "") const;
  // Distinct client "ip:port" among those lines: one per TCP connection.
  std::set<std::string> clients(const std::string& method = "") const;
  // Polls until at least `n` lines with `method` are logged; returns them.
  std::vector<std::string> waitForAccessLines(size_t n, const std::string& method,
                                              std::chrono::milliseconds timeout);

 private:
  void start();

  // Destruction order: squid stops before its directory goes.
  Options options_;
  TempDir dir_;
  PeerLog cache_log_{"squid cache.log", dir_.file("cache.log")};
  PeerLog access_log_{"squid access.log", dir_.file("access.log")};
  std::string name_;  // squid -n service name, unique per instance
  std::unique_ptr<Process> process_;
  uint16_t http_port_ = 0;
  uint16_t https_port_ = 0;
};

class Nghttpx {
 public:
  struct Options {
    TestCA* ca = nullptr;                   // signs the frontend certificate (required)
    uint16_t backend_port = 0;              // the HTTP/1.1 proxy behind it (required)
    uint32_t max_concurrent_streams = 100;  // frontend-http2-max-concurrent-streams
    // Frontend receive windows (uploads from h2gate); 0 = nghttpx's 65,535.
    uint32_t window_size = 0;
    uint32_t connection_window_size = 0;
    std::string extra_config;  // appended to nghttpx.conf
    // Request headers (lower case) appended to each access log line as
    // " name=value" ("-" when absent), e.g. to see what h2gate added.
    std::vector<std::string> log_headers;
    // INFO logs each backend connection's failure (for the peer logs a
    // failed test prints); NOTICE keeps a long soak's log small.
    std::string log_level = "INFO";
  };

  explicit Nghttpx(Options options);
  ~Nghttpx();
  Nghttpx(const Nghttpx&) = delete;
  Nghttpx& operator=(const Nghttpx&) = delete;

  uint16_t port() const { return port_; }
  // "https://127.0.0.1:PORT"
  std::string url() const;
  const TempDir& dir() const { return dir_; }
  Process& process() { return *process_; }
  // Stops nghttpx (SIGTERM, then SIGKILL); its port stays reserved for restart().
  void stop();
  // Starts it again on the same port (the proxy "comes back").
  void restart();

  // One line per request or tunnel, written when the stream ends:
  //   "<client ip>:<client port> <alpn> \"<request line>\" <status>[ name=value...]"
  std::string accessLog() const;
  std::string errorLog() const;
  // Lines whose request line starts with `method` ("" = all).
  std::vector<std::string> accessLines(const std::string& method = "") const;
  // Distinct client "ip:port" among those lines: one per TCP connection.
  std::set<std::string> clients(const std::string& method = "") const;
  std::vector<std::string> waitForAccessLines(size_t n, const std::string& method,
                                              std::chrono::milliseconds timeout);

 private:
  // On `fixed_port`, or on a free port (retried if another process takes it).
  void start(uint16_t fixed_port = 0);

  Options options_;
  TempDir dir_;
  PeerLog error_log_{"nghttpx error log", dir_.file("error.log")};
  CertFiles cert_;
  std::unique_ptr<Process> process_;
  uint16_t port_ = 0;
};

// A random file of `size` bytes named `name` in testDataDir() (the nginx
// document root), made once per test-binary run; returns its SHA-256.
// testFile() covers only 1k/1m/10m/64m. The name by value, as testFile()'s
// (tests/support/util.h says why).
struct SizedFile {
  std::string name;  // URL path component
  std::string path;
  uint64_t size = 0;
  std::string sha256;
};
const SizedFile& sizedTestFile(std::string_view name, uint64_t size);

// curl running in the background (for transfers that must overlap a
// blocking runCurl()): `-q` first, the proxy environment cleared, output in
// `log_dir`/<name>.stdout/.stderr. The Process destructor stops it.
std::unique_ptr<Process> startCurl(const std::vector<std::string>& args, const std::string& log_dir,
                                   const std::string& name);

// A field of /proc/<pid>/status in KiB (e.g. "VmHWM", "VmRSS"); -1 when absent.
long procStatusKiB(pid_t pid, const std::string& field);

// TCP connections in state ESTABLISHED from a local port to 127.0.0.1:port,
// counted with `ss` (each connection once: the side whose peer is `port`).
int establishedTo(uint16_t port);

// An h2gate config routing listener "local_proxy" (access_log +
// forward_proxy filters) to cluster "proxy": one TLS endpoint
// 127.0.0.1:proxy_port verified with `ca_path`, ALPN h2,http/1.1. Admin on
// 127.0.0.1:0. `http2_options` are lines under http2_protocol_options (e.g.
// "max_concurrent_streams: 10"); `cluster_extra` are lines added to the
// cluster (e.g. "connect_timeout: 1s"), both without indentation.
// `more_ports`: further endpoints 127.0.0.1:port of the same cluster.
std::string upstreamModeYaml(uint16_t proxy_port, const std::string& ca_path,
                             const std::vector<std::string>& http2_options = {},
                             const std::vector<std::string>& cluster_extra = {},
                             const std::vector<uint16_t>& more_ports = {});

// One entry of static_resources.clusters (indented for upstreamModeYaml's
// layout): TLS endpoints 127.0.0.1:port verified with `ca_path`, ALPN
// h2,http/1.1; `http2_options` and `cluster_extra` as for upstreamModeYaml.
std::string clusterYaml(const std::string& name, const std::vector<uint16_t>& ports,
                        const std::string& ca_path,
                        const std::vector<std::string>& http2_options = {},
                        const std::vector<std::string>& cluster_extra = {});

}  // namespace h2gate::test
