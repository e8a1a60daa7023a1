#include "gateway/server.h"
#include "gateway/net/address.h"

#include <unistd.h>

#include <csignal>

#include "filters/registry.h"
#include "gateway/log.h"
#include "gateway/net/socket_tuning.h"

namespace h2gate {
Server::Server(config::Bootstrap bootstrap)
    : bootstrap_(std::move(bootstrap)),
      started_(std::chrono::steady_clock::now()),
      started_wall_(std::chrono::system_clock::now()),
      signals_(main_io_, SIGTERM, SIGINT),
      drain_timer_(main_io_) {}

Server::~Server() {
  if (metrics_source_) metrics::Registry::global().removeSource(metrics_source_);
  for (auto& w : workers_) w->stop();
}

std::string Server::buildListeners() {
  for (const config::Listener& l : bootstrap_.listeners) {
    auto ctx = std::make_unique<downstream::ListenerContext>();
    ctx->name = l.name;
    ctx->bootstrap = &bootstrap_;
    ctx->limits.max_head_bytes = static_cast<size_t>(l.max_request_headers_kb) * 1024;
    ctx->limits.max_headers = l.max_request_headers_count;
    ctx->direct_connect_timeout = l.direct_connect_timeout;
    ctx->send_buffer = net::tuningOf(l.send_buffer, l.tcp_notsent_lowat);
    ctx->tunnel_half_close_timeout = l.tunnel_half_close_timeout;
    config::Diagnostics diag(bootstrap_.source);
    for (const config::FilterConfig& fc : l.filters) {
      config::NodeReader reader(fc.typed_config, l.name + ".filters." + fc.name, diag);
      filters::FilterPtr f = filters::create(fc.name, reader, {bootstrap_, l});
      if (!f) break;
      // Factories create filters non-const (make_shared<T>), so this cast is
      // well-defined; init() runs once, before any worker shares the filter.
      if (std::string err = const_cast<filters::Filter&>(*f).init(); !err.empty())
        return "listener " + l.name + ": filter " + fc.name + ": " + err;
      ctx->filters.push_back(std::move(f));
    }
    if (!diag.ok()) return diag.problems().front().str();
    listeners_.push_back(std::move(ctx));
  }
  return {};
}

std::string Server::bindListener(const config::Listener& l, downstream::ListenerContext& ctx,
                                 const config::SocketAddress& addr, bool optional) {
  asio::error_code ec;
  const asio::ip::address ip = asio::ip::make_address(addr.address, ec);
  if (ec) return "listener " + l.name + ": '" + addr.address + "' is not an IP address";
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
      return {};
    }
    return "listener " + l.name + ": cannot listen on " + net::endpointText(ep) + ": " +
           ec.message();
  }
  const asio::ip::tcp::endpoint local = acc.local_endpoint(ec);
  if (!ip.is_loopback())
    H2G_LOG(Warn, 0, 0,
            "listener " << l.name << " binds non-loopback address " << net::endpointText(local)
                        << ": apps on other machines can use this proxy");
  H2G_LOG(Info, 0, 0,
          "listening on " << net::endpointText(local) << " (listener " << l.name << ")");
  bound_.push_back(Bound{&ctx, std::move(acc)});
  return {};
}

