#include "gateway/check.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <strings.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include <asio.hpp>

#include "config/loader.h"
#include "filters/filter.h"
#include "filters/registry.h"
#include "gateway/http1/codec.h"
#include "gateway/http1/parser.h"
#include "gateway/metrics/registry.h"
#include "gateway/net/address.h"
#include "gateway/net/ip_address.h"
#include "gateway/net/tls_context.h"
#include "gateway/upstream/auth/proxy_auth.h"
#include "gateway/upstream/h2_connection.h"
#include "gateway/upstream/health.h"
#include "gateway/upstream/http1_exchange.h"
#include "gateway/upstream/proxy_request.h"
#include "gateway/upstream/transport.h"
#include "gateway/upstream/tunnel.h"
#include "gateway/upstream/upstream_stats.h"

namespace h2gate::check {
namespace {

using Clock = std::chrono::steady_clock;
// Log lines of the gateway code used here carry this connection id.
constexpr uint64_t kConnId = 1;

// Runs `io` until `done()` or `limit` passed; false on timeout (or when the
// loop has nothing left to do and `done()` is still false).
bool runUntil(asio::io_context& io, const std::function<bool()>& done, Clock::duration limit) {
  const auto deadline = Clock::now() + limit;
  io.restart();
  while (!done()) {
    const auto now = Clock::now();
    if (now >= deadline) return false;
    if (io.run_one_for(deadline - now) == 0 && io.stopped()) return done();
  }
  return true;
}

std::string opensslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

std::string nameText(X509_NAME* name) {
  if (name == nullptr) return "?";
  // The CN alone when there is one: a chain line stays readable.
  const int i = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (i >= 0) {
    ASN1_STRING* s = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i));
    unsigned char* utf8 = nullptr;
    const int n = ASN1_STRING_to_UTF8(&utf8, s);
    if (n >= 0) {
      std::string cn(reinterpret_cast<char*>(utf8), static_cast<size_t>(n));
      OPENSSL_free(utf8);
      return "CN=" + cn;
    }
  }
  char buf[256];
  X509_NAME_oneline(name, buf, sizeof buf);
  return buf;
}

// "CN=proxy.example (issuer CN=Corp CA, until Jan  1 00:00:00 2030 GMT) ← …"
std::string chainText(SSL* ssl) {
  STACK_OF(X509)* chain = SSL_get_peer_cert_chain(ssl);
  if (chain == nullptr || sk_X509_num(chain) == 0) return "no certificate";
  std::string out;
  for (int i = 0; i < sk_X509_num(chain); ++i) {
    X509* c = sk_X509_value(chain, i);
    if (i > 0) out += " <- ";
    out += nameText(X509_get_subject_name(c)) + " (issuer " + nameText(X509_get_issuer_name(c));
    BIO* b = BIO_new(BIO_s_mem());
    if (b != nullptr) {
      ASN1_TIME_print(b, X509_get0_notAfter(c));
      char* p = nullptr;
      const long n = BIO_get_mem_data(b, &p);
      out += ", until " + std::string(p, static_cast<size_t>(n));
      BIO_free(b);
    }
    out += ")";
  }
  return out;
}

// What a user can do about a failed certificate verification.
std::string verifyAdvice(long result, const std::string& host) {
  switch (result) {
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
      return "unknown CA: pass --cacert FILE (or set trusted_ca in the cluster's "
             "validation_context), or add the company CA to the system store "
             "(/usr/local/share/ca-certificates, then update-ca-certificates)";
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
      return "the certificate is not issued for '" + host +
             "': use the proxy's name as written in its certificate, or set sni";
    case X509_V_ERR_CERT_HAS_EXPIRED:
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return "check this machine's clock; otherwise the proxy's certificate must be renewed";
    default:
      return "ask the proxy's administrator which CA issues its certificate";
  }
}

// One line per step; remembers the first failure and the warnings.
class Report {
 public:
  explicit Report(std::ostream& out) : out_(out) {}
  void begin() { started_ = Clock::now(); }
  void ok(const std::string& step, const std::string& detail) { line("ok", step, detail); }
  void note(const std::string& step, const std::string& detail) { line("--", step, detail); }
  void warn(const std::string& step, const std::string& detail, const std::string& advice = "") {
    line("WARN", step, detail);
    warnings_.push_back(step);
    if (!advice.empty()) out_ << std::string(31, ' ') << "-> " << advice << "\n";
  }
  // Returns false, so that a step can `return report.fail(...)`.
  bool fail(const std::string& step, const std::string& detail, const std::string& advice) {
    line("FAIL", step, detail);
    if (failure_.empty()) failure_ = "FAIL (" + step + "): " + detail + " — " + advice;
    return false;
  }
  bool failed() const { return !failure_.empty(); }
  const std::string& failure() const { return failure_; }
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  void line(const char* verdict, const std::string& step, const std::string& detail) {
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - started_).count();
    char head[64];
    std::snprintf(head, sizeof head, "  %-5s %-11s %8.1f ms  ", verdict, step.c_str(), ms);
    out_ << head << detail << "\n" << std::flush;
    started_ = Clock::now();
  }
  std::ostream& out_;
  Clock::time_point started_ = Clock::now();
  std::string failure_;
  std::vector<std::string> warnings_;
};

