#include "gateway/check/check.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include <asio.hpp>

#include "config/loader.h"
#include "filters/filter.h"
#include "filters/forward_proxy.h"
#include "filters/pac_routing.h"
#include "filters/registry.h"
#include "gateway/base/ascii.h"
#include "gateway/check/check_auth.h"
#include "gateway/check/check_report.h"
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
#include "gateway/upstream/router.h"
#include "gateway/upstream/transport.h"
#include "gateway/upstream/tunnel.h"
#include "gateway/upstream/upstream_stats.h"

namespace h2gate::check {
namespace {

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
  const std::string scheme = toLowerAscii(std::string_view(url).substr(0, sep));
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
      : bootstrap_(b),
        options_(o),
        out_(out),
        report_(out),
        auth_walk_(io_, report_, o.step_timeout, kConnId) {}
  ~Checker() {
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
    for (const Options::Warning& w : options_.warnings) report_.warn("account", w.detail, w.advice);
    bool ok = route();
    if (ok) ok = routes();
    if (!ok || report_.failed()) {
      for (const std::string& t : report_.tried()) out_ << "  (tried before: " << t << ")\n";
      out_ << report_.failure() << "\n";
      return 1;
    }
    std::string line = "OK: " + options_.url + " answered " + std::to_string(status_) + " " +
                       (info_.cluster.empty() ? "directly (DIRECT)"
                                              : "through " + routeName(info_.cluster) + " (" +
                                                    info_.upstream + ", " + info_.protocol + ")");
    if (!report_.tried().empty()) {
      line += "; after " + std::to_string(report_.tried().size()) + " that could not be reached:";
      for (size_t i = 0; i < report_.tried().size(); ++i)
        line += (i ? "; " : " ") + report_.tried()[i];
    }
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
    if (info_.route_decider && !pacDecision()) return false;
    std::string fallbacks;
    for (const std::string& f : info_.fallbacks)
      fallbacks += (fallbacks.empty() ? "" : ", ") + routeName(f);
    report_.ok(
        "route",
        "listener '" + listener->name + "': " + target_.head.method + " " + target_.head.target +
            " goes " +
            (info_.cluster.empty() ? std::string("DIRECT") : "to " + routeName(info_.cluster)) +
            (fallbacks.empty() ? "" : " (then, if it cannot be reached: " + fallbacks + ")"));
    return true;
  }

  // A route that follows a PAC file (forward_proxy's pac:): the PAC file
  // loaded as the daemon loads it, its answer for the URL, and the routes
  // the daemon makes of it (filters/pac_routing.h) in info_.
  bool pacDecision() {
    report_.begin();
    std::shared_ptr<filters::PacRoute> pac;
    for (const filters::FilterPtr& f : filters_)
      if (auto fp = std::dynamic_pointer_cast<const filters::ForwardProxyFilter>(f))
        for (const std::shared_ptr<filters::PacRoute>& r : fp->pacRoutes())
          if (r.get() == info_.route_decider.get()) pac = r;
    if (pac) {
      if (std::string err = pac->start(); !err.empty())
        return report_.fail("pac", err, "fix the pac: route's settings");
      const pac::PacSourceConfig& source = pac->config().source;
      // The source fetches and the evaluator loads on threads of their
      // own: wait until a PAC file is in use, or a fetch or a load failed.
      const auto deadline = Clock::now() + source.fetch.timeout + options_.step_timeout;
      for (;;) {
        const filters::PacRoute::Counters c = pac->counters();
        if (c.have_script || c.download_failures > 0 || c.load_failures > 0 ||
            Clock::now() >= deadline)
          break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (!pac->counters().have_script) {
        const std::string why = pac->degraded();
        report_.warn("pac",
                     why.empty()
                         ? "no PAC file within " +
                               std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                                  source.fetch.timeout)
                                                  .count()) +
                               " s"
                         : why,
                     "the daemon would take the route's fallback until the PAC file loads: check "
                     "its URL or file (--pac, --wpad, --system-proxy, or the config's pac:)");
      } else {
        std::string in_use, sha;
        std::istringstream lines(pac->describe(false));
        for (std::string line; std::getline(lines, line);) {
          if (line.starts_with("in use: ")) in_use = line.substr(8);
          if (line.starts_with("sha256: ")) sha = line.substr(8, 16);
        }
        report_.ok("pac", "PAC file from " + in_use + " (sha256 " + sha + "...)");
      }
      // What the PAC file answers, and which proxies get credentials.
      // Held by the callback too: it may come after a timeout, while the
      // loop runs for a later step.
      auto explained = std::make_shared<std::optional<std::string>>();
      pac->explain(target_.tls ? "https://" + target_.head.authority() + "/" : target_.head.target,
                   io_.get_executor(),
                   [explained](int, std::string text) { *explained = std::move(text); });
      runUntil(
          io_, [&] { return explained->has_value(); }, options_.step_timeout);
      std::istringstream lines(explained->value_or(""));
      for (std::string line; std::getline(lines, line);)
        if (line.starts_with("FindProxyForURL") || line.starts_with("answer: ") ||
            line.starts_with("error: ") || line.starts_with("h2gate uses ") ||
            line.starts_with("skipped: ") || line.starts_with("credentials for "))
          report_.note("pac", serverText(line));
    }
    auto decision = std::make_shared<std::optional<upstream::RouteDecider::Decision>>();
    info_.route_decider->decide(
        target_.head, info_, io_.get_executor(),
        [decision](upstream::RouteDecider::Decision d) { *decision = std::move(d); });
    if (!runUntil(
            io_, [&] { return decision->has_value(); }, options_.step_timeout))
      return report_.fail("pac", "no answer from the PAC file within " + stepTimeoutText(),
                          "see the log lines above");
    const upstream::RouteDecider::Decision& d = **decision;
    if (d.routes.empty())
      return report_.fail("route",
                          "the PAC route refuses " + target_.head.authority() + ": " +
                              std::to_string(d.status) + " " + d.reason,
                          "the PAC file has no answer h2gate can use and the route's fallback "
                          "rejects");
    info_.cluster = d.routes.front();
    info_.fallbacks.assign(d.routes.begin() + 1, d.routes.end());
    return true;
  }