std::string Server::start() {
  H2G_LOG(Info, 0, 0,
          "h2gate " << H2GATE_VERSION << " starting: config " << bootstrap_.source << ", "
                    << bootstrap_.concurrency << " worker(s)");
  if (std::string err = buildListeners(); !err.empty()) return err;
  for (size_t i = 0; i < bootstrap_.listeners.size(); ++i) {
    const config::Listener& l = bootstrap_.listeners[i];
    if (std::string err = bindListener(l, *listeners_[i], l.address, false); !err.empty())
      return err;
    // Extra addresses (the default's [::1]) are skipped when the host
    // cannot bind them, e.g. no IPv6.
    for (const auto& extra : l.additional_addresses)
      if (std::string err = bindListener(l, *listeners_[i], extra, true); !err.empty()) return err;
  }

  for (const config::Cluster& c : bootstrap_.clusters) {
    if (!c.tls) {
      tls_[c.name] = nullptr;
      continue;
    }
    std::string err;
    auto ctx = net::TlsContext::create(*c.tls, c.name, &err);
    if (!ctx) return err;
    if (!ctx->verifies())
      H2G_LOG(Warn, 0, 0,
              "cluster " << c.name
                         << ": TLS certificate verification is OFF (--insecure / "
                            "trust_chain_verification: ACCEPT_UNTRUSTED); anyone on the path "
                            "can impersonate the proxy");
    tls_[c.name] = std::move(ctx);
  }
  if (bootstrap_.clusters.empty()) {
    H2G_LOG(Info, 0, 0,
            "direct mode: no upstream proxy configured, h2gate connects to destinations itself");
  } else {
    for (const config::Cluster& c : bootstrap_.clusters) {
      std::string eps;
      for (const auto& e : c.endpoints)
        eps += (eps.empty() ? "" : ", ") + e.address + ":" + std::to_string(e.port_value);
      H2G_LOG(Info, 0, 0,
              "cluster " << c.name << ": upstream proxy " << eps << (c.tls ? " over TLS" : "")
                         << (c.credentials ? ", with credentials" : ""));
    }
  }

  for (const config::Cluster& c : bootstrap_.clusters) {
    std::vector<std::string> eps;
    for (const auto& e : c.endpoints)
      eps.push_back(upstream::endpointLabel(e.address, e.port_value));
    health_.push_back(std::make_shared<upstream::ClusterHealth>(c.name, std::move(eps)));
  }
  metrics_source_ = metrics::Registry::global().addSource(
      [this](std::vector<prometheus::MetricFamily>& out) { appendMetrics(out); });

  if (bootstrap_.admin.enabled) {
    asio::error_code ec;
    const asio::ip::address ip = asio::ip::make_address(bootstrap_.admin.address.address, ec);
    if (ec) return "admin: '" + bootstrap_.admin.address.address + "' is not an IP address";
    admin_ = std::make_unique<Admin>(
        main_io_, asio::ip::tcp::endpoint(ip, bootstrap_.admin.address.port_value),
        [this](std::string_view path) { return adminReply(path); });
    if (std::string err = admin_->start(); !err.empty()) return err;
    if (!ip.is_loopback())
      H2G_LOG(Warn, 0, 0,
              "admin binds non-loopback address " << net::endpointText(admin_->localEndpoint()));
    H2G_LOG(Info, 0, 0, "admin listening on " << net::endpointText(admin_->localEndpoint()));
  }

  const uint32_t n = std::max<uint32_t>(1, bootstrap_.concurrency);
  for (uint32_t i = 0; i < n; ++i) {
    auto w = std::make_unique<Worker>(i);
    for (size_t c = 0; c < bootstrap_.clusters.size(); ++c)
      w->addCluster(bootstrap_.clusters[c], tls_[bootstrap_.clusters[c].name], health_[c]);
    for (Bound& b : bound_) {
      const int fd = ::dup(b.acceptor.native_handle());
      if (fd < 0) return std::string("dup() of a listening socket failed: ") + strerror(errno);
      w->addListener(*b.ctx, b.acceptor.local_endpoint().protocol(), fd);
    }
    workers_.push_back(std::move(w));
  }
  // The workers own duplicates; the originals stay open only so nothing else
  // can take the port until shutdown.
  for (auto& w : workers_) w->start();
  signals_.async_wait([this](const asio::error_code& ec, int sig) {
    if (!ec) beginShutdown(sig);
  });
  return {};
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
               << std::chrono::duration<double>(bootstrap_.drain_timeout).count() << "s");
  for (Bound& b : bound_) {
    asio::error_code ec;
    b.acceptor.close(ec);
  }
  for (auto& w : workers_) w->drain([this] { asio::post(main_io_, [this] { onWorkerIdle(); }); });
  drain_timer_.expires_after(bootstrap_.drain_timeout);
  drain_timer_.async_wait([this](const asio::error_code& ec) {
    if (ec) return;
    H2G_LOG(Warn, 0, 0, "drain timeout reached: closing the remaining connections");
    for (auto& w : workers_) w->forceClose();
  });
  signals_.async_wait([this](const asio::error_code& ec, int s) {
    if (!ec) beginShutdown(s);
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
