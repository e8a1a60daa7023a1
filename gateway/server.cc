#include "gateway/server.h"
#include "gateway/net/address.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>

#include "config/loader.h"
#include "filters/pac.h"
#include "filters/registry.h"
#include "gateway/log.h"
#include "gateway/net/socket_tuning.h"
#include "gateway/reload_plan.h"

namespace h2gate {
Server::Server(config::Bootstrap bootstrap, Reloader reloader)
    : bootstraps_{std::make_shared<const config::Bootstrap>(std::move(bootstrap))},
      bootstrap_(bootstraps_.back()),
      reloader_(std::move(reloader)),
      started_(std::chrono::steady_clock::now()),
      started_wall_(std::chrono::system_clock::now()),
      signals_(main_io_, SIGTERM, SIGINT),
      drain_timer_(main_io_) {
#ifdef SIGHUP
  signals_.add(SIGHUP);
#endif
}

Server::~Server() {
  if (metrics_source_) metrics::Registry::global().removeSource(metrics_source_);
  for (auto& w : workers_) w->stop();
}

std::string Server::buildListeners(const config::Bootstrap& b, const std::vector<uint16_t>& ports,
                                   ListenerContexts& out) {
  for (size_t i = 0; i < b.listeners.size(); ++i) {
    const config::Listener& l = b.listeners[i];
    auto ctx = std::make_shared<downstream::ListenerContext>();
    ctx->name = l.name;
    ctx->bootstrap = &b;
    ctx->limits.max_head_bytes = static_cast<size_t>(l.max_request_headers_kb) * 1024;
    ctx->limits.max_headers = l.max_request_headers_count;
    ctx->direct_connect_timeout = l.direct_connect_timeout;
    ctx->send_buffer = net::tuningOf(l.send_buffer, l.tcp_notsent_lowat);
    ctx->tunnel_half_close_timeout = l.tunnel_half_close_timeout;
    ctx->request_headers_timeout = l.request_headers_timeout;
    ctx->idle_timeout = l.idle_timeout;
    ctx->tunnel_idle_timeout = l.tunnel_idle_timeout;
    ctx->connect_response_timeout = l.connect_response_timeout;
    ctx->max_connections = l.max_connections;
    // On a reload, a listener keeps its open-connection count: connections
    // accepted before count against the new max_connections too.
    for (const auto& running : listeners_)
      if (running->name == l.name) ctx->open_connections = running->open_connections;
    config::Diagnostics diag(b.source);
    for (const config::FilterConfig& fc : l.filters) {
      config::NodeReader reader(fc.typed_config, l.name + ".filters." + fc.name, diag);
      filters::FilterPtr f = filters::create(fc.name, reader, {b, l});
      if (!f) break;
      // Factories create filters non-const (make_shared<T>), so this cast is
      // well-defined; init() runs once, before any worker shares the filter.
      if (std::string err = const_cast<filters::Filter&>(*f).init(); !err.empty())
        return "listener " + l.name + ": filter " + fc.name + ": " + err;
      ctx->filters.push_back(std::move(f));
    }
    if (!diag.ok()) return diag.problems().front().str();
    filters::PacBuilder pac;
    for (const auto& f : ctx->filters) f->describePac(pac);
    ctx->pac = pac.build(filters::pacProxyAddress(
        l.address.address, i < ports.size() ? ports[i] : l.address.port_value));
    ctx->serve_pac = pac.options().serve_on_listener;
    out.push_back(std::move(ctx));
  }
  return {};
}

std::optional<Server::Bound> Server::bindListener(const config::Listener& l, size_t index,
                                                  const config::SocketAddress& addr, bool optional,
                                                  std::string* error) {
  asio::error_code ec;
  const asio::ip::address ip = asio::ip::make_address(addr.address, ec);
  if (ec) {
    *error = "listener " + l.name + ": '" + addr.address + "' is not an IP address";
    return std::nullopt;
  }
  const asio::ip::tcp::endpoint ep(ip, addr.port_value);
  asio::ip::tcp::acceptor acc(main_io_);
  acc.open(ep.protocol(), ec);
  if (!ec && ip.is_v6()) acc.set_option(asio::ip::v6_only(true), ec);
  if (!ec) acc.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acc.bind(ep, ec);
  if (!ec) acc.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    if (optional) {
      H2G_LOG(Info, 0, 0,
              "listener " << l.name << ": not listening on " << net::endpointText(ep) << " ("
                          << ec.message() << ")");
      return std::nullopt;
    }
    *error =
        "listener " + l.name + ": cannot listen on " + net::endpointText(ep) + ": " + ec.message();
    return std::nullopt;
  }
  return Bound{next_socket_id_++, reload::addressKey(addr), index, std::move(acc)};
}