  // A step that waits for a server more than once (TLS and the request
  // through the tunnel) has one deadline for all its waits: a server that
  // sends a byte every few seconds cannot keep it going.
  void startStep() {
    report_.begin();
    step_deadline_ = Clock::now() + options_.step_timeout;
  }
  Clock::duration stepLeft() const {
    return std::max(step_deadline_ - Clock::now(), Clock::duration::zero());
  }
  bool stepExpired() const { return Clock::now() >= step_deadline_; }
  std::string stepTimeoutText() const {
    const auto ms = options_.step_timeout.count();
    return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
  }

  // "DIRECT", "cluster 'NAME'", or a proxy a PAC file named ("PROXY h:p").
  static std::string routeName(const std::string& cluster) {
    bool tls = false;
    std::string host;
    uint16_t port = 0;
    if (upstream::parseProxyRoute(cluster, &tls, &host, &port)) return cluster;
    return cluster.empty() ? std::string("DIRECT") : "cluster '" + cluster + "'";
  }
  // A failure after which the daemon goes on to the next endpoint of the
  // cluster (the pool marks the endpoint down) or, when every endpoint
  // failed so, to the next route (FallbackTunnel, router.cc: the request
  // never reached a proxy that could act on it).
  bool unreachable() const {
    const std::string& s = report_.failedStep();
    return s == "dns" || s == "tcp" || s == "tls";
  }

  // The route, then its fallbacks in the order the daemon tries them.
  bool routes() {
    std::vector<std::string> order{info_.cluster};
    order.insert(order.end(), info_.fallbacks.begin(), info_.fallbacks.end());
    for (size_t i = 0; i < order.size(); ++i) {
      if (i > 0) {
        report_.recover(routeName(order[i - 1]));
        report_.begin();
        report_.note("fallback", routeName(order[i - 1]) + " cannot be reached: on to " +
                                     routeName(order[i]) + ", as the daemon does");
      }
      resetConnection(/*next_cluster=*/true);
      info_.cluster = order[i];
      info_.fallbacks.assign(order.begin() + static_cast<std::ptrdiff_t>(i) + 1, order.end());
      const bool ok = order[i].empty() ? direct() : viaProxy();
      if (ok || !unreachable() || i + 1 == order.size()) return ok;
    }
    return false;
  }