// Collects what a Tunnel reports. Bytes are copied, and `done` is posted,
// so the tunnel's buffer is released as an app socket's write would.
struct Collector final : upstream::TunnelCallbacks {
  explicit Collector(asio::io_context& io) : io_(io) {}
  void onResponseHead(ResponseHead h) override { head = std::move(h); }
  void onResponseData(std::string_view d, upstream::Done done) override {
    data.append(d);
    if (done) asio::post(io_, std::move(done));
  }
  void onResponseEnd() override { ended = true; }
  void onFailed(int s, Result, std::string why) override {
    failed_status = s;
    reason = std::move(why);
    ended = true;
  }
  void onReset(Result, std::string why) override {
    reset = true;
    reason = std::move(why);
    ended = true;
  }
  asio::io_context& io_;
  std::optional<ResponseHead> head;
  std::string data;
  bool ended = false;
  bool reset = false;
  int failed_status = 0;
  std::string reason;
};

// The pool's part for a lone H2Connection: records what happens.
struct H2Owner final : upstream::H2Connection::Owner {
  void onCapacityChanged(upstream::H2Connection&) override { ++capacity_changes; }
  void onConnectionClosed(upstream::H2Connection&, const std::string& why, bool) override {
    closed = true;
    reason = why;
  }
  int capacity_changes = 0;
  bool closed = false;
  std::string reason;
};

struct Target {
  bool tls = false;
  RequestHead head;  // CONNECT host:port (https) or HEAD absolute-form (http)
  std::string path = "/";
};

// "https://host[:port][/path]" or "http://…". Returns an error or "".
std::string parseUrl(const std::string& url, Target* t) {
  const size_t sep = url.find("://");
  if (sep == std::string::npos) return "not a URL (expected https://HOST[:PORT]/PATH)";
  std::string scheme = url.substr(0, sep);
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "https" && scheme != "http") return "only http:// and https:// URLs can be checked";
  t->tls = scheme == "https";
  std::string rest = url.substr(sep + 3);
  const size_t slash = rest.find_first_of("/?#");
  std::string authority = rest.substr(0, slash);
  if (authority.find('@') != std::string::npos) return "a URL to check has no user:password";
  const size_t close = authority.rfind(']');
  const size_t colon = authority.rfind(':');
  const bool has_port = colon != std::string::npos && (close == std::string::npos || colon > close);
  if (!has_port) authority += t->tls ? ":443" : ":80";
  std::string path = slash == std::string::npos ? "/" : rest.substr(slash);
  if (path.empty() || path[0] != '/') path = "/" + path;
  if (const size_t hash = path.find('#'); hash != std::string::npos) path.resize(hash);
  t->path = path;
  RequestHead& h = t->head;
  if (t->tls) {
    h.method = "CONNECT";
    h.target = authority;
  } else {
    h.method = "HEAD";
    h.target = "http://" + authority + path;
  }
  if (std::string err = http1::parseTarget(h); !err.empty()) return err;
  h.headers.push_back({"User-Agent", std::string("h2gate-check/") + H2GATE_VERSION});
  return {};
}

class Checker {
 public:
  Checker(const config::Bootstrap& b, const Options& o, std::ostream& out)
      : bootstrap_(b), options_(o), out_(out), report_(out) {}
  ~Checker() {
    config::wipe(authorization_);
    if (tunnel_) tunnel_->abort();
    if (h2_) h2_->close("check finished", false);
    io_.restart();
    io_.poll();
  }

  int run() {
    Target t;
    if (std::string err = parseUrl(options_.url, &t); !err.empty()) {
      out_ << "h2gate check: " << options_.url << ": " << err << "\n";
      return 1;
    }
    target_ = std::move(t);
    out_ << "h2gate check " << options_.url << " (config " << bootstrap_.source << ")\n";
    bool ok = route();
    if (ok) ok = info_.cluster.empty() ? direct() : viaProxy();
    if (!ok || report_.failed()) {
      out_ << report_.failure() << "\n";
      return 1;
    }
    std::string line = "OK: " + options_.url + " answered " + std::to_string(status_) + " " +
                       (info_.cluster.empty() ? "directly (DIRECT)"
                                              : "through cluster '" + info_.cluster + "' (" +
                                                    info_.upstream + ", " + info_.protocol + ")");
    if (!report_.warnings().empty()) {
      line += "; warnings (above):";
      for (const std::string& w : report_.warnings()) line += " " + w;
    }
    out_ << line << "\n";
    return 0;
  }