void Server::logListening(const Bound& b, const config::Listener& l) {
  asio::error_code ec;
  const asio::ip::tcp::endpoint local = b.acceptor.local_endpoint(ec);
  if (!local.address().is_loopback())
    H2G_LOG(Warn, 0, 0,
            "listener " << l.name << " binds non-loopback address " << net::endpointText(local)
                        << ": apps on other machines can use this proxy");
  H2G_LOG(Info, 0, 0,
          "listening on " << net::endpointText(local) << " (listener " << l.name << ")");
}

std::shared_ptr<net::TlsContext> Server::buildTls(const config::Cluster& c, std::string* error) {
  if (!c.tls) return nullptr;
  auto ctx = net::TlsContext::create(*c.tls, c.name, error);
  if (!ctx) return nullptr;
  if (!ctx->verifies())
    H2G_LOG(Warn, 0, 0,
            "cluster " << c.name
                       << ": TLS certificate verification is OFF (--insecure / "
                          "trust_chain_verification: ACCEPT_UNTRUSTED); anyone on the path "
                          "can impersonate the proxy");
  return ctx;
}

void Server::logCluster(const config::Cluster& c) {
  std::string eps;
  for (const auto& e : c.endpoints)
    eps += (eps.empty() ? "" : ", ") + e.address + ":" + std::to_string(e.port_value);
  std::string auth;
  if (c.authentication)
    auth = ", proxy authentication " + std::string(config::schemeName(c.authentication->scheme)) +
           (c.authentication->client_keytab.empty()
                ? ""
                : " (Kerberos keytab " + c.authentication->client_keytab + ")");
  else if (c.credentials)
    auth = ", with credentials (Basic)";
  H2G_LOG(Info, 0, 0,
          "cluster " << c.name << ": upstream proxy " << eps << (c.tls ? " over TLS" : "") << auth);
  if (c.authentication && c.authentication->scheme == config::ProxyAuthentication::Scheme::Ntlm)
    H2G_LOG(Info, 0, 0,
            "cluster " << c.name
                       << ": NTLM authenticates a connection, which HTTP/2 cannot carry (its "
                          "streams are independent requests): its proxies are reached over "
                          "HTTP/1.1 connections, one per tunnel; absolute-form requests reuse "
                          "authenticated keep-alive connections");
  const bool kerberos =
      c.authentication && c.authentication->spn.empty() &&
      (c.authentication->scheme == config::ProxyAuthentication::Scheme::Negotiate ||
       c.authentication->scheme == config::ProxyAuthentication::Scheme::Auto);
  for (const auto& e : c.endpoints)
    if (kerberos && config::isIpLiteral(e.address))
      H2G_LOG(Warn, 0, 0,
              "cluster " << c.name << ": endpoint " << e.address
                         << " is an IP address, but Kerberos names services by host name "
                            "(HTTP@<host>): give the endpoint's host name or set spn");
}

namespace {

std::shared_ptr<upstream::ClusterHealth> newHealth(const config::Cluster& c) {
  std::vector<std::string> eps;
  for (const auto& e : c.endpoints) eps.push_back(upstream::endpointLabel(e.address, e.port_value));
  return std::make_shared<upstream::ClusterHealth>(c.name, std::move(eps));
}

}  // namespace

