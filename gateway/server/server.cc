#include "gateway/server/server.h"

#include <malloc.h>

#include <algorithm>
#include <cstring>

#include "config/dump.h"
#include "config/loader.h"
#include "filters/registry.h"
#include "filters/served_pac.h"
#include "gateway/base/log.h"
#include "gateway/net/accept_backoff.h"
#include "gateway/net/address.h"
#include "gateway/net/socket_tuning.h"
#include "gateway/server/load_config.h"
#include "gateway/server/reload_plan.h"

namespace h2gate {
Server::Server(config::Bootstrap bootstrap, Reloader reloader)
    : reloader_(std::move(reloader)),
      started_(std::chrono::steady_clock::now()),
      started_wall_(std::chrono::system_clock::now()),
      signals_(main_io_),
      drain_timer_(main_io_) {
  config::LoadResult loaded;
  loaded.bootstrap = std::move(bootstrap);
  start_ = prepare(std::move(loaded));
  bootstrap_ = start_.bootstrap;
}

Server::~Server() {
  if (metrics_source_) metrics::Registry::global().removeSource(metrics_source_);
  // The config thread first: what it runs posts to main_io_ and reads
  // reloader_.
  config_guard_.reset();
  config_io_.stop();
  if (config_thread_.joinable()) config_thread_.join();
  for (auto& w : workers_) w->stop();
  // The configuration goes while every worker's io_context and config_io_
  // still exist: a PAC route's evaluator, freed with its listener context,
  // answers the requests still waiting for it by posting to their workers'
  // io_contexts, and a pending load to config_io_ (gateway/pac_engine/evaluator.h).
  // Members are destroyed in reverse order, workers_ and config_io_ before
  // listeners_, so this cannot be left to them.
  for (auto& w : workers_) w->releaseContexts();
  listeners_ = {};
  retired_.clear();
  start_ = {};
  bootstrap_.reset();
}

Server::Prepared Server::prepare(config::LoadResult loaded) {
  Prepared p;
  if (loaded.ok()) {
    // Filters not built yet (a Bootstrap made in code): build them now.
    bool missing = false;
    for (const config::Listener& l : loaded.bootstrap.listeners)
      for (const config::FilterConfig& f : l.filters) missing = missing || !f.filter;
    if (missing) loaded.problems = checkConfig(loaded.bootstrap);
  }
  if (!loaded.ok()) {
    p.problems = std::move(loaded.problems);
    return p;
  }
  config::dropFilterYaml(loaded.bootstrap);
  p.bootstrap = std::make_shared<config::Bootstrap>(std::move(loaded.bootstrap));
  for (const config::Listener& l : p.bootstrap->listeners) {
    filters::PacBuilder& pac = p.pacs.emplace_back();
    for (const config::FilterConfig& f : l.filters) f.filter->describePac(pac);
  }
  return p;
}

void Server::releaseFilters(config::Bootstrap& b) {
  for (config::Listener& l : b.listeners)
    for (config::FilterConfig& f : l.filters) f.filter = nullptr;
}

std::shared_ptr<const OwnAddresses> Server::ownAddresses(
    const std::vector<OwnSocket>& sockets) const {
  auto own = std::make_shared<OwnAddresses>();
  if (admin_) {
    const asio::ip::tcp::endpoint ep = admin_->localEndpoint();
    // Admin::start() leaves an IPv6 socket dual-stack (the system default).
    own->add({ep, "admin endpoint", true, ep.address().is_v6()});
  }
  // bindListener() makes IPv6 listeners IPv6-only.
  for (const OwnSocket& s : sockets)
    own->add({s.endpoint, "listener '" + s.listener + "'", false, false});
  if (own->hasWildcard()) own->addInterfaceAddresses();
  return own;
}

std::string Server::buildListeners(const Prepared& p, const std::vector<uint16_t>& ports,
                                   const std::shared_ptr<const OwnAddresses>& own,
                                   ListenerContexts& out) {
  const config::Bootstrap& b = *p.bootstrap;
  for (size_t i = 0; i < b.listeners.size(); ++i) {
    const config::Listener& l = b.listeners[i];
    auto ctx = std::make_shared<downstream::ListenerContext>();
    ctx->name = l.name;
    ctx->limits.max_head_bytes = static_cast<size_t>(l.max_request_headers_kb) * 1024;
    ctx->limits.max_headers = l.max_request_headers_count;
    ctx->direct_connect_timeout = l.direct_connect_timeout;
    ctx->send_buffer = net::tuningOf(l.send_buffer, l.tcp_notsent_lowat);
    ctx->tunnel_half_close_timeout = l.tunnel_half_close_timeout;
    ctx->request_headers_timeout = l.request_headers_timeout;
    ctx->idle_timeout = l.idle_timeout;
    ctx->tunnel_idle_timeout = l.tunnel_idle_timeout;
    ctx->connect_response_timeout = l.connect_response_timeout;
    ctx->stream_idle_timeout = l.stream_idle_timeout;
    ctx->max_connections = l.max_connections;
    // On a reload, a listener keeps its open-connection count: connections
    // accepted before count against the new max_connections too.
    for (const auto& running : listeners_) {
      if (running->name != l.name) continue;
      ctx->open_connections = running->open_connections;
      ctx->refusals = running->refusals;
    }
    std::string range_error;
    std::optional<net::SourceRanges> sources =
        net::SourceRanges::build(l.source_prefix_ranges, &range_error);
    if (!sources) return "listener " + l.name + ": source_prefix_ranges: " + range_error;
    ctx->sources = std::move(*sources);
    for (const config::FilterConfig& fc : l.filters) {
      // Built by checkConfig (prepare()) or when loaded, and used by nothing else yet,
      // as a factory made it (make_shared<T>, non-const), so this cast is
      // well-defined; init() runs once, before any worker shares the filter.
      if (std::string err = const_cast<filters::Filter&>(*fc.filter).init(); !err.empty())
        return "listener " + l.name + ": filter " + fc.name + ": " + err;
      ctx->filters.push_back(fc.filter);
    }
    // Just before the terminal forward_proxy: after the app authenticated
    // (proxy_auth) and the acl, like an acl entry of its own.
    if (l.deny_own_addresses && !ctx->filters.empty())
      ctx->filters.insert(ctx->filters.end() - 1, std::make_shared<OwnAddressFilter>(own, l.name));
    const filters::PacBuilder& pac = p.pacs[i];
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
  if (!local.address().is_loopback()) {
    std::string ranges;
    bool everyone = false;
    for (const config::SourcePrefixRange& r : l.source_prefix_ranges) {
      ranges +=
          (ranges.empty() ? "" : ", ") + r.address_prefix + "/" + std::to_string(r.prefix_len);
      everyone = everyone || r.prefix_len == 0;
    }
    if (ranges.empty() || everyone)
      H2G_LOG(Warn, 0, 0,
              "listener " << l.name << " binds non-loopback address " << net::endpointText(local)
                          << ": apps on other machines can use this proxy (source_prefix_ranges: "
                          << (ranges.empty() ? "none" : ranges) << ")");
    else
      H2G_LOG(Info, 0, 0,
              "listener " << l.name << " binds non-loopback address " << net::endpointText(local)
                          << "; it accepts clients from " << ranges << " only");
  }
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
  const std::string auth = c.authentication
                               ? ", proxy authentication " + config::authenticationText(c)
                           : c.credentials ? ", with credentials (Basic)"
                                           : "";
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

// Returns freed heap memory to the system (glibc keeps it otherwise: a big
// configuration replaced by a small one would keep its RSS).
void trimHeap() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

std::shared_ptr<upstream::ClusterHealth> newHealth(const config::Cluster& c) {
  std::vector<std::string> eps;
  for (const auto& e : c.endpoints) eps.push_back(upstream::endpointLabel(e.address, e.port_value));
  return std::make_shared<upstream::ClusterHealth>(c.name, std::move(eps));
}

}  // namespace

std::string Server::start() {
  if (!start_.problems.empty()) return start_.problems.front().str();
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

  // The admin endpoint before the listener contexts: they refuse requests
  // to its address (OwnAddressFilter).
  if (cfg.admin.enabled) {
    asio::error_code ec;
    const asio::ip::address ip = asio::ip::make_address(cfg.admin.address.address, ec);
    if (ec) return "admin: '" + cfg.admin.address.address + "' is not an IP address";
    admin_ =
        std::make_unique<Admin>(main_io_, asio::ip::tcp::endpoint(ip, cfg.admin.address.port_value),
                                Admin::Options{cfg.admin.allowed_hosts},
                                [this](const Admin::Request& request, Admin::Respond respond) {
                                  adminRequest(request, std::move(respond));
                                });
    if (std::string err = admin_->start(); !err.empty()) return err;
    if (!ip.is_loopback())
      H2G_LOG(Warn, 0, 0,
              "admin binds non-loopback address " << net::endpointText(admin_->localEndpoint()));
    H2G_LOG(Info, 0, 0, "admin listening on " << net::endpointText(admin_->localEndpoint()));
  }

  // After binding: a PAC file names the port a port-0 listener got.
  std::vector<uint16_t> ports(cfg.listeners.size(), 0);
  std::vector<OwnSocket> sockets;
  for (const Bound& b : bound_) {
    asio::error_code ec;
    const asio::ip::tcp::endpoint local = b.acceptor.local_endpoint(ec);
    if (ports[b.listener] == 0) ports[b.listener] = local.port();
    sockets.push_back({local, cfg.listeners[b.listener].name});
  }
  if (std::string err = buildListeners(start_, ports, ownAddresses(sockets), listeners_);
      !err.empty())
    return err;
  releaseFilters(*start_.bootstrap);
  start_ = Prepared{};
  // What loading a big file took (its YAML tree) goes back to the system.
  trimHeap();

  for (const config::Cluster& c : cfg.clusters) {
    std::string err;
    auto ctx = buildTls(c, &err);
    if (!err.empty()) return err;
    tls_[c.name] = std::move(ctx);
    tls_files_[c.name] = reload::tlsFilesFingerprint(c);
  }
  if (cfg.clusters.empty() && !pacRoutes().empty())
    H2G_LOG(Info, 0, 0,
            "no cluster configured: routes follow a PAC file (the proxies it names, or DIRECT)");
  else if (cfg.clusters.empty())
    H2G_LOG(Info, 0, 0,
            "direct mode: no upstream proxy configured, h2gate connects to destinations itself");
  for (const config::Cluster& c : cfg.clusters) logCluster(c);

  for (const config::Cluster& c : cfg.clusters) {
    health_.push_back(newHealth(c));
    cluster_requests_[c.name] = std::make_shared<net::ConnectionLimit>();
    clusters_[c.name] = std::make_shared<const config::Cluster>(c);
  }
  metrics_source_ = metrics::Registry::global().addSource(
      [this](std::vector<prometheus::MetricFamily>& out) { appendMetrics(out); });

  const uint32_t n = std::max<uint32_t>(1, cfg.concurrency);
  for (uint32_t i = 0; i < n; ++i) {
    auto w = std::make_unique<Worker>(i);
    for (size_t c = 0; c < cfg.clusters.size(); ++c) {
      const std::string& name = cfg.clusters[c].name;
      w->addCluster(clusters_[name], tls_[name], health_[c], cluster_requests_[name]);
    }
    for (Bound& b : bound_) {
      if (!net::listenerPerWorker()) break;  // acceptFor() hands connections over
      std::string dup_error;
      net::OwnedSocket dup = net::duplicateListener(b.acceptor, &dup_error);
      if (!dup) return dup_error;
      w->addListener(listeners_[b.listener], b.id, b.acceptor.local_endpoint().protocol(),
                     std::move(dup));
    }
    workers_.push_back(std::move(w));
  }
  // The workers own duplicates; the originals stay open so nothing else can
  // take the port, and so a reload can hand them to the workers again.
  for (auto& w : workers_) w->start();
  if (!net::listenerPerWorker())
    for (Bound& b : bound_) acceptFor(b.id);
  config_guard_.emplace(config_io_.get_executor());
  config_thread_ = std::thread([this] { config_io_.run(); });
  startNetworkMonitor();
  waitForSignal();
  return {};
}

void Server::waitForSignal() {
  signals_.asyncWait([this](ServerSignals::Kind kind, const std::string& name) {
    if (kind == ServerSignals::Kind::Reload) {
      requestReload(name, nullptr);
      waitForSignal();
      return;
    }
    beginShutdown(name);
  });
}

void Server::requestReload(std::string trigger, ReloadDone done) {
  if (draining_) {
    H2G_LOG(Warn, 0, 0, trigger << ": draining, not reloading the configuration");
    if (done) done({503, "draining: not reloading\n"});
    return;
  }
  if (!reloader_) {
    H2G_LOG(Warn, 0, 0,
            trigger << ": nothing to reload: h2gate was started without a config file (-c), "
                       "its configuration comes from "
                    << bootstrap_->source);
    if (done)
      done({409,
            "nothing to reload: h2gate was started without a config file (-c); its "
            "configuration comes from " +
                bootstrap_->source + "\n"});
    return;
  }
  Waiter w{std::move(trigger), std::move(done)};
  if (reload_running_) {
    // The running reload may have read the file before it was changed:
    // read it again once that one is over.
    H2G_LOG(Info, 0, 0, w.trigger << ": a reload is running; reloading again after it");
    reload_queued_.push_back(std::move(w));
    return;
  }
  startReload({std::move(w)});
}

void Server::startReload(std::vector<Waiter> waiters) {
  reload_running_ = true;
  reload_waiters_ = std::move(waiters);
  H2G_LOG(Info, 0, 0,
          reload_waiters_.front().trigger << ": reloading the configuration from "
                                          << bootstrap_->source);
  // Parsing, validating and building the filters of a big file takes
  // seconds: on the config thread, so the admin endpoint keeps answering.
  asio::post(config_io_, [this] {
    Prepared next = prepare(reloader_());
    trimHeap();  // the YAML tree is gone
    asio::post(main_io_, [this, next = std::make_shared<Prepared>(std::move(next))]() mutable {
      finishReload(std::move(*next));
    });
  });
}

void Server::finishReload(Prepared next) {
  ReloadOutcome out =
      draining_ ? ReloadOutcome{503, "draining: not reloading\n"} : applyReload(next);
  if (next.bootstrap) retire(std::move(next.bootstrap));  // rejected: its filters go too
  next.pacs.clear();
  std::vector<Waiter> waiters = std::move(reload_waiters_);
  reload_waiters_.clear();
  reload_running_ = false;
  for (const Waiter& w : waiters)
    if (w.done) w.done(out);
  if (!reload_queued_.empty()) {
    std::vector<Waiter> queued = std::move(reload_queued_);
    reload_queued_.clear();
    if (draining_) {
      for (const Waiter& w : queued)
        if (w.done) w.done({503, "draining: not reloading\n"});
    } else {
      startReload(std::move(queued));
    }
  }
}

void Server::retire(std::shared_ptr<const void> p) {
  if (!p) return;
  retired_.push_back(std::move(p));
  if (retired_.size() == 1) {
    retired_timer_.expires_after(std::chrono::seconds(1));
    retired_timer_.async_wait([this](const asio::error_code& ec) {
      if (!ec) sweepRetired();
    });
  }
}

void Server::sweepRetired() {
  // use_count() == 1: only retired_ holds it, and nothing can take a new
  // reference from it any more.
  auto freeable = std::make_shared<std::vector<std::shared_ptr<const void>>>();
  std::erase_if(retired_, [&](std::shared_ptr<const void>& p) {
    if (p.use_count() != 1) return false;
    freeable->push_back(std::move(p));
    return true;
  });
  if (!freeable->empty()) {
    asio::post(config_io_, [freeable] {
      freeable->clear();
      trimHeap();
    });
  }
  if (retired_.empty()) return;
  retired_timer_.expires_after(std::chrono::seconds(1));
  retired_timer_.async_wait([this](const asio::error_code& ec) {
    if (!ec) sweepRetired();
  });
}

Server::ReloadOutcome Server::applyReload(Prepared& prepared) {
  const config::Bootstrap& running = *bootstrap_;
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

  if (!prepared.problems.empty()) {
    std::vector<std::string> errors;
    for (const auto& p : prepared.problems) errors.push_back(p.str());
    return reject(errors);
  }
  const std::shared_ptr<config::Bootstrap>& next = prepared.bootstrap;
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
  std::unordered_map<std::string, std::shared_ptr<const config::Cluster>> cluster_copies;
  std::vector<std::string> fresh_clusters;  // new pools
  std::unordered_map<std::string, std::shared_ptr<upstream::ClusterHealth>> health_by_name;
  std::unordered_map<std::string, std::shared_ptr<net::ConnectionLimit>> cluster_requests;
  for (const config::Cluster& c : next->clusters) {
    std::shared_ptr<upstream::ClusterHealth> h;
    if (unchanged(c.name)) {
      tls[c.name] = tls_[c.name];
      cluster_copies[c.name] = clusters_[c.name];  // the pools keep theirs
      for (const auto& old : health_)
        if (old->name() == c.name) h = old;
    } else {
      std::string err;
      tls[c.name] = buildTls(c, &err);
      if (!err.empty()) return reject({err});
      cluster_copies[c.name] = std::make_shared<const config::Cluster>(c);
      fresh_clusters.push_back(c.name);
    }
    if (!h) h = newHealth(c);
    health.push_back(h);
    health_by_name[c.name] = std::move(h);
    auto running_count = cluster_requests_.find(c.name);
    cluster_requests[c.name] = running_count != cluster_requests_.end()
                                   ? running_count->second
                                   : std::make_shared<net::ConnectionLimit>();
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
  // The port each listener is bound to (its first address), for its PAC
  // file, and every socket of the new configuration, for OwnAddressFilter.
  std::vector<uint16_t> ports(next->listeners.size(), 0);
  std::vector<OwnSocket> sockets;
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const auto& e = plan.entries[i];
    const Bound* b = e.reuse ? &bound_[*e.reuse] : fresh[i] ? &*fresh[i] : nullptr;
    if (!b) continue;
    asio::error_code ec;
    const asio::ip::tcp::endpoint local = b->acceptor.local_endpoint(ec);
    if (ports[e.listener] == 0) ports[e.listener] = local.port();
    sockets.push_back({local, next->listeners[e.listener].name});
  }
  const std::shared_ptr<const OwnAddresses> own = ownAddresses(sockets);
  ListenerContexts contexts;
  if (std::string err = buildListeners(prepared, ports, own, contexts); !err.empty())
    return reject({err});

  std::vector<Worker::Reconfigure> updates(workers_.size());
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const auto& e = plan.entries[i];
    if (!e.reuse && !fresh[i]) continue;  // an optional address that cannot be bound
    Bound& b = e.reuse ? bound_[*e.reuse] : *fresh[i];
    for (auto& u : updates) {
      if (!net::listenerPerWorker()) break;  // the Server accepts (acceptFor)
      Worker::Reconfigure::Socket s;
      s.socket_id = b.id;
      s.ctx = contexts[e.listener];
      asio::error_code ec;
      s.protocol = b.acceptor.local_endpoint(ec).protocol();
      if (!e.reuse) {
        std::string dup_error;
        s.fd = net::duplicateListener(b.acceptor, &dup_error);
        if (!s.fd) return reject({dup_error});
      }
      u.sockets.push_back(std::move(s));
    }
  }
  for (auto& u : updates) {
    for (const std::string& name : fresh_clusters)
      u.pools.push_back(
          {cluster_copies[name], tls[name], health_by_name[name], cluster_requests[name]});
    u.removed_clusters = clusters.removed;
  }

  // Commit. From here on nothing fails.
  std::vector<Bound> bound;
  std::vector<uint64_t> fresh_ids;
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const auto& e = plan.entries[i];
    if (e.reuse) {
      bound.push_back(std::move(bound_[*e.reuse]));
      bound.back().listener = e.listener;
    } else if (fresh[i]) {
      bound.push_back(std::move(*fresh[i]));
      fresh_ids.push_back(bound.back().id);
      logListening(bound.back(), next->listeners[e.listener]);
    }
  }
  for (size_t i : plan.close) {
    asio::error_code ec;
    const asio::ip::tcp::endpoint local = bound_[i].acceptor.local_endpoint(ec);
    H2G_LOG(Info, 0, 0, "no longer listening on " << net::endpointText(local));
    bound_[i].acceptor.close(ec);
  }
  for (const std::string& name : fresh_clusters) logCluster(*cluster_copies[name]);
  const std::string summary =
      reload::summary(reload::diffListeners(running.listeners, next->listeners), clusters);
  const std::string source = next->source;