 private:
  // The listener's filters decide, as for an app's request (proxy_auth, the
  // app's own authentication to h2gate, is left out: this is no app).
  bool route() {
    report_.begin();
    const config::Listener* listener = nullptr;
    for (const config::Listener& l : bootstrap_.listeners)
      if (options_.listener.empty() || l.name == options_.listener) {
        listener = &l;
        break;
      }
    if (listener == nullptr)
      return report_.fail(
          "route",
          "no listener" +
              (options_.listener.empty() ? std::string() : " '" + options_.listener + "'"),
          "the config needs a listener with a forward_proxy filter");
    info_.listener_name = listener->name;
    info_.connection_id = kConnId;
    info_.stream_id = 1;
    info_.client = "127.0.0.1:0";
    info_.start = Clock::now();
    info_.start_wall = std::chrono::system_clock::now();
    for (const config::FilterConfig& fc : listener->filters) {
      if (fc.filter == nullptr || fc.name == filters::kProxyAuth) continue;
      filters_.push_back(fc.filter);
      if (fc.filter->onRequestHead(target_.head, info_) == filters::FilterStatus::Stop) break;
    }
    if (info_.status != 0)
      return report_.fail("route",
                          "listener '" + listener->name + "' refuses " + target_.head.authority() +
                              ": " + std::to_string(info_.status) + " " + info_.reason,
                          "the request is refused by the config's rules (acl, reject routes), "
                          "not by the network");
    std::string fallbacks;
    for (const std::string& f : info_.fallbacks)
      fallbacks += (fallbacks.empty() ? "" : ", ") +
                   (f.empty() ? std::string("DIRECT") : "cluster '" + f + "'");
    report_.ok(
        "route",
        "listener '" + listener->name + "': " + target_.head.method + " " + target_.head.target +
            " goes " +
            (info_.cluster.empty() ? std::string("DIRECT") : "to cluster '" + info_.cluster + "'") +
            (fallbacks.empty() ? "" : " (fallbacks, not checked: " + fallbacks + ")"));
    return true;
  }

  // DNS of `host` (an IP literal is taken as it is).
  bool resolve(const std::string& what, const std::string& host, uint16_t port,
               config::Duration limit, std::vector<asio::ip::tcp::endpoint>* out,
               const std::string& advice) {
    report_.begin();
    asio::error_code ec;
    const asio::ip::address ip = asio::ip::make_address(host, ec);
    if (!ec) {
      out->emplace_back(ip, port);
      report_.ok("dns", what + " " + host + " is an IP address: no lookup");
      return true;
    }
    asio::ip::tcp::resolver resolver(io_);
    std::optional<asio::error_code> result;
    resolver.async_resolve(host, std::to_string(port),
                           [&](const asio::error_code& e, asio::ip::tcp::resolver::results_type r) {
                             result = e;
                             for (const auto& x : r) out->push_back(x.endpoint());
                           });
    if (!runUntil(
            io_, [&] { return result.has_value(); }, limit)) {
      resolver.cancel();
      runUntil(
          io_, [&] { return result.has_value(); }, std::chrono::seconds(1));
      return report_.fail("dns", "lookup of " + what + " " + host + " timed out", advice);
    }
    if (*result || out->empty())
      return report_.fail("dns",
                          "lookup of " + what + " " + host +
                              " failed: " + (*result ? result->message() : "no address"),
                          advice);
    std::string list;
    for (const auto& e : *out) list += (list.empty() ? "" : " ") + e.address().to_string();
    report_.ok("dns", what + " " + host + " -> " + list);
    return true;
  }