std::string Server::start() {
  const config::Bootstrap& cfg = *bootstrap_;
  H2G_LOG(Info, 0, 0,
          "h2gate " << H2GATE_VERSION << " starting: config " << cfg.source << ", "
                    << cfg.concurrency << " worker(s)");
  for (size_t i = 0; i < cfg.listeners.size(); ++i) {
    const config::Listener& l = cfg.listeners[i];
    std::string err;
    auto bound = bindListener(l, i, l.address, false, &err);
    if (!bound) return err;
    bound_.push_back(std::move(*bound));
    // Extra addresses (the default's [::1]) are skipped when the host
    // cannot bind them, e.g. no IPv6.
    for (const auto& extra : l.additional_addresses) {
      bound = bindListener(l, i, extra, true, &err);
      if (!err.empty()) return err;
      if (bound) bound_.push_back(std::move(*bound));
    }
  }
  for (const Bound& b : bound_) logListening(b, cfg.listeners[b.listener]);
  // After binding: a PAC file names the port a port-0 listener got.
  std::vector<uint16_t> ports(cfg.listeners.size(), 0);
  for (const Bound& b : bound_) {
    asio::error_code ec;
    if (ports[b.listener] == 0) ports[b.listener] = b.acceptor.local_endpoint(ec).port();
  }
  if (std::string err = buildListeners(cfg, ports, listeners_); !err.empty()) return err;

  for (const config::Cluster& c : cfg.clusters) {
    std::string err;
    auto ctx = buildTls(c, &err);
    if (!err.empty()) return err;
    tls_[c.name] = std::move(ctx);
    tls_files_[c.name] = reload::tlsFilesFingerprint(c);
  }
  if (cfg.clusters.empty())
    H2G_LOG(Info, 0, 0,
            "direct mode: no upstream proxy configured, h2gate connects to destinations itself");
  for (const config::Cluster& c : cfg.clusters) logCluster(c);

  for (const config::Cluster& c : cfg.clusters) {
    health_.push_back(newHealth(c));
    cluster_requests_[c.name] = std::make_shared<downstream::ConnectionLimit>();
  }
  metrics_source_ = metrics::Registry::global().addSource(
      [this](std::vector<prometheus::MetricFamily>& out) { appendMetrics(out); });

  if (cfg.admin.enabled) {
    asio::error_code ec;
    const asio::ip::address ip = asio::ip::make_address(cfg.admin.address.address, ec);
    if (ec) return "admin: '" + cfg.admin.address.address + "' is not an IP address";
    admin_ = std::make_unique<Admin>(
        main_io_, asio::ip::tcp::endpoint(ip, cfg.admin.address.port_value),
        [this](std::string_view method, std::string_view path, std::string_view query) {
          return adminReply(method, path, query);
        });
    if (std::string err = admin_->start(); !err.empty()) return err;
    if (!ip.is_loopback())
      H2G_LOG(Warn, 0, 0,
              "admin binds non-loopback address " << net::endpointText(admin_->localEndpoint()));
    H2G_LOG(Info, 0, 0, "admin listening on " << net::endpointText(admin_->localEndpoint()));
  }

  const uint32_t n = std::max<uint32_t>(1, cfg.concurrency);
  for (uint32_t i = 0; i < n; ++i) {
    auto w = std::make_unique<Worker>(i);
    for (size_t c = 0; c < cfg.clusters.size(); ++c)
      w->addCluster(cfg.clusters[c], tls_[cfg.clusters[c].name], health_[c],
                    cluster_requests_[cfg.clusters[c].name]);
    for (Bound& b : bound_) {
      const int fd = ::dup(b.acceptor.native_handle());
      if (fd < 0) return std::string("dup() of a listening socket failed: ") + strerror(errno);
      w->addListener(listeners_[b.listener], b.id, b.acceptor.local_endpoint().protocol(), fd);
    }
    workers_.push_back(std::move(w));
  }
  // The workers own duplicates; the originals stay open so nothing else can
  // take the port, and so a reload can hand them to the workers again.
  for (auto& w : workers_) w->start();
  startNetworkMonitor();
  waitForSignal();
  return {};
}

void Server::waitForSignal() {
  signals_.async_wait([this](const asio::error_code& ec, int sig) {
    if (ec) return;
#ifdef SIGHUP
    if (sig == SIGHUP) {
      reload("SIGHUP");
      waitForSignal();
      return;
    }
#endif
    beginShutdown(sig);
  });
}