  if (admin_) admin_->setAllowedHosts(next->admin.allowed_hosts);
  bound_ = std::move(bound);
  for (auto& ctx : listeners_) retire(std::move(ctx));
  listeners_ = std::move(contexts);
  tls_ = std::move(tls);
  tls_files_ = std::move(tls_files);
  health_ = std::move(health);
  cluster_requests_ = std::move(cluster_requests);
  for (auto& [name, cluster] : clusters_) {
    auto kept = cluster_copies.find(name);
    if (kept == cluster_copies.end() || kept->second != cluster) retire(std::move(cluster));
  }
  clusters_ = std::move(cluster_copies);
  // The running configuration is not used after this (nothing refers
  // into it); the next one keeps its filters in the contexts only.
  releaseFilters(*next);
  retire(std::exchange(bootstrap_, next));
  prepared.bootstrap = nullptr;
  for (size_t i = 0; i < workers_.size(); ++i) workers_[i]->reconfigure(std::move(updates[i]));
  if (!net::listenerPerWorker())
    for (uint64_t id : fresh_ids) acceptFor(id);

  ++reloads_ok_;
  H2G_LOG(Info, 0, 0, "configuration reloaded from " << source << ": " << summary);
  return {200, "reloaded " + source + ": " + summary + "\n"};
}