  // TCP to each address in turn, one deadline for all.
  bool connect(const std::string& what, const std::vector<asio::ip::tcp::endpoint>& addresses,
               config::Duration limit, const std::string& advice) {
    report_.begin();
    const auto deadline = Clock::now() + limit;
    std::string errors;
    for (const auto& ep : addresses) {
      socket_ = std::make_unique<asio::ip::tcp::socket>(io_);
      std::optional<asio::error_code> result;
      socket_->async_connect(ep, [&](const asio::error_code& e) { result = e; });
      const auto left = deadline - Clock::now();
      if (left <= Clock::duration::zero() || !runUntil(
                                                 io_, [&] { return result.has_value(); }, left)) {
        asio::error_code ignored;
        socket_->close(ignored);
        runUntil(
            io_, [&] { return result.has_value(); }, std::chrono::seconds(1));
        return report_.fail(
            "tcp",
            "connecting to " + what + " " + net::endpointText(ep) + " timed out after " +
                std::to_string(
                    std::chrono::duration_cast<std::chrono::milliseconds>(limit).count()) +
                " ms" + (errors.empty() ? "" : " (" + errors + ")"),
            "a firewall drops the packets, or the address is wrong; " + advice);
      }
      if (!*result) {
        asio::error_code ignored;
        socket_->set_option(asio::ip::tcp::no_delay(true), ignored);
        peer_ = net::endpointText(ep);
        report_.ok("tcp", "connected to " + what + " " + peer_);
        return true;
      }
      errors += (errors.empty() ? "" : "; ") + net::endpointText(ep) + ": " + result->message();
    }
    return report_.fail("tcp", "connecting to " + what + " failed: " + errors,
                        "is it running and listening on that port? " + advice);
  }

  bool viaProxy() {
    const config::Cluster* cluster = bootstrap_.findCluster(info_.cluster);
    if (cluster == nullptr || cluster->endpoints.empty())
      return report_.fail("route", "cluster '" + info_.cluster + "' has no endpoint",
                          "fix the configuration");
    cluster_ = cluster;
    const config::SocketAddress& ep = cluster->endpoints.front();
    if (cluster->endpoints.size() > 1)
      report_.note("endpoint",
                   "checking the first of " + std::to_string(cluster->endpoints.size()) +
                       " endpoints: " + ep.address + ":" + std::to_string(ep.port_value));
    const std::string proxy = "proxy";
    std::vector<asio::ip::tcp::endpoint> addresses;
    if (!resolve(proxy, ep.address, ep.port_value, cluster->connect_timeout, &addresses,
                 "check the proxy's name in the config (--upstream or the cluster's "
                 "endpoints) and this machine's DNS (/etc/resolv.conf)"))
      return false;
    if (!connect(proxy, addresses, cluster->connect_timeout,
                 "check the proxy's address and port in the config"))
      return false;
    std::unique_ptr<upstream::Transport> transport;
    std::string alpn;
    if (cluster->tls) {
      if (!proxyTls(*cluster, ep, &transport, &alpn)) return false;
    } else {
      report_.note("tls", "none: the cluster is a plain-TCP (http://) proxy; HTTP/1.1");
      transport = std::make_unique<upstream::Transport>(std::move(*socket_));
    }
    info_.upstream = peer_;
    if (!proxyAuth(*cluster, alpn == "h2")) return false;
    if (alpn == "h2") return h2Request(std::move(transport));
    return h1Request(std::move(transport));
  }