Server::ReloadOutcome Server::reload(std::string_view trigger) {
  const config::Bootstrap& running = *bootstrap_;
  if (draining_) {
    H2G_LOG(Warn, 0, 0, trigger << ": draining, not reloading the configuration");
    return {503, "draining: not reloading\n"};
  }
  if (!reloader_) {
    H2G_LOG(Warn, 0, 0,
            trigger << ": nothing to reload: h2gate was started without a config file (-c), "
                       "its configuration comes from "
                    << running.source);
    return {409,
            "nothing to reload: h2gate was started without a config file (-c); its "
            "configuration comes from " +
                running.source + "\n"};
  }
  H2G_LOG(Info, 0, 0, trigger << ": reloading the configuration from " << running.source);
  auto reject = [&](const std::vector<std::string>& errors) {
    ++reloads_failed_;
    std::string body = "reload rejected: " + std::to_string(errors.size()) +
                       " problem(s); the running configuration stays in effect\n";
    for (const std::string& e : errors) {
      H2G_LOG(Error, 0, 0, "reload: " << e);
      body += e + "\n";
    }
    H2G_LOG(Error, 0, 0,
            "reload rejected: " << errors.size()
                                << " problem(s); the running configuration stays in effect");
    return ReloadOutcome{400, std::move(body)};
  };

  config::LoadResult loaded = reloader_();
  if (!loaded.ok()) {
    std::vector<std::string> errors;
    for (const auto& p : loaded.problems) errors.push_back(p.str());
    return reject(errors);
  }
  auto next = std::make_shared<config::Bootstrap>(std::move(loaded.bootstrap));
  for (const std::string& w : reload::keepRestartOnly(running, *next)) H2G_LOG(Warn, 0, 0, w);

  // Stage everything; nothing below changes the running state until the
  // commit, and whatever was staged is released on a rejection.

  reload::NameDiff clusters = reload::diffClusters(running.clusters, next->clusters);
  std::unordered_map<std::string, std::string> tls_files;
  for (const config::Cluster& c : next->clusters)
    tls_files[c.name] = reload::tlsFilesFingerprint(c);
  // Same settings but other file contents (a rotated CA or client
  // certificate): rebuilt like a changed cluster.
  std::erase_if(clusters.unchanged, [&](const std::string& name) {
    if (tls_files[name] == tls_files_[name]) return false;
    clusters.changed.push_back(name);
    return true;
  });
  auto unchanged = [&](const std::string& name) {
    return std::find(clusters.unchanged.begin(), clusters.unchanged.end(), name) !=
           clusters.unchanged.end();
  };
  std::unordered_map<std::string, std::shared_ptr<net::TlsContext>> tls;
  std::vector<std::shared_ptr<upstream::ClusterHealth>> health;
  std::vector<const config::Cluster*> fresh_clusters;  // new pools
  std::unordered_map<std::string, std::shared_ptr<upstream::ClusterHealth>> health_by_name;
  std::unordered_map<std::string, std::shared_ptr<downstream::ConnectionLimit>> cluster_requests;
  for (const config::Cluster& c : next->clusters) {
    std::shared_ptr<upstream::ClusterHealth> h;
    if (unchanged(c.name)) {
      tls[c.name] = tls_[c.name];
      for (const auto& old : health_)
        if (old->name() == c.name) h = old;
    } else {
      std::string err;
      tls[c.name] = buildTls(c, &err);
      if (!err.empty()) return reject({err});
      fresh_clusters.push_back(&c);
    }
    if (!h) h = newHealth(c);
    health.push_back(h);
    health_by_name[c.name] = std::move(h);
    auto running = cluster_requests_.find(c.name);
    cluster_requests[c.name] = running != cluster_requests_.end()
                                   ? running->second
                                   : std::make_shared<downstream::ConnectionLimit>();
  }

  std::vector<std::string> open;
  for (const Bound& b : bound_) open.push_back(b.key);
  const reload::SocketPlan plan = reload::planSockets(open, next->listeners);
  // Per plan entry: the socket kept (index in bound_) or the one bound now.
  std::vector<std::optional<Bound>> fresh(plan.entries.size());
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const auto& e = plan.entries[i];
    if (e.reuse) continue;
    std::string err;
    fresh[i] = bindListener(next->listeners[e.listener], e.listener, e.address, e.optional, &err);
    if (!err.empty()) return reject({err});
  }
  // The port each listener is bound to (its first address), for its PAC file.
  std::vector<uint16_t> ports(next->listeners.size(), 0);
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const auto& e = plan.entries[i];
    const Bound* b = e.reuse ? &bound_[*e.reuse] : fresh[i] ? &*fresh[i] : nullptr;
    asio::error_code ec;
    if (b && ports[e.listener] == 0) ports[e.listener] = b->acceptor.local_endpoint(ec).port();
  }
  ListenerContexts contexts;
  if (std::string err = buildListeners(*next, ports, contexts); !err.empty()) return reject({err});

  std::vector<Worker::Reconfigure> updates(workers_.size());
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const auto& e = plan.entries[i];
    if (!e.reuse && !fresh[i]) continue;  // an optional address that cannot be bound
    Bound& b = e.reuse ? bound_[*e.reuse] : *fresh[i];
    for (auto& u : updates) {
      Worker::Reconfigure::Socket s;
      s.socket_id = b.id;
      s.ctx = contexts[e.listener];
      asio::error_code ec;
      s.protocol = b.acceptor.local_endpoint(ec).protocol();
      if (!e.reuse) {
        s.fd = OwnedFd(::dup(b.acceptor.native_handle()));
        if (!s.fd)
          return reject({std::string("dup() of a listening socket failed: ") + strerror(errno)});
      }
      u.sockets.push_back(std::move(s));
    }
  }
  for (auto& u : updates) {
    for (const config::Cluster* c : fresh_clusters)
      u.pools.push_back({c, tls[c->name], health_by_name[c->name], cluster_requests[c->name]});
    u.removed_clusters = clusters.removed;
  }

  // Commit. From here on nothing fails.
  std::vector<Bound> bound;
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const auto& e = plan.entries[i];
    if (e.reuse) {
      bound.push_back(std::move(bound_[*e.reuse]));
      bound.back().listener = e.listener;
    } else if (fresh[i]) {
      bound.push_back(std::move(*fresh[i]));
      logListening(bound.back(), next->listeners[e.listener]);
    }
  }
  for (size_t i : plan.close) {
    asio::error_code ec;
    const asio::ip::tcp::endpoint local = bound_[i].acceptor.local_endpoint(ec);
    H2G_LOG(Info, 0, 0, "no longer listening on " << net::endpointText(local));
    bound_[i].acceptor.close(ec);
  }
  for (const config::Cluster* c : fresh_clusters) logCluster(*c);
  const std::string summary =
      reload::summary(reload::diffListeners(running.listeners, next->listeners), clusters);
  const std::string source = next->source;

  bound_ = std::move(bound);
  listeners_ = std::move(contexts);
  tls_ = std::move(tls);
  tls_files_ = std::move(tls_files);
  health_ = std::move(health);
  cluster_requests_ = std::move(cluster_requests);
  bootstraps_.push_back(next);
  bootstrap_ = std::move(next);
  for (size_t i = 0; i < workers_.size(); ++i) workers_[i]->reconfigure(std::move(updates[i]));

  ++reloads_ok_;
  H2G_LOG(Info, 0, 0, "configuration reloaded from " << source << ": " << summary);
  return {200, "reloaded " + source + ": " + summary + "\n"};
}