void Server::beginShutdown(const std::string& name) {
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
  waitForSignal();  // a second stop cuts; a reload is answered "draining"
}

Server::Bound* Server::findBound(uint64_t id) {
  for (Bound& b : bound_)
    if (b.id == id) return &b;
  return nullptr;
}

void Server::acceptFor(uint64_t id) {
  Bound* b = findBound(id);
  if (!b || !b->acceptor.is_open() || draining_ || workers_.empty()) return;
  Worker* w = workers_[next_worker_++ % workers_.size()].get();
  // Straight into the worker's event loop: the socket joins its I/O
  // completion port, and only adopt() crosses threads.
  b->acceptor.async_accept(w->io(), [this, id, w](const asio::error_code& ec,
                                                  asio::ip::tcp::socket socket) {
    if (ec == asio::error::operation_aborted || draining_) return;
    Bound* b = findBound(id);
    if (!b || !b->acceptor.is_open()) return;  // closed by a reload meanwhile
    if (ec) {
      // Out of sockets or memory: back off instead of spinning.
      H2G_LOG(Warn, 0, 0,
              "accept on listener " << listeners_[b->listener]->name << " failed: " << ec.message()
                                    << "; retrying in " << net::AcceptBackoff::kRetryDelay.count()
                                    << " ms");
      auto retry = std::make_shared<asio::steady_timer>(main_io_, net::AcceptBackoff::kRetryDelay);
      retry->async_wait([this, id, retry](const asio::error_code& e) {
        if (!e) acceptFor(id);
      });
      return;
    }
    w->adopt(std::move(socket), listeners_[b->listener]);
    acceptFor(id);
  });
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