  bool proxyTls(const config::Cluster& cluster, const config::SocketAddress& ep,
                std::unique_ptr<upstream::Transport>* out, std::string* alpn) {
    report_.begin();
    std::string err;
    // Kept until the end: its SSL objects call back into it (sessions).
    tls_ctx_ = net::TlsContext::create(*cluster.tls, cluster.name, &err);
    const auto& ctx = tls_ctx_;
    if (!ctx)
      return report_.fail("tls", err, "fix the cluster's TLS settings (file paths, versions)");
    SSL* ssl = SSL_new(ctx->native());
    if (ssl == nullptr) return report_.fail("tls", "SSL_new failed: " + opensslErrors(), "-");
    auto transport = std::make_unique<upstream::Transport>(std::move(*socket_), ssl);
    if (std::string e =
            ctx->prepare(ssl, ep.address, ep.address + ":" + std::to_string(ep.port_value));
        !e.empty())
      return report_.fail("tls", "TLS setup: " + e, "fix the cluster's TLS settings");
    std::optional<asio::error_code> result;
    transport->asyncHandshake([&](const asio::error_code& e) { result = e; });
    if (!runUntil(
            io_, [&] { return result.has_value(); }, cluster.connect_timeout)) {
      transport->close();
      runUntil(
          io_, [&] { return result.has_value(); }, std::chrono::seconds(1));
      return report_.fail("tls", "no TLS answer from " + peer_ + " within connect_timeout",
                          "is this port a TLS (https://) proxy? A plain HTTP proxy is "
                          "written http://HOST:PORT");
    }
    const std::string chain = chainText(ssl);
    if (*result) {
      const long v = SSL_get_verify_result(ssl);
      std::string why = net::TlsContext::verifyError(ssl);
      if (!why.empty())
        return report_.fail("tls", why + "; chain: " + chain, verifyAdvice(v, ep.address));
      std::string text = result->message();
      return report_.fail("tls", "TLS handshake with " + peer_ + " failed: " + text,
                          text.find("wrong version number") != std::string::npos
                              ? "the proxy does not speak TLS on this port: use "
                                "http://HOST:PORT for a plain HTTP proxy"
                              : "compare the TLS versions and client certificate the proxy "
                                "wants with the cluster's settings");
    }
    report_.ok("tls", std::string(SSL_get_version(ssl)) + " " + SSL_get_cipher_name(ssl) +
                          "; chain: " + chain);
    if (ctx->verifies())
      report_.ok("verify", "certificate verified for " +
                               (cluster.tls->sni.empty() ? ep.address : cluster.tls->sni) +
                               " with " +
                               (cluster.tls->trusted_ca.empty() ? std::string("the system store")
                                                                : cluster.tls->trusted_ca));
    else
      report_.warn("verify", "certificate NOT verified (insecure_skip_verify / --insecure)",
                   "anyone on the path can read the traffic: give the CA with --cacert instead");
    *alpn = net::TlsContext::selectedAlpn(ssl);
    const auto& offered = cluster.tls->alpn_protocols;
    const bool offered_h2 = std::find(offered.begin(), offered.end(), "h2") != offered.end();
    if (*alpn == "h2") {
      report_.ok("alpn", "h2: one TLS connection carries every tunnel");
    } else if (!offered_h2) {
      report_.note("alpn", (alpn->empty() ? std::string("none") : *alpn) +
                               ": the cluster's alpn_protocols do not offer h2; HTTP/1.1 used");
    } else {
      report_.warn("alpn",
                   (alpn->empty() ? std::string("no ALPN answer") : *alpn) +
                       ": the proxy refused h2, HTTP/1.1 used (one TLS connection per tunnel)",
                   "works, but without multiplexing; ask for HTTP/2 on the proxy");
    }
    *out = std::move(transport);
    return true;
  }

  // Proxy authentication as the request will carry it, made by the
  // gateway's own auth::RequestAuth: Basic, or a Negotiate token when the
  // cluster's proxy_authentication says negotiate (auto learns the scheme
  // from the proxy's 407, so nothing goes up front). A Proxy-Authorization
  // from upstream_headers wins over both, as in the daemon. The 407 is
  // judged by RequestAuth::onResponse below; check does not walk a second
  // leg (auto's retry, NTLM's challenge): it reports what the proxy asked for.
  bool proxyAuth(const config::Cluster& cluster, bool h2) {
    report_.begin();
    if (upstream::carriesAuthorization(target_.head, info_, cluster)) {
      report_.ok("proxy-auth", "Proxy-Authorization from upstream_headers");
      has_credentials_ = true;
      return true;
    }
    if (!upstream::auth::ProxyAuth::configured(cluster)) {
      report_.note("proxy-auth", "none configured");
      return true;
    }
    health_ = std::make_shared<upstream::ClusterHealth>(
        cluster.name,
        std::vector<std::string>{upstream::endpointLabel(cluster.endpoints.front().address,
                                                         cluster.endpoints.front().port_value)});
    auth_ = std::make_shared<upstream::auth::ProxyAuth>(
        cluster, io_, metrics::Registry::global().newShard(), health_);
    request_auth_ =
        std::make_shared<upstream::auth::RequestAuth>(auth_, kConnId, 1, /*has_body=*/false);
    std::optional<upstream::auth::Prepared> prepared;
    request_auth_->prepare(0, h2, false,
                           [&](upstream::auth::Prepared p) { prepared = std::move(p); });
    if (!runUntil(
            io_, [&] { return prepared.has_value(); }, options_.step_timeout))
      return report_.fail("proxy-auth", "no credentials within the step's time (Kerberos KDC?)",
                          "check the KDC is reachable and the ticket valid (klist)");
    authorization_ = std::move(prepared->authorization);
    has_credentials_ = true;
    const auto scheme = auth_->upFront(0);
    const std::string who =
        cluster.credentials ? " as '" + cluster.credentials->username + "'" : std::string();
    if (authorization_.empty())
      report_.note("proxy-auth", std::string(upstream::auth::schemeLabel(scheme)) +
                                     ": nothing up front (the scheme is chosen from the proxy's "
                                     "407)" +
                                     who);
    else
      report_.ok("proxy-auth",
                 std::string(upstream::auth::schemeLabel(scheme)) + " up front" + who);
    return true;
  }