void Server::beginShutdown(int sig) {
  const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
  if (draining_) {
    H2G_LOG(Warn, 0, 0, name << " again: closing all connections now");
    for (auto& w : workers_) w->forceClose();
    return;
  }
  draining_ = true;
  size_t active = 0;
  for (auto& w : workers_) active += w->activeConnections();
  H2G_LOG(Info, 0, 0,
          name << ": no longer accepting; draining " << active << " connection(s), timeout "
               << std::chrono::duration<double>(bootstrap_->drain_timeout).count() << "s");
  for (Bound& b : bound_) {
    asio::error_code ec;
    b.acceptor.close(ec);
  }
  for (auto& w : workers_) w->drain([this] { asio::post(main_io_, [this] { onWorkerIdle(); }); });
  drain_timer_.expires_after(bootstrap_->drain_timeout);
  drain_timer_.async_wait([this](const asio::error_code& ec) {
    if (ec) return;
    H2G_LOG(Warn, 0, 0, "drain timeout reached: closing the remaining connections");
    for (auto& w : workers_) w->forceClose();
  });
  waitForSignal();  // a second SIGTERM cuts; a SIGHUP is answered "draining"
}

void Server::onWorkerIdle() {
  if (++idle_workers_ < workers_.size()) return;
  H2G_LOG(Info, 0, 0, "all connections closed; exiting");
  drain_timer_.cancel();
  signals_.cancel();
  if (admin_) admin_->stop();
  for (auto& w : workers_) w->stop();
  main_io_.stop();
}

int Server::run() {
  main_io_.run();
  return 0;
}

std::string Server::serverInfo() const {
  const auto uptime =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_);
  std::string out = "{\"version\":\"" H2GATE_VERSION "\",\"state\":\"";
  out += draining_ ? "DRAINING" : "LIVE";
  out += "\",\"uptime_seconds\":" + std::to_string(uptime.count());
  out += ",\"workers\":" + std::to_string(workers_.size());
  size_t active = 0;
  for (const auto& w : workers_) active += w->activeConnections();
  out += ",\"active_connections\":" + std::to_string(active) + "}\n";
  return out;
}

}  // namespace h2gate