  // Drops what the last endpoint's attempt left (connection, tunnel,
  // per-request credentials); with `next_cluster` the cluster's too.
  void resetConnection(bool next_cluster) {
    if (tunnel_) tunnel_->abort();
    tunnel_.reset();
    if (h2_) h2_->close("check: next endpoint", false);
    h2_.reset();
    io_.restart();
    io_.poll();
    collector_.reset();
    socket_.reset();
    auth_walk_.resetRequest();
    if (!next_cluster) return;
    // TLS contexts stay until the end: connections closed above may still
    // hold SSL objects that call back into theirs.
    if (tls_ctx_) old_tls_.push_back(std::move(tls_ctx_));
    auth_walk_.setCluster(nullptr);
    has_credentials_ = false;
    auth_refused_.clear();
    cluster_ = nullptr;
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

  // The cluster of route info_.cluster: the config's, or the one the
  // daemon makes for a proxy a PAC file named (upstream::proxyCluster).
  const config::Cluster* routeCluster() {
    if (const config::Cluster* c = bootstrap_.findCluster(info_.cluster)) return c;
    bool tls = false;
    std::string host;
    uint16_t port = 0;
    if (!info_.route_decider || !upstream::parseProxyRoute(info_.cluster, &tls, &host, &port))
      return nullptr;
    const std::shared_ptr<const upstream::ProxyTemplate> tmpl = info_.route_decider->proxies();
    if (!tmpl) return nullptr;
    proxy_clusters_.push_back(upstream::proxyCluster(*tmpl, info_.cluster, &auth_refused_));
    report_.begin();
    if (!auth_refused_.empty())
      report_.note("proxy-auth", info_.cluster + " gets no credentials: " + auth_refused_ +
                                     " (a 407 from it goes to the app)");
    return &proxy_clusters_.back();
  }

  bool viaProxy() {
    const config::Cluster* cluster = routeCluster();
    if (cluster == nullptr || cluster->endpoints.empty())
      return report_.fail("route", "cluster '" + info_.cluster + "' has no endpoint",
                          "fix the configuration");
    cluster_ = cluster;
    auth_walk_.setCluster(cluster);
    const size_t n = cluster->endpoints.size();
    // As the pool of a daemon that just started: round robin from the first
    // endpoint, the next one when a connection to one fails.
    for (endpoint_ = 0; endpoint_ < n; ++endpoint_) {
      const config::SocketAddress& ep = cluster->endpoints[endpoint_];
      const std::string label = upstream::endpointLabel(ep.address, ep.port_value);
      if (endpoint_ > 0) {
        const config::SocketAddress& prev = cluster->endpoints[endpoint_ - 1];
        report_.recover("cluster '" + cluster->name + "' endpoint " +
                        upstream::endpointLabel(prev.address, prev.port_value));
        resetConnection(/*next_cluster=*/false);
      }
      if (n > 1) {
        report_.begin();
        report_.note("endpoint", "cluster '" + cluster->name + "' endpoint " +
                                     std::to_string(endpoint_ + 1) + " of " + std::to_string(n) +
                                     ": " + label);
      }
      const bool ok = viaEndpoint(*cluster, ep);
      if (ok || !unreachable() || endpoint_ + 1 == n) return ok;
    }
    return false;
  }

  // One endpoint: connection, authentication legs, CONNECT (or HEAD), and
  // the request through the tunnel.
  bool viaEndpoint(const config::Cluster& cluster, const config::SocketAddress& ep) {
    auth_walk_.startEndpoint(endpoint_);
    std::unique_ptr<upstream::Transport> transport;
    std::string alpn;
    if (!connectProxy(cluster, ep, &transport, &alpn)) return false;
    info_.upstream = peer_;
    if (!auth_walk_.describe(upstream::carriesAuthorization(target_.head, info_, cluster),
                             &has_credentials_))
      return false;
    // At most three attempts: RequestAuth retries once (auto, after the 407
    // that names the scheme), and a proxy that wants NTLM while spoken to
    // over h2 is reached again over HTTP/1.1, as the pool does.
    for (int attempt = 0; attempt < 3; ++attempt) {
      const bool h2 = alpn == "h2" && !auth_walk_.http1Only();
      if (h2 ? (!h2_ && !transport) : !transport) {
        if (h2_ && auth_walk_.http1Only()) {
          h2_->close("the proxy wants NTLM: HTTP/1.1 from now on", false);
          h2_.reset();
        }
        report_.note("reconnect",
                     std::string(auth_walk_.http1Only() ? "over HTTP/1.1 (NTLM needs a "
                                                          "connection of its own)"
                                                        : "a new connection") +
                         ", as the daemon does for the next attempt");
        if (!connectProxy(cluster, ep, &transport, &alpn)) return false;
        info_.upstream = peer_;
      }
      auth_walk_.clearRetry();
      const bool ok = (alpn == "h2" && !auth_walk_.http1Only()) ? h2Request(std::move(transport))
                                                                : h1Request(std::move(transport));
      if (!auth_walk_.retryRequested()) return ok;
      transport.reset();
      if (tunnel_) tunnel_->abort();
      tunnel_.reset();
    }
    return report_.fail("proxy-auth", "the proxy still asks for authentication after a retry",
                        "see the lines above for what it asked and what was sent");
  }

  // DNS, TCP and (for an https:// proxy) TLS to endpoint `ep`: a new
  // connection in `*out`, the ALPN protocol chosen in `*alpn`.
  bool connectProxy(const config::Cluster& cluster, const config::SocketAddress& ep,
                    std::unique_ptr<upstream::Transport>* out, std::string* alpn) {
    const std::string proxy = "proxy";
    std::vector<asio::ip::tcp::endpoint> addresses;
    if (!resolve(proxy, ep.address, ep.port_value, cluster.connect_timeout, &addresses,
                 "check the proxy's name in the config (--upstream or the cluster's "
                 "endpoints) and this machine's DNS (/etc/resolv.conf)"))
      return false;
    if (!connect(proxy, addresses, cluster.connect_timeout,
                 "check the proxy's address and port in the config"))
      return false;
    alpn->clear();
    if (cluster.tls) return proxyTls(cluster, ep, out, alpn);
    report_.note("tls", "none: the cluster is a plain-TCP (http://) proxy; HTTP/1.1");
    *out = std::make_unique<upstream::Transport>(std::move(*socket_));
    return true;
  }

  bool proxyTls(const config::Cluster& cluster, const config::SocketAddress& ep,
                std::unique_ptr<upstream::Transport>* out, std::string* alpn) {
    report_.begin();
    std::string err;
    // Kept until the end: its SSL objects call back into it (sessions).
    if (!tls_ctx_) tls_ctx_ = net::TlsContext::create(*cluster.tls, cluster.name, &err);
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
    if (auth_walk_.http1Only()) {
      // As the pool's Connector for a proxy that wants NTLM.
      static constexpr unsigned char kHttp1[] = "\x08http/1.1";
      SSL_set_alpn_protos(ssl, kHttp1, sizeof kHttp1 - 1);
    }
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
      report_.note("alpn", (alpn->empty() ? std::string("none") : serverText(*alpn)) +
                               ": the cluster's alpn_protocols do not offer h2; HTTP/1.1 used");
    } else {
      report_.warn("alpn",
                   (alpn->empty() ? std::string("no ALPN answer") : serverText(*alpn)) +
                       ": the proxy refused h2, HTTP/1.1 used (one TLS connection per tunnel)",
                   "works, but without multiplexing; ask for HTTP/2 on the proxy");
    }
    *out = std::move(transport);
    return true;
  }