  // Judges the proxy's answer to the CONNECT (or to the absolute-form HEAD).
  bool judgeProxyAnswer(const std::string& step) {
    if (!collector_->head) {
      if (collector_->failed_status != 0 || collector_->reset)
        return report_.fail(step, "no answer: " + collector_->reason,
                            "the proxy closed the connection; see its logs");
      return report_.fail(
          step, "no answer within " + std::to_string(options_.step_timeout.count()) + " ms",
          "the proxy (or what is behind it) does not answer in time");
    }
    const ResponseHead& h = *collector_->head;
    const std::string answer = std::to_string(h.status) + (h.reason.empty() ? "" : " " + h.reason);
    if (h.status == 407) {
      std::string why;
      if (request_auth_) {
        upstream::auth::Verdict v = request_auth_->onResponse(h, true, false);
        if (v.kind == upstream::auth::Verdict::Kind::Fail) why = v.reason;
        if (v.kind == upstream::auth::Verdict::Kind::Retry ||
            v.kind == upstream::auth::Verdict::Kind::Continue)
          report_.note(step, "the proxy asks for another leg (" +
                                 std::string(v.handshake ? "NTLM challenge"
                                                         : "a retry with the "
                                                           "scheme it offers") +
                                 "): the daemon does it; check stops here");
      }
      std::string schemes;
      for (const Header& x : h.headers)
        if (strcasecmp(x.name.c_str(), "Proxy-Authenticate") == 0)
          schemes += (schemes.empty() ? "" : ", ") + x.value.substr(0, x.value.find(' '));
      return report_.fail(
          step,
          "407 proxy authentication required (the proxy offers: " +
              (schemes.empty() ? std::string("no Proxy-Authenticate") : schemes) + ")",
          has_credentials_ ? "the proxy rejected the credentials: check user name and password"
                           : "give credentials: https://USER:PASSWORD@HOST:PORT in --upstream, or "
                             "credentials in the cluster");
    }
    if (target_.tls && (h.status < 200 || h.status > 299))
      return report_.fail(step, "CONNECT " + target_.head.authority() + " refused: " + answer,
                          h.status == 403   ? "the proxy's policy denies this destination or "
                                              "port (ask its administrator)"
                          : h.status >= 502 ? "the proxy could not reach the destination: "
                                              "check the name and port in the URL"
                                            : "see the proxy's logs");
    if (target_.tls) {
      report_.ok(step, "CONNECT " + target_.head.authority() + ": " + answer);
      return true;
    }
    status_ = h.status;
    if (h.status >= 500 || h.status == 403)
      return report_.fail(step, "HEAD " + target_.head.target + " through the proxy: " + answer,
                          h.status == 403 ? "the proxy's policy denies this destination"
                                          : "the proxy could not reach the destination");
    report_.ok(step, "HEAD " + target_.head.target + " through the proxy: " + answer);
    return true;
  }

  bool h2Request(std::unique_ptr<upstream::Transport> transport) {
    report_.begin();
    info_.protocol = "h2";
    stats_ = upstream::makeEndpointStats(metrics::Registry::global().newShard(), cluster_->name,
                                         peer_, 0);
    h2_ = std::make_shared<upstream::H2Connection>(std::move(transport), *cluster_, kConnId, peer_,
                                                   &owner_, stats_);
    if (std::string err = h2_->start(); !err.empty())
      return report_.fail("h2", err, "see the proxy's logs");
    if (!runUntil(
            io_, [&] { return owner_.capacity_changes > 0 || owner_.closed; },
            options_.step_timeout) ||
        owner_.closed)
      return report_.fail(
          "h2",
          "no HTTP/2 SETTINGS from the proxy" + (owner_.reason.empty() ? "" : ": " + owner_.reason),
          "the proxy offered h2 in ALPN but does not speak it");
    report_.ok("h2", "session up (SETTINGS exchanged)");
    auto stream = std::make_shared<upstream::H2Stream>(h2_, kConnId, 1);
    if (!authorization_.empty()) stream->setAuthorization(authorization_);
    return openTunnel(stream);
  }

  bool h1Request(std::unique_ptr<upstream::Transport> transport) {
    info_.protocol = "http1";
    const RequestHead& h = target_.head;
    // As UpstreamPool sends it (pool.cc, attachH1).
    std::string bytes =
        h.is_connect
            ? "CONNECT " + h.authority() + " HTTP/1.1\r\nHost: " + h.authority() + "\r\n"
            : h.method + " " + h.target + " HTTP/1.1\r\nHost: " + http1::hostHeader(h) + "\r\n";
    for (Header& x : upstream::forwardedHeaders(h, info_, *cluster_, false, authorization_)) {
      bytes += x.name + ": " + x.value + "\r\n";
      config::wipe(x.value);  // credentials among them
    }
    bytes += "\r\n";
    auto exchange = std::make_shared<upstream::Http1Exchange>(
        std::move(transport),
        h.is_connect ? upstream::Http1Exchange::Kind::ProxyConnect
                     : upstream::Http1Exchange::Kind::Request,
        std::move(bytes), kConnId, 1);
    OPENSSL_cleanse(bytes.data(), bytes.size());
    return openTunnel(exchange);
  }

