#include "tests/support/upstream_proxies.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/support/h2gate.h"
#include "tests/support/net.h"
#include "tests/support/util.h"

namespace h2gate::test {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(line);
  return out;
}

std::string firstField(const std::string& line) {
  return line.substr(0, line.find(' '));
}

// Polls `lines()` until it has `n` entries or the timeout passes.
template <typename F>
std::vector<std::string> pollLines(size_t n, milliseconds timeout, F lines) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    std::vector<std::string> got = lines();
    if (got.size() >= n || Clock::now() >= deadline) return got;
    std::this_thread::sleep_for(milliseconds(20));
  }
}

void copyFile(const std::string& from, const std::string& to) {
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
}

// squid started as root drops to cache_effective_user (Debian: "proxy"),
// which must be able to write its logs and read its files in our 0700 dir.
void handToSquidUser(const std::filesystem::path& dir) {
  if (geteuid() != 0) return;
  const passwd* pw = getpwnam("proxy");
  if (!pw) return;
  auto own = [&](const std::filesystem::path& p) {
    if (chown(p.c_str(), pw->pw_uid, pw->pw_gid) != 0)
      throw std::runtime_error("chown " + p.string() + " failed");
  };
  own(dir);
  for (const auto& e : std::filesystem::directory_iterator(dir)) own(e.path());
}

std::string squidHelper(const std::string& name) {
  for (const char* dir : {"/usr/lib/squid/", "/usr/lib64/squid/", "/usr/libexec/squid/"}) {
    std::string p = std::string(dir) + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  throw std::runtime_error("squid helper " + name + " not found (package squid-openssl)");
}

}  // namespace

// ---------------------------------------------------------------------------
// Squid

Squid::Squid(Options options) : options_(std::move(options)), dir_("squid") {
  static std::atomic<int> counter{0};
  name_ = "h2gsq" + std::to_string(getpid()) + "x" + std::to_string(counter++);
  if (options_.https && !options_.ca) throw std::invalid_argument("Squid: https needs a CA");
  start();
}

Squid::~Squid() = default;

std::string Squid::accessLog() const {
  return readFile(dir_.file("access.log"));
}

std::string Squid::cacheLog() const {
  return readFile(dir_.file("cache.log"));
}

std::vector<std::string> Squid::accessLines(const std::string& method) const {
  std::vector<std::string> out;
  for (std::string& line : splitLines(accessLog())) {
    // "<client> <method> ...". A connection that sent no request (the
    // fixture's own readiness probe of the port) is logged with method "-"
    // ("error:transaction-end-before-headers"): not a request, so not a line
    // a test waits for (a wait for "any line" once returned on it before
    // the request's own line was written).
    std::istringstream in(line);
    std::string client, m;
    in >> client >> m;
    if (method.empty() ? m != "-" : m == method) out.push_back(std::move(line));
  }
  return out;
}

std::set<std::string> Squid::clients(const std::string& method) const {
  std::set<std::string> out;
  for (const auto& line : accessLines(method)) out.insert(firstField(line));
  return out;
}

std::vector<std::string> Squid::waitForAccessLines(size_t n, const std::string& method,
                                                   milliseconds timeout) {
  return pollLines(n, timeout, [&] { return accessLines(method); });
}