  // Judges the proxy's answer to the CONNECT (or to the absolute-form HEAD).
  bool judgeProxyAnswer(const std::string& step) {
    if (!collector_->head) {
      if (report_.failed()) return false;  // the auth hook said why
      if (collector_->failed_status != 0 || collector_->reset)
        return report_.fail(step, "no answer: " + collector_->reason,
                            "the proxy closed the connection, or its answer is not HTTP/1.1 "
                            "that h2gate accepts (a head is at most " +
                                std::to_string(http1::Limits{}.max_head_bytes / 1024) +
                                " KiB); see its logs");
      return report_.fail(step,
                          "no complete answer within " + stepTimeoutText() + " (--step-timeout)",
                          "the proxy (or what is behind it) does not answer in time; "
                          "--step-timeout DURATION waits longer");
    }
    const ResponseHead& h = *collector_->head;
    const std::string answer =
        std::to_string(h.status) + (h.reason.empty() ? "" : " " + serverText(h.reason));
    if (h.status == 407 && !auth_refused_.empty())
      return report_.fail("proxy-auth",
                          answer + " from " + routeName(info_.cluster) +
                              ", which gets no credentials: " + auth_refused_,
                          "to send it credentials, add its host with --proxy-auth-allow HOST "
                          "(pac.proxies.authenticate_to in a config file)");
    if (h.status == 407) return auth_walk_.fail407(h, step, has_credentials_);
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

  // Over h2: the session (once per connection), then a stream with the
  // credentials and the daemon's auth hook.
  bool h2Request(std::unique_ptr<upstream::Transport> transport) {
    info_.protocol = "h2";
    if (!h2_) {
      report_.begin();
      stats_ = upstream::makeEndpointStats(metrics::Registry::global().newShard(), cluster_->name,
                                           peer_, endpoint_);
      owners_.push_back(std::make_unique<H2Owner>());
      H2Owner& owner = *owners_.back();
      h2_ = std::make_shared<upstream::H2Connection>(std::move(transport), *cluster_, kConnId,
                                                     peer_, &owner, stats_);
      if (std::string err = h2_->start(); !err.empty())
        return report_.fail("h2", err, "see the proxy's logs");
      if (!runUntil(
              io_, [&] { return owner.capacity_changes > 0 || owner.closed; },
              options_.step_timeout) ||
          owner.closed)
        return report_.fail(
            "h2",
            "no HTTP/2 SETTINGS from the proxy" + (owner.reason.empty() ? "" : ": " + owner.reason),
            "the proxy offered h2 in ALPN but does not speak it");
      report_.ok("h2", "session up (SETTINGS exchanged)");
    }
    if (!auth_walk_.prepare(true)) return false;
    auto stream = std::make_shared<upstream::H2Stream>(h2_, kConnId, ++stream_id_);
    if (auth_walk_.active()) {
      stream->setAuthorization(auth_walk_.authorization());
      stream->setAuthHook([this](const ResponseHead& head, bool can_retry) {
        return auth_walk_.onResponse(head, can_retry, /*same_connection=*/false);
      });
    }
    return openTunnel(stream);
  }

  // The request head for an HTTP/1.1 proxy, as the pool writes it (pool.cc,
  // h1Head); a secret while it carries credentials.
  std::string h1Head(const std::string& authorization) const {
    const RequestHead& h = target_.head;
    std::string bytes =
        h.is_connect
            ? "CONNECT " + h.authority() + " HTTP/1.1\r\nHost: " + h.authority() + "\r\n"
            : h.method + " " + h.target + " HTTP/1.1\r\nHost: " + http1::hostHeader(h) + "\r\n";
    for (Header& x : upstream::forwardedHeaders(h, info_, *cluster_, false, authorization)) {
      bytes += x.name + ": " + x.value + "\r\n";
      config::wipe(x.value);  // credentials among them
    }
    bytes += "\r\n";
    return bytes;
  }

  bool h1Request(std::unique_ptr<upstream::Transport> transport) {
    info_.protocol = "http1";
    if (!auth_walk_.prepare(false)) return false;
    const RequestHead& h = target_.head;
    std::string bytes = h1Head(auth_walk_.authorization());
    auto exchange = std::make_shared<upstream::Http1Exchange>(
        std::move(transport),
        h.is_connect ? upstream::Http1Exchange::Kind::ProxyConnect
                     : upstream::Http1Exchange::Kind::Request,
        std::move(bytes), kConnId, ++stream_id_);
    config::wipe(bytes);
    if (auth_walk_.active()) {
      upstream::Http1Exchange::AuthHooks hooks;
      hooks.handshake = auth_walk_.handshake();
      hooks.on_response = [this](const ResponseHead& head, bool can_retry, bool keep_alive) {
        return auth_walk_.onResponse(head, can_retry, keep_alive);
      };
      hooks.head = [this](const std::string& authorization, bool) { return h1Head(authorization); };
      exchange->setAuth(std::move(hooks));
    }
    return openTunnel(exchange);
  }

  bool openTunnel(std::shared_ptr<upstream::Tunnel> tunnel) {
    report_.begin();
    tunnel_ = std::move(tunnel);
    collector_ = std::make_unique<Collector>(io_);
    tunnel_->open(target_.head, info_, *collector_);
    if (!target_.tls) tunnel_->endOfRequest();
    runUntil(
        io_,
        [&] {
          return collector_->head.has_value() || collector_->ended || auth_walk_.retryRequested();
        },
        options_.step_timeout);
    if (auth_walk_.retryRequested()) return false;
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
               io_, [&] { return sent || collector_->ended; }, stepLeft()) &&
           sent;
  }
  // Waits for more bytes (or the end); false when none came.
  bool receiveRaw() {
    if (!collector_->data.empty()) return true;
    runUntil(
        io_, [&] { return !collector_->data.empty() || collector_->ended; }, stepLeft());
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

  // The step's deadline passed while the destination was still answering.
  bool originTimeout(const std::string& step, const std::string& what) {
    return report_.fail(step,
                        "no complete " + what + " from " + target_.head.authority() + " within " +
                            stepTimeoutText() + " (--step-timeout)",
                        "the destination (or the path to it) answers too slowly or not at all: "
                        "check the URL's host and port; --step-timeout DURATION waits longer");
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
      startStep();
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
          return stepExpired() && !collector_->ended
                     ? originTimeout("origin-tls", "TLS handshake")
                     : report_.fail("origin-tls", "the tunnel broke: " + collector_->reason,
                                    "the proxy closed the tunnel; see its logs");
        if (r == 1) break;
        if (SSL_get_error(ssl.get(), r) == SSL_ERROR_WANT_READ && feedTls(ssl.get())) continue;
        if (stepExpired() && !collector_->ended)
          return originTimeout("origin-tls", "TLS handshake");
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
    startStep();
    const std::string request =
        "HEAD " + target_.path + " HTTP/1.1\r\nHost: " + http1::hostHeader(h) +
        "\r\nUser-Agent: h2gate-check/" + H2GATE_VERSION + "\r\nConnection: close\r\n\r\n";
    std::string response;
    // As the daemon's parser (http1::Limits): a head that has not ended by
    // then never will be one h2gate accepts.
    const size_t max_head = http1::Limits{}.max_head_bytes;
    auto more = [&] {
      return response.find("\r\n\r\n") == std::string::npos && response.size() <= max_head;
    };
    if (ssl) {
      SSL_write(ssl.get(), request.data(), static_cast<int>(request.size()));
      if (!flushTls(ssl.get()))
        return report_.fail("request", "the tunnel broke: " + collector_->reason, "-");
      char buf[16384];
      while (more()) {
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
      while (more() && receiveRaw()) {
        response += collector_->data;
        collector_->data.clear();
      }
    }
    if (response.find("\r\n\r\n") == std::string::npos) {
      if (response.size() > max_head)
        return report_.fail(
            "request",
            "the response head from " + h.authority() + " has no end within its first " +
                std::to_string(max_head / 1024) +
                " KiB (h2gate's limit for a response head, the daemon's too)",
            "the destination does not speak HTTP on this port, or its answer is broken: check "
            "the URL's port, or ask the server's administrator");
      if (stepExpired() && !collector_->ended)
        return originTimeout("request",
                             "response head (" + std::to_string(response.size()) + " bytes came)");
    }
    int status = 0;
    char version[16] = {};
    if (std::sscanf(response.c_str(), "HTTP/%15s %d", version, &status) != 2 || status < 100)
      return report_.fail("request",
                          "no HTTP answer from " + h.authority() +
                              (response.empty() ? "" : " (got '" + serverText(response, 40) + "')"),
                          "the destination does not speak HTTP on this port");
    status_ = status;
    const std::string first = response.substr(0, response.find("\r\n"));
    report_.ok("request", "HEAD " + target_.path + " -> " + serverText(first));
    return true;
  }

  const config::Bootstrap& bootstrap_;
  const Options& options_;
  std::ostream& out_;
  Report report_;
  asio::io_context io_;
  AuthWalk auth_walk_;                        // uses io_ and report_
  std::shared_ptr<net::TlsContext> tls_ctx_;  // outlives the connections below
  Target target_;
  StreamInfo info_;
  std::vector<filters::FilterPtr> filters_;
  const config::Cluster* cluster_ = nullptr;
  // Clusters made for the proxies a PAC file named (stable addresses).
  std::deque<config::Cluster> proxy_clusters_;
  // Why the proxy of the route being checked gets no credentials (its
  // authenticate_to); "" when it does, or is no PAC-named proxy.
  std::string auth_refused_;
  std::unique_ptr<asio::ip::tcp::socket> socket_;
  std::string peer_;
  bool has_credentials_ = false;
  size_t endpoint_ = 0;     // the cluster endpoint being checked
  uint64_t stream_id_ = 0;  // per attempt, for the gateway code's log lines
  int status_ = 0;
  Clock::time_point step_deadline_;  // of the step under way (startStep)
  // One per h2 connection, kept to the end (a closed connection may still
  // report to its owner while the loop runs).
  std::vector<std::unique_ptr<H2Owner>> owners_;
  std::vector<std::shared_ptr<net::TlsContext>> old_tls_;
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