  bool openTunnel(std::shared_ptr<upstream::Tunnel> tunnel) {
    report_.begin();
    tunnel_ = std::move(tunnel);
    collector_ = std::make_unique<Collector>(io_);
    tunnel_->open(target_.head, info_, *collector_);
    if (!target_.tls) tunnel_->endOfRequest();
    runUntil(
        io_, [&] { return collector_->head.has_value() || collector_->ended; },
        options_.step_timeout);
    if (!judgeProxyAnswer(target_.tls ? "connect" : "request")) return false;
    if (!target_.tls) return true;
    return originRequest();
  }

  // Direct mode: h2gate connects to the destination itself.
  bool direct() {
    info_.protocol = "direct";
    const RequestHead& h = target_.head;
    std::vector<asio::ip::tcp::endpoint> addresses;
    if (!resolve("destination", h.host, h.port, options_.step_timeout, &addresses,
                 "check the URL's host name and this machine's DNS"))
      return false;
    for (const auto& a : addresses) {
      auto ip = net::parseIp(a.address().to_string());
      if (!ip) continue;
      for (const filters::FilterPtr& f : filters_)
        if (auto refusal = f->checkAddress(h, info_, ip->unmapped()))
          return report_.fail("policy",
                              h.host + " resolves to " + ip->str() + ", refused: " +
                                  std::to_string(refusal->status) + " " + refusal->reason,
                              "the config's rules refuse this address");
    }
    if (!connect("destination", addresses, options_.step_timeout,
                 "check the URL's port; a network that needs a proxy wants --upstream"))
      return false;
    info_.upstream = peer_;
    auto exchange = std::make_shared<upstream::Http1Exchange>(
        std::make_unique<upstream::Transport>(std::move(*socket_)),
        upstream::Http1Exchange::Kind::DirectConnect, std::string(), kConnId, 1);
    tunnel_ = exchange;
    collector_ = std::make_unique<Collector>(io_);
    tunnel_->open(h, info_, *collector_);
    return originRequest();
  }

  // --- the request through the tunnel: bytes go through Tunnel::send and
  // come back through the Collector, with TLS (memory BIOs) for https.