void Squid::start() {
  const std::string d = dir_.path().string();
  std::string tls_line;
  if (options_.https) {
    CertFiles cert = options_.ca->issueServer(name_, {});
    copyFile(cert.cert, d + "/proxy.pem");
    copyFile(cert.key, d + "/proxy.key");
  }
  // Schemes in the order squid offers them (Proxy-Authenticate lines).
  std::string auth;
  const bool negotiate = !options_.negotiate_keytab.empty();
  if (negotiate) {
    copyFile(options_.negotiate_keytab, d + "/http.keytab");
    copyFile(options_.krb5_conf, d + "/krb5.conf");
    auth += "auth_param negotiate program " + squidHelper("negotiate_kerberos_auth") + " -k " + d +
            "/http.keytab -s " + options_.negotiate_principal +
            "\n"
            "auth_param negotiate children 4 startup=1 idle=1\n"
            "auth_param negotiate keep_alive on\n";
  }
  if (options_.auth) {
    CommandResult hash =
        runCommand({"openssl", "passwd", "-apr1", options_.password}, milliseconds(10000));
    if (hash.exit_code != 0 || hash.out.empty())
      throw std::runtime_error("openssl passwd failed: " + hash.err);
    std::string h = hash.out.substr(0, hash.out.find('\n'));
    dir_.write("htpasswd", options_.username + ":" + h + "\n");
    auth += "auth_param basic program " + squidHelper("basic_ncsa_auth") + " " + d +
            "/htpasswd\n"
            "auth_param basic children 2 startup=1 idle=1\n"
            "auth_param basic realm " +
            options_.realm +
            "\n"
            "auth_param basic credentialsttl 1 minute\n";
  }
  if (negotiate || options_.auth) {
    auth += "acl authed proxy_auth REQUIRED\n";
    if (options_.auth_domain.empty())
      auth += "http_access deny !authed\n";
    else
      auth += "acl auth_domain dstdomain -n ." + options_.auth_domain +
              "\nhttp_access deny auth_domain !authed\n";
  }
  std::string hosts = "127.0.0.1 localhost\n";
  for (const auto& h : options_.hosts) hosts += "127.0.0.1 " + h + "\n";
  dir_.write("hosts", hosts);

  std::string last_error;
  for (int attempt = 0; attempt < 4; ++attempt) {
    http_port_ = freePort();
    https_port_ = 0;
    while (options_.https && (https_port_ == 0 || https_port_ == http_port_))
      https_port_ = freePort();
    std::ostringstream conf;
    conf << "http_port 127.0.0.1:" << http_port_ << "\n";
    if (options_.https)
      conf << "https_port 127.0.0.1:" << https_port_ << " tls-cert=" << d
           << "/proxy.pem tls-key=" << d << "/proxy.key\n";
    conf << "visible_hostname h2gate-test-squid\n"
         << "acl localnet src 127.0.0.0/8\n"
         << auth << options_.access_rules << "http_access allow localnet\n"
         << "http_access deny all\n"
         << "cache deny all\n"
         << "cache_mem 8 MB\n"
         << "pinger_enable off\n"
         << "shutdown_lifetime 1 seconds\n"
         << "hosts_file " << d << "/hosts\n"
         << "logformat h2gate %>a:%>p %rm %ru %>Hs %<st %Ss %err_code/%err_detail"
         << (negotiate || options_.log_user ? " %un" : "") << "\n"
         << "access_log stdio:" << d << "/access.log h2gate\n"
         << "cache_log " << d << "/cache.log\n"
         << "pid_filename " << d << "/squid.pid\n"
         << "netdb_filename stdio:" << d << "/netdb.state\n"
         << "coredump_dir " << d << "\n"
         << "client_idle_pconn_timeout 5 minutes\n"
         // squid 5.7 (Debian bookworm) drops a request whose body fills its
         // request buffer (client_request_buffer_max_size, 512 KB by default)
         // faster than the origin reads it: a read into the full buffer gets
         // 0 bytes, which squid takes for the client's EOF, and it closes the
         // connection without a response (access log "0 0 TCP_MISS_ABORTED
         // ERR_CLIENT_GONE/WITH_CLIENT"; nghttpx in front then answers its own
         // 502). Fixed in squid 6.13. A buffer larger than any body a test
         // sends through squid never fills; squid holds no more than the
         // origin has not read yet.
         << "client_request_buffer_max_size 64 MB\n"
         << options_.extra_config << "\n";
    const std::string conf_path = dir_.write("squid.conf", conf.str());
    std::filesystem::remove(d + "/cache.log");
    handToSquidUser(dir_.path());

    Process::Options opts;
    opts.argv = {"squid", "-N", "-f", conf_path, "-n", name_};
    // The Kerberos helper reads the realm's krb5.conf (squid passes its
    // environment on to helpers).
    if (negotiate) opts.env["KRB5_CONFIG"] = d + "/krb5.conf";
    opts.log_dir = d;
    opts.name = "squid";
    process_ = std::make_unique<Process>(std::move(opts));

    const std::string want_http =
        "Accepting HTTP Socket connections at [^\n]*local=127\\.0\\.0\\.1:" +
        std::to_string(http_port_) + " ";
    const std::string want_https =
        "Accepting HTTPS Socket connections at [^\n]*local=127\\.0\\.0\\.1:" +
        std::to_string(https_port_) + " ";
    const auto deadline = Clock::now() + kPeerStartTimeout;
    bool ready = false, bind_failed = false;
    while (Clock::now() < deadline && process_->running()) {
      const std::string log = cacheLog();
      if (log.find("Cannot bind") != std::string::npos) {
        bind_failed = true;
        break;
      }
      if (regexSearch(log, want_http) && (!options_.https || regexSearch(log, want_https))) {
        ready = true;
        break;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    if (ready && waitForPort(http_port_, milliseconds(5000)) &&
        (!options_.https || waitForPort(https_port_, milliseconds(5000))))
      return;
    last_error = cacheLog() + process_->logTail();
    process_->stop(milliseconds(3000));
    process_.reset();
    if (!bind_failed) break;
  }
  throw std::runtime_error("squid did not start:\n" + last_error);
}

// ---------------------------------------------------------------------------
// Nghttpx

Nghttpx::Nghttpx(Options options) : options_(std::move(options)), dir_("nghttpx") {
  if (!options_.ca || options_.backend_port == 0)
    throw std::invalid_argument("Nghttpx: needs a CA and a backend port");
  cert_ = options_.ca->issueServer("nghttpx-" + std::to_string(getpid()) + "-" +
                                   dir_.path().filename().string());
  start();
}

Nghttpx::~Nghttpx() = default;

std::string Nghttpx::url() const {
  return "https://127.0.0.1:" + std::to_string(port_);
}

std::string Nghttpx::accessLog() const {
  return readFile(dir_.file("access.log"));
}

std::string Nghttpx::errorLog() const {
  return readFile(dir_.file("error.log"));
}

std::vector<std::string> Nghttpx::accessLines(const std::string& method) const {
  std::vector<std::string> out;
  for (std::string& line : splitLines(accessLog())) {
    // "<client> <alpn> \"<method> ...\" <status>"
    const size_t q = line.find('"');
    if (q == std::string::npos) continue;
    if (method.empty() || line.compare(q + 1, method.size() + 1, method + " ") == 0)
      out.push_back(std::move(line));
  }
  return out;
}

std::set<std::string> Nghttpx::clients(const std::string& method) const {
  std::set<std::string> out;
  for (const auto& line : accessLines(method)) out.insert(firstField(line));
  return out;
}

std::vector<std::string> Nghttpx::waitForAccessLines(size_t n, const std::string& method,
                                                     milliseconds timeout) {
  return pollLines(n, timeout, [&] { return accessLines(method); });
}

void Nghttpx::stop() {
  if (process_) process_->stop(milliseconds(5000));
}

void Nghttpx::restart() {
  stop();
  process_.reset();
  start(port_);
}

void Nghttpx::start(uint16_t fixed_port) {
  const std::string d = dir_.path().string();
  std::string last_error;
  for (int attempt = 0; attempt < 4; ++attempt) {
    port_ = fixed_port ? fixed_port : freePort();
    std::string logged;
    for (const std::string& h : options_.log_headers) {
      std::string var = h;
      std::replace(var.begin(), var.end(), '-', '_');
      logged += " " + h + "=$http_" + var;
    }
    std::ostringstream conf;
    conf << "frontend=127.0.0.1," << port_ << "\n"
         << "backend=127.0.0.1," << options_.backend_port << "\n"
         << "http2-proxy=yes\n"
         << "workers=1\n"
         << "no-ocsp=yes\n"
         << "backend-connections-per-host=1024\n"
         << "private-key-file=" << cert_.key << "\n"
         << "certificate-file=" << cert_.cert << "\n"
         << "accesslog-file=" << d << "/access.log\n"
         << "accesslog-format=$remote_addr:$remote_port $alpn \"$request\" $status" << logged
         << "\n"
         << "errorlog-file=" << d << "/error.log\n"
         << "log-level=" << options_.log_level << "\n"
         << "pid-file=" << d << "/nghttpx.pid\n"
         << "frontend-http2-max-concurrent-streams=" << options_.max_concurrent_streams << "\n";
    if (options_.window_size) conf << "frontend-http2-window-size=" << options_.window_size << "\n";
    if (options_.connection_window_size)
      conf << "frontend-http2-connection-window-size=" << options_.connection_window_size << "\n";
    conf << options_.extra_config << "\n";
    const std::string conf_path = dir_.write("nghttpx.conf", conf.str());
    std::filesystem::remove(d + "/error.log");

    Process::Options opts;
    opts.argv = {"nghttpx", "--conf=" + conf_path};
    opts.log_dir = d;
    opts.name = "nghttpx";
    process_ = std::make_unique<Process>(std::move(opts));
    const auto deadline = Clock::now() + kPeerStartTimeout;
    bool ready = false;
    while (Clock::now() < deadline && process_->running()) {
      const std::string log = errorLog();
      if (log.find("FATAL") != std::string::npos) break;
      if (log.find("Created worker thread") != std::string::npos) {
        ready = true;
        break;
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    if (ready && waitForPort(port_, milliseconds(5000))) return;
    last_error = errorLog() + process_->logTail();
    process_->stop(milliseconds(2000));
    process_.reset();
    if (fixed_port || last_error.find("Address already in use") == std::string::npos) break;
  }
  throw std::runtime_error("nghttpx did not start:\n" + last_error);
}

// ---------------------------------------------------------------------------
// Helpers

const SizedFile& sizedTestFile(std::string_view name_view, uint64_t size) {
  static std::mutex mutex;
  static std::map<std::string, SizedFile> files;
  const std::string name(name_view);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = files.find(name);
  if (it != files.end()) {
    if (it->second.size != size) throw std::invalid_argument("sizedTestFile: size differs");
    return it->second;
  }
  SizedFile f{name, testDataDir() + "/" + name, size, ""};
  f.sha256 = makeRandomFile(f.path, size);
  return files.emplace(name, f).first->second;
}

std::unique_ptr<Process> startCurl(const std::vector<std::string>& args, const std::string& log_dir,
                                   const std::string& name) {
  Process::Options opts;
  opts.argv = {curlBinary(), "-q"};
  opts.argv.insert(opts.argv.end(), args.begin(), args.end());
  opts.log_dir = log_dir;
  opts.name = name;
  for (const char* v : {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy",
                        "ALL_PROXY", "no_proxy", "NO_PROXY"})
    opts.env[v] = std::nullopt;
  return std::make_unique<Process>(std::move(opts));
}

long procStatusKiB(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, field.size() + 1, field + ":") != 0) continue;
    return std::strtol(line.c_str() + field.size() + 1, nullptr, 10);
  }
  return -1;
}

int establishedTo(uint16_t port) {
  CommandResult r = runCommand(
      {"ss", "-Htn", "state", "established", "( dport = :" + std::to_string(port) + " )"},
      milliseconds(10000));
  if (r.exit_code != 0) return -1;
  return static_cast<int>(splitLines(r.out).size());
}

std::string clusterYaml(const std::string& name, const std::vector<uint16_t>& ports,
                        const std::string& ca_path, const std::vector<std::string>& http2_options,
                        const std::vector<std::string>& cluster_extra) {
  std::ostringstream y;
  y << "  - name: " << name << "\n";
  for (const auto& line : cluster_extra) y << "    " << line << "\n";
  y << "    load_assignment:\n"
       "      endpoints:\n"
       "      - lb_endpoints:\n";
  for (uint16_t port : ports)
    y << "        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: " << port
      << "}}}\n";
  y << "    transport_socket:\n"
       "      name: envoy.transport_sockets.tls\n"
       "      typed_config:\n"
       "        common_tls_context:\n"
       "          alpn_protocols: [h2, http/1.1]\n"
       "          validation_context:\n"
       "            trusted_ca: {filename: "
    << ca_path << "}\n";
  if (!http2_options.empty()) {
    y << "    typed_extension_protocol_options:\n"
         "      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:\n"
         "        auto_config:\n"
         "          http2_protocol_options:\n";
    for (const auto& line : http2_options) y << "            " << line << "\n";
  }
  return y.str();
}

std::string upstreamModeYaml(uint16_t proxy_port, const std::string& ca_path,
                             const std::vector<std::string>& http2_options,
                             const std::vector<std::string>& cluster_extra,
                             const std::vector<uint16_t>& more_ports) {
  // The direct-mode config, with its forward_proxy routed to a cluster.
  std::vector<uint16_t> ports{proxy_port};
  ports.insert(ports.end(), more_ports.begin(), more_ports.end());
  return directModeYaml() +
         "        typed_config: {cluster: proxy}\n"
         "  clusters:\n" +
         clusterYaml("proxy", ports, ca_path, http2_options, cluster_extra);
}

}  // namespace h2gate::test