  bool sendRaw(const std::string& bytes) {
    if (bytes.empty()) return true;
    bool sent = false;
    tunnel_->send(bytes, [&] { sent = true; });
    return runUntil(
               io_, [&] { return sent || collector_->ended; }, options_.step_timeout) &&
           sent;
  }
  // Waits for more bytes (or the end); false when none came.
  bool receiveRaw() {
    if (!collector_->data.empty()) return true;
    runUntil(
        io_, [&] { return !collector_->data.empty() || collector_->ended; }, options_.step_timeout);
    return !collector_->data.empty();
  }
  bool flushTls(SSL* ssl) {
    BIO* wbio = SSL_get_wbio(ssl);
    std::string out;
    char buf[16384];
    int n;
    while ((n = BIO_read(wbio, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    return sendRaw(out);
  }
  bool feedTls(SSL* ssl) {
    if (!receiveRaw()) return false;
    BIO_write(SSL_get_rbio(ssl), collector_->data.data(),
              static_cast<int>(collector_->data.size()));
    collector_->data.clear();
    return true;
  }

  bool originRequest() {
    const RequestHead& h = target_.head;
    struct SslFree {
      void operator()(SSL* s) const { SSL_free(s); }
      void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
    };
    std::unique_ptr<SSL_CTX, SslFree> ctx;
    std::unique_ptr<SSL, SslFree> ssl;
    if (target_.tls) {
      report_.begin();
      ctx.reset(SSL_CTX_new(TLS_client_method()));
      SSL_CTX_set_default_verify_paths(ctx.get());
      // Verified and reported, not enforced: the app verifies the origin.
      SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
      static const unsigned char kAlpn[] = "\x08http/1.1";
      SSL_CTX_set_alpn_protos(ctx.get(), kAlpn, sizeof kAlpn - 1);
      ssl.reset(SSL_new(ctx.get()));
      if (!config::isIpLiteral(h.host)) SSL_set_tlsext_host_name(ssl.get(), h.host.c_str());
      if (config::isIpLiteral(h.host))
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), h.host.c_str());
      else
        SSL_set1_host(ssl.get(), h.host.c_str());
      SSL_set_bio(ssl.get(), BIO_new(BIO_s_mem()), BIO_new(BIO_s_mem()));
      SSL_set_connect_state(ssl.get());
      for (;;) {
        const int r = SSL_do_handshake(ssl.get());
        if (!flushTls(ssl.get()))
          return report_.fail("origin-tls", "the tunnel broke: " + collector_->reason,
                              "the proxy closed the tunnel; see its logs");
        if (r == 1) break;
        if (SSL_get_error(ssl.get(), r) == SSL_ERROR_WANT_READ && feedTls(ssl.get())) continue;
        return report_.fail("origin-tls",
                            "TLS handshake with " + h.authority() + " through the tunnel failed" +
                                (collector_->ended ? " (tunnel closed)" : "") + ": " +
                                opensslErrors(),
                            "the destination does not speak TLS on this port, or the proxy "
                            "cut the tunnel");
      }
      const long v = SSL_get_verify_result(ssl.get());
      const std::string text =
          std::string(SSL_get_version(ssl.get())) + "; chain: " + chainText(ssl.get());
      if (v == X509_V_OK)
        report_.ok("origin-tls", text + "; verified with the system store");
      else
        report_.warn(
            "origin-tls",
            text + "; not verified with the system store: " + X509_verify_cert_error_string(v),
            "apps that trust only the system store will refuse it (a TLS-inspecting "
            "proxy? then its CA belongs in the system store)");
    }
    report_.begin();
    const std::string request =
        "HEAD " + target_.path + " HTTP/1.1\r\nHost: " + http1::hostHeader(h) +
        "\r\nUser-Agent: h2gate-check/" + H2GATE_VERSION + "\r\nConnection: close\r\n\r\n";
    std::string response;
    if (ssl) {
      SSL_write(ssl.get(), request.data(), static_cast<int>(request.size()));
      if (!flushTls(ssl.get()))
        return report_.fail("request", "the tunnel broke: " + collector_->reason, "-");
      char buf[16384];
      while (response.find("\r\n\r\n") == std::string::npos) {
        const int n = SSL_read(ssl.get(), buf, sizeof buf);
        if (n > 0) {
          response.append(buf, static_cast<size_t>(n));
          continue;
        }
        if (SSL_get_error(ssl.get(), n) == SSL_ERROR_WANT_READ && feedTls(ssl.get())) continue;
        break;
      }
    } else {
      if (!sendRaw(request))
        return report_.fail("request", "the tunnel broke: " + collector_->reason, "-");
      while (response.find("\r\n\r\n") == std::string::npos && receiveRaw()) {
        response += collector_->data;
        collector_->data.clear();
      }
    }
    int status = 0;
    char version[16] = {};
    if (std::sscanf(response.c_str(), "HTTP/%15s %d", version, &status) != 2 || status < 100)
      return report_.fail("request",
                          "no HTTP answer from " + h.authority() +
                              (response.empty() ? "" : " (got '" + response.substr(0, 40) + "')"),
                          "the destination does not speak HTTP on this port");
    status_ = status;
    const std::string first = response.substr(0, response.find("\r\n"));
    report_.ok("request", "HEAD " + target_.path + " -> " + first);
    return true;
  }

  const config::Bootstrap& bootstrap_;
  const Options& options_;
  std::ostream& out_;
  Report report_;
  asio::io_context io_;
  std::shared_ptr<net::TlsContext> tls_ctx_;  // outlives the connections below
  Target target_;
  StreamInfo info_;
  std::vector<filters::FilterPtr> filters_;
  const config::Cluster* cluster_ = nullptr;
  std::unique_ptr<asio::ip::tcp::socket> socket_;
  std::string peer_;
  bool has_credentials_ = false;
  std::shared_ptr<upstream::ClusterHealth> health_;
  std::shared_ptr<upstream::auth::ProxyAuth> auth_;
  std::shared_ptr<upstream::auth::RequestAuth> request_auth_;
  std::string authorization_;  // the cluster's Proxy-Authorization; a secret, wiped
  int status_ = 0;
  H2Owner owner_;
  std::shared_ptr<upstream::EndpointStats> stats_;
  std::shared_ptr<upstream::H2Connection> h2_;
  std::unique_ptr<Collector> collector_;
  std::shared_ptr<upstream::Tunnel> tunnel_;
};

}  // namespace

int run(const config::Bootstrap& bootstrap, const Options& options, std::ostream& out) {
  Checker checker(bootstrap, options, out);
  return checker.run();
}

}  // namespace h2gate::check
