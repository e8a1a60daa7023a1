#include "filters/pac_routing.h"

#include <algorithm>
#include <charconv>
#include <thread>

#include "gateway/base/log.h"
#include "gateway/net/address.h"
#include "gateway/net/host_addresses.h"
#include "gateway/net/host_name.h"
#include "gateway/net/tls_context.h"
#include "gateway/pac_engine/resolver.h"

namespace h2gate::filters {
namespace {

// Where the PAC machinery's own callbacks run (a new script from the
// source, the evaluator's "loaded"): one thread for the whole process,
// never destroyed, so that a route destroyed from one of them (its last
// reference was the callback's) never joins the thread it runs on.
asio::any_io_executor controlExecutor() {
  struct Control {
    asio::io_context io;
    // The thread never runs out of work.
    asio::executor_work_guard<asio::io_context::executor_type> guard{io.get_executor()};
  };
  // Reachable forever through `control` (which is used), so no leak report.
  static Control* const control = [] {
    auto* c = new Control;
    std::thread([c] { c->io.run(); }).detach();
    return c;
  }();
  return control->io.get_executor();
}

// Bound on the distinct skipped entries and loops logged per route.
constexpr std::size_t kMaxNoted = 256;
// Bound on the proxy names whose addresses the loop check keeps; one more
// starts the list afresh.
constexpr std::size_t kMaxResolvedNames = 1024;

// What connecting to `host` (a proxy's host as the answer parser left it:
// lower case, no brackets) reaches when that is known without DNS: an IP
// literal in any notation, in the canonical form the request parser gives
// a destination (net::canonicalRequestHost: 127.1, 0x7f000001, 2130706433,
// 0177.0.0.1, ::ffff:127.0.0.1 are 127.0.0.1); the unspecified address,
// which connects to this host; loopback for localhost and names under
// .localhost (RFC 6761). *name set, and nothing returned, for a name
// that only DNS can tell.
std::vector<asio::ip::address> literalAddresses(std::string_view host, bool* name) {
  *name = false;
  if (host.size() > 1 && host.back() == '.') host.remove_suffix(1);
  if (host == "localhost" || host.ends_with(".localhost"))
    return {asio::ip::address_v4::loopback(), asio::ip::address_v6::loopback()};
  const bool v6 = host.find(':') != std::string_view::npos;
  std::string error;
  if (std::optional<std::string> canonical = net::canonicalRequestHost(host, v6, &error)) {
    asio::error_code ec;
    const asio::ip::address a = asio::ip::make_address(*canonical, ec);
    if (!ec) return {net::unmapped(a)};
    *name = true;  // canonicalRequestHost leaves names as they are
    return {};
  }
  // Refused as a destination: the unspecified address (0.0.0.0, ::),
  // which connect() takes for this host, or no address at all.
  if (v6) {
    asio::error_code ec;
    const asio::ip::address_v6 a = asio::ip::make_address_v6(std::string(host), ec);
    if (!ec && a.is_unspecified()) return {asio::ip::address_v6::loopback()};
  } else if (std::optional<asio::ip::address_v4> a = net::parseIpv4AnyNotation(std::string(host));
             a && a->is_unspecified()) {
    return {asio::ip::address_v4::loopback()};
  }
  return {};
}

// The default NameLookup: asio's resolver, whose getaddrinfo runs off the
// event loop.
void resolveWithAsio(const std::string& host, asio::any_io_executor ex,
                     std::function<void(std::vector<asio::ip::address>)> done) {
  auto resolver = std::make_shared<asio::ip::tcp::resolver>(ex);
  resolver->async_resolve(
      host, "", [resolver, done = std::move(done)](const asio::error_code& ec, auto results) {
        std::vector<asio::ip::address> out;
        if (!ec)
          for (const auto& r : results) out.push_back(net::unmapped(r.endpoint().address()));
        done(std::move(out));
      });
}

std::string timeOrNever(std::chrono::system_clock::time_point t) {
  if (t.time_since_epoch().count() == 0) return "never";
  return log::utcSeconds(t);
}

// "http://host:port/path" → scheme, host (no brackets), port, path.
bool splitUrl(const std::string& url, std::string* scheme, std::string* host, uint16_t* port,
              std::string* path) {
  const std::size_t sep = url.find("://");
  if (sep == std::string::npos || sep == 0) return false;
  *scheme = url.substr(0, sep);
  const std::size_t start = sep + 3;
  const std::size_t end = std::min(url.find_first_of("/?#", start), url.size());
  std::string authority = url.substr(start, end - start);
  *path = end < url.size() ? url.substr(end) : "/";
  if (!path->empty() && path->front() != '/') *path = "/" + *path;
  *port = 0;
  std::size_t colon = authority.rfind(':');
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string::npos) return false;
    if (colon < close) colon = std::string::npos;
  }
  if (colon != std::string::npos) {
    const std::string p = authority.substr(colon + 1);
    unsigned v = 0;
    auto [e, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
    if (ec != std::errc() || e != p.data() + p.size() || v == 0 || v > 65535) return false;
    *port = static_cast<uint16_t>(v);
    authority.resize(colon);
  }
  if (authority.size() >= 2 && authority.front() == '[')
    authority = authority.substr(1, authority.size() - 2);
  if (authority.empty()) return false;
  *host = authority;
  return true;
}

// The scheme of the URL the PAC file is asked about: "https" for a tunnel,
// the absolute-form target's own otherwise ("http" if it has none).
std::string_view schemeOf(const RequestHead& head) {
  if (head.is_connect) return "https";
  const std::string_view target = head.target;
  if (const std::size_t sep = target.find("://"); sep != std::string_view::npos && sep > 0)
    return target.substr(0, sep);
  return "http";
}

pac::PacQuery queryFor(const RequestHead& head) {
  return pac::PacQuery::forRequest(schemeOf(head), head.host, head.port,
                                   head.is_connect ? std::string_view() : head.path);
}

}  // namespace

struct PacRoute::AuthPolicy {
  std::string route;
  // The scheme when pac.proxies has proxy_authentication; "" when not.
  std::string scheme;
  std::optional<AuthenticateTo> configured;
  pac::PacSourceConfig source;
  mutable std::mutex mutex;
  AuthenticateTo current;        // the default now (guarded)
  std::string from;              // where it came from (guarded)
  std::set<std::string> logged;  // refusals logged, by proxy and list (guarded, bounded)

  // The list in force and how it is shown in messages.
  std::string listText() const {
    if (configured) return configured->str();
    std::lock_guard lock(mutex);
    return current.str() + " (the default: " + from + ")";
  }
  bool allows(const std::string& host) const {
    if (configured) return configured->allows(host);
    std::lock_guard lock(mutex);
    return current.allows(host);
  }
  // "" or why the proxy of `proxy_route` at `host` gets no credentials
  // (PacRoute::mayAuthenticate).
  std::string check(const std::string& proxy_route, const std::string& host, bool log);
  // A new PAC file is in use: the default follows it. True when it changed.
  bool follow(const pac::PacScript* script) {
    if (configured || source.kind == pac::PacSourceConfig::Kind::File ||
        source.kind == pac::PacSourceConfig::Kind::Url)
      return false;
    std::string new_from;
    AuthenticateTo next = defaultAuthenticateTo(source, script, &new_from);
    std::lock_guard lock(mutex);
    if (next == current) return false;
    current = std::move(next);
    from = std::move(new_from);
    return true;
  }
};

std::string PacRoute::AuthPolicy::check(const std::string& proxy_route, const std::string& host,
                                        bool log) {
  if (scheme.empty() || allows(host)) return {};
  const std::string list = listText();
  const std::string why = "not in authenticate_to " + list;
  if (!log) return why;
  bool first = false;
  {
    std::lock_guard lock(mutex);
    if (logged.size() < kMaxNoted) first = logged.insert(proxy_route + "|" + list).second;
  }
  // "PROXY host:port" / "HTTPS host:port": the proxy is host:port.
  const std::string proxy = proxy_route.size() > 6 ? proxy_route.substr(6) : proxy_route;
  if (first)
    H2G_LOG(Warn, 0, 0,
            "pac " << route << ": proxy " << proxy << " named by the PAC file gets no credentials: "
                   << why << "; its 407 reaches the app as it is (list it in "
                   << "pac.proxies.authenticate_to to allow it)");
  return why;
}

std::string PacRoute::mayAuthenticate(const std::string& route, const std::string& host,
                                      bool log) const {
  return auth_->check(route, host, log);
}

PacRoute::PacRoute(PacRouteConfig config, std::vector<std::string> own_addresses)
    : config_(std::move(config)), auth_(std::make_shared<AuthPolicy>()), lookup_(resolveWithAsio) {
  auth_->route = name();
  if (config_.proxies.cluster.authentication)
    auth_->scheme = std::string(config::schemeName(config_.proxies.cluster.authentication->scheme));
  auth_->configured = config_.proxies.authenticate_to;
  auth_->source = config_.source;
  auth_->current = defaultAuthenticateTo(config_.source, nullptr, &auth_->from);
  for (const std::string& own : own_addresses) {
    const std::size_t colon = own.rfind(':');
    if (colon == std::string::npos) continue;
    unsigned port = 0;
    const char* const end = own.data() + own.size();
    auto [p, ec] = std::from_chars(own.data() + colon + 1, end, port);
    if (ec != std::errc() || p != end || port > 65535) continue;
    std::string host = own.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    // A listener's address is an IP address (0.0.0.0 and :: included).
    asio::error_code bad;
    const asio::ip::address a = asio::ip::make_address(host, bad);
    if (bad) continue;
    own_addresses_.push_back({net::unmapped(a), static_cast<uint16_t>(port)});
    if (a.is_unspecified() && interfaces_.empty()) interfaces_ = net::interfaceAddresses();
  }
  auto t = std::make_shared<upstream::ProxyTemplate>();
  t->cluster = config_.proxies.cluster;
  t->max_proxies = config_.proxies.max_proxies;
  t->idle_timeout = config_.proxies.idle_timeout;
  // The template may outlive the route (pools keep it): it holds the
  // policy, not the route.
  t->may_authenticate = [auth = auth_](const std::string& route, const std::string& host) {
    return auth->check(route, host, true);
  };
  proxies_ = std::move(t);
}

PacRoute::~PacRoute() {
  // The source first: it may still hand the evaluator a script.
  source_.reset();
  evaluator_.reset();
}

std::string PacRoute::start() {
  std::call_once(started_, [this] {
    // TLS for the HTTPS proxies the PAC names: one context for all of them.
    if (proxies_->cluster.tls) {
      std::string error;
      proxies_->tls = net::TlsContext::create(*proxies_->cluster.tls, name(), &error);
      if (!proxies_->tls) {
        proxies_->tls_error = error;
        H2G_LOG(
            Warn, 0, 0,
            "pac " << name() << ": HTTPS proxies named by the PAC file cannot be used: " << error);
      }
    }
    pac::PacEnvironment env;
    pac::SystemResolver::Options dns;
    dns.name = name();
    env.resolver = std::make_shared<pac::SystemResolver>(dns);
    env.dns_timeout = config_.dns_timeout;
    env.heap_limit = config_.memory_limit;
    // alert() is logged by the evaluator (escaped, with a budget).
    evaluator_ = std::make_unique<pac::PacEvaluator>(config_.evaluation, std::move(env));
    std::weak_ptr<PacRoute> weak = weak_from_this();
    source_ = std::make_unique<pac::PacSource>(config_.source, controlExecutor(),
                                               [weak](std::shared_ptr<pac::PacScript> script) {
                                                 if (auto self = weak.lock())
                                                   self->onScript(std::move(script));
                                               });
    source_->start();
    if (!auth_->scheme.empty())
      H2G_LOG(Info, 0, 0,
              "pac " << name() << ": proxies named by the PAC file that get credentials ("
                     << config::authenticationText(config_.proxies.cluster)
                     << "): " << auth_->listText());
  });
  return {};
}

void PacRoute::onScript(std::shared_ptr<pac::PacScript> script) {
  const std::string origin = script->origin;
  const std::string sha = script->sha256.substr(0, 16);
  const std::string route = name();
  std::shared_ptr<const pac::PacScript> loaded = script;
  evaluator_->setScript(
      std::move(script), controlExecutor(),
      [route, origin, sha, loaded, auth = auth_, tmpl = proxies_](pac::PacError e) {
        if (e) {
          H2G_LOG(Warn, 0, 0,
                  "pac " << route << ": the PAC file from " << origin << " does not load ("
                         << pac::kindName(e.kind) << ": " << e.message
                         << "); the previous one, if any, stays in use");
          return;
        }
        H2G_LOG(Info, 0, 0,
                "pac " << route << ": using the PAC file from " << origin << " (sha256 " << sha
                       << "…)");
        // authenticate_to's default follows where the file in use came
        // from: pools made for the old one are made again.
        if (auth->follow(loaded.get())) {
          tmpl->auth_generation.fetch_add(1, std::memory_order_relaxed);
          if (!auth->scheme.empty())
            H2G_LOG(Info, 0, 0,
                    "pac " << route << ": proxies that get credentials: " << auth->listText());
        }
      });
}

void PacRoute::networkChanged() {
  if (!evaluator_) return;
  evaluator_->networkChanged();
  if (source_ && config_.source.kind != pac::PacSourceConfig::Kind::File) source_->refreshNow();
}

upstream::RouteDecider::Decision PacRoute::fallback() const {
  ++fallbacks_;
  Decision d;
  switch (config_.fallback.kind) {
    case PacRouteConfig::Fallback::Kind::Direct:
      d.routes.emplace_back();
      break;
    case PacRouteConfig::Fallback::Kind::Cluster:
      d.routes.push_back(config_.fallback.cluster);
      break;
    case PacRouteConfig::Fallback::Kind::Reject:
      d.status = config_.fallback.status;
      d.reason = "the PAC file of route " + name() + " gave no usable answer";
      break;
  }
  return d;
}

static std::string fallbackName(const PacRouteConfig::Fallback& f) {
  switch (f.kind) {
    case PacRouteConfig::Fallback::Kind::Direct:
      return "DIRECT";
    case PacRouteConfig::Fallback::Kind::Cluster:
      return "cluster '" + f.cluster + "'";
    case PacRouteConfig::Fallback::Kind::Reject:
      return "reject " + std::to_string(f.status);
  }
  return {};
}

void PacRoute::noteProblem(const pac::PacError& error, uint64_t conn_id, uint64_t stream_id) const {
  std::lock_guard lock(log_mutex_);
  const std::string kind = pac::kindName(error.kind);
  if (problem_ == kind) return;
  problem_ = kind;
  troubled_.store(true, std::memory_order_release);
  H2G_LOG(Warn, conn_id, stream_id,
          "pac " << name() << ": no usable answer (" << kind << ": " << error.message
                 << "); requests take the fallback, " << fallbackName(config_.fallback)
                 << ", until it answers again (logged once)");
}

void PacRoute::noteGood() const {
  if (!troubled_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(log_mutex_);
  if (problem_.empty()) return;
  H2G_LOG(Info, 0, 0,
          "pac " << name() << ": answers again (after " << problem_ << "); requests follow it");
  problem_.clear();
  troubled_.store(false, std::memory_order_release);
}

bool PacRoute::onOwnPort(uint16_t port) const {
  return std::any_of(own_addresses_.begin(), own_addresses_.end(),
                     [port](const OwnAddress& own) { return own.port == port; });
}

bool PacRoute::reachesOwn(const asio::ip::address& a, uint16_t port) const {
  // An unspecified address connects to this host (Linux: loopback).
  const asio::ip::address dest = !a.is_unspecified() ? net::unmapped(a)
                                 : a.is_v4() ? asio::ip::address(asio::ip::address_v4::loopback())
                                             : asio::ip::address(asio::ip::address_v6::loopback());
  for (const OwnAddress& own : own_addresses_) {
    if (own.port != port) continue;
    if (own.address == dest) return true;
    // A socket bound to 0.0.0.0 or :: takes every local address of its family.
    if (own.address.is_unspecified() && own.address.is_v4() == dest.is_v4() &&
        (dest.is_loopback() ||
         std::find(interfaces_.begin(), interfaces_.end(), dest) != interfaces_.end()))
      return true;
  }
  return false;
}

bool PacRoute::isOwnAddress(const pac::ProxyEntry& e) const {
  if (!onOwnPort(e.port)) return false;
  bool name = false;
  std::vector<asio::ip::address> addresses = literalAddresses(e.host, &name);
  if (name) {
    std::lock_guard lock(names_mutex_);
    // Resolved by decide() before this decision (unresolvedNames); absent
    // only when the lookup took longer than dns_timeout: the connect then
    // finds out, as for any proxy.
    if (auto it = names_.find(e.host); it != names_.end()) addresses = it->second.addresses;
  }
  return std::any_of(addresses.begin(), addresses.end(),
                     [&](const asio::ip::address& a) { return reachesOwn(a, e.port); });
}

std::vector<std::string> PacRoute::unresolvedNames(const pac::PacResult& r) const {
  std::vector<std::string> out;
  if (r.error) return out;
  const auto now = std::chrono::steady_clock::now();
  for (const pac::ProxyEntry& e : r.proxies.entries) {
    if (e.kind == pac::ProxyEntry::Kind::Direct || !onOwnPort(e.port)) continue;
    bool name = false;
    literalAddresses(e.host, &name);
    if (!name || std::find(out.begin(), out.end(), e.host) != out.end()) continue;
    std::lock_guard lock(names_mutex_);
    auto it = names_.find(e.host);
    if (it == names_.end() || it->second.expires <= now) out.push_back(e.host);
  }
  return out;
}

void PacRoute::decideWith(std::shared_ptr<const pac::PacResult> r, uint64_t conn, uint64_t stream,
                          asio::any_io_executor ex, std::function<void(Decision)> done) const {
  std::vector<std::string> names = unresolvedNames(*r);
  if (names.empty()) {
    asio::post(ex, [d = toDecision(*r, conn, stream), done = std::move(done)]() mutable {
      done(std::move(d));
    });
    return;
  }
  // Resolve them all, within dns_timeout; then decide (on `ex`, one thread).
  struct Pending {
    std::size_t left;
    bool finished = false;
    asio::steady_timer timer;
    std::function<void()> finish;
  };
  std::weak_ptr<const PacRoute> weak = weak_from_this();
  auto pending = std::make_shared<Pending>(
      Pending{names.size(), false, asio::steady_timer(ex, config_.dns_timeout), {}});
  pending->finish = [weak, pending_raw = pending.get(), r, conn, stream,
                     done = std::move(done)]() mutable {
    if (pending_raw->finished) return;
    pending_raw->finished = true;
    pending_raw->timer.cancel();
    auto self = weak.lock();
    Decision d;
    if (self)
      d = self->toDecision(*r, conn, stream);
    else
      d.reason = "the PAC route was replaced by a reload";
    done(std::move(d));
  };
  pending->timer.async_wait([pending](const asio::error_code& ec) {
    if (!ec) pending->finish();
  });
  const auto ttl =
      std::max<std::chrono::milliseconds>(config_.evaluation.cache_ttl, std::chrono::seconds(1));
  for (const std::string& host : names) {
    lookup_(host, ex, [weak, pending, host, ttl](std::vector<asio::ip::address> addresses) {
      if (auto self = weak.lock()) {
        std::lock_guard lock(self->names_mutex_);
        if (self->names_.size() >= kMaxResolvedNames) self->names_.clear();
        self->names_[host] = {std::move(addresses), std::chrono::steady_clock::now() + ttl};
      }
      if (--pending->left == 0) pending->finish();
    });
  }
}

upstream::RouteDecider::Decision PacRoute::toDecision(const pac::PacResult& r, uint64_t conn_id,
                                                      uint64_t stream_id) const {
  if (r.error) {
    noteProblem(r.error, conn_id, stream_id);
    return fallback();
  }
  for (std::size_t i = 0; i < r.proxies.skipped.size(); ++i) {
    const pac::SkippedEntry& s = r.proxies.skipped[i];
    std::lock_guard lock(log_mutex_);
    if (noted_.size() < kMaxNoted && noted_.insert("skip " + s.text).second)
      H2G_LOG(Warn, conn_id, stream_id,
              "pac " << name() << ": entry '" << s.text << "' skipped: " << s.reason
                     << " (logged once)");
  }
  Decision d;
  for (const pac::ProxyEntry& e : r.proxies.entries) {
    if (e.kind == pac::ProxyEntry::Kind::Direct) {
      d.routes.emplace_back();
      continue;
    }
    if (isOwnAddress(e)) {
      {
        std::lock_guard lock(log_mutex_);
        if (noted_.size() < kMaxNoted && noted_.insert("loop " + e.str()).second)
          H2G_LOG(Warn, conn_id, stream_id,
                  "pac " << name() << ": the PAC file names h2gate's own listener (" << e.str()
                         << "); that would be a loop: "
                         << (config_.on_loop == PacRouteConfig::OnLoop::Direct ? "DIRECT instead"
                                                                               : "refused (503)")
                         << " (logged once)");
      }
      if (config_.on_loop == PacRouteConfig::OnLoop::Direct) {
        d.routes.emplace_back();
        continue;
      }
      if (d.routes.empty()) {
        d.status = 503;
        d.reason = "the PAC file of route " + name() + " names h2gate itself (" + e.str() + ")";
        return d;
      }
      continue;
    }
    d.routes.push_back(e.str());
  }
  // Duplicates (two loop entries turned DIRECT) add nothing.
  for (std::size_t i = 1; i < d.routes.size();)
    if (std::find(d.routes.begin(), d.routes.begin() + i, d.routes[i]) != d.routes.begin() + i)
      d.routes.erase(d.routes.begin() + i);
    else
      ++i;
  if (d.routes.empty()) {
    noteProblem(pac::PacError{pac::PacError::Kind::UnusableAnswer,
                              "no usable entry in '" + r.answer.substr(0, 200) + "'"},
                conn_id, stream_id);
    return fallback();
  }
  noteGood();
  return d;
}

void PacRoute::decide(const RequestHead& head, const StreamInfo& info, asio::any_io_executor ex,
                      std::function<void(Decision)> done) const {
  if (!evaluator_) {
    // Not started (a config check): the fallback, as with no PAC yet.
    asio::post(ex, [d = fallback(), done = std::move(done)]() mutable { done(std::move(d)); });
    return;
  }
  pac::PacQuery q = queryFor(head);
  q.conn_id = info.connection_id;
  q.stream_id = info.stream_id;
  const uint64_t conn = info.connection_id, stream = info.stream_id;
  if (std::shared_ptr<const pac::PacResult> hit = evaluator_->cachedAnswer(q.cache_key)) {
    decideWith(std::move(hit), conn, stream, ex, std::move(done));
    return;
  }
  std::weak_ptr<const PacRoute> weak = weak_from_this();
  evaluator_->evaluate(std::move(q), ex,
                       [weak, conn, stream, ex, done = std::move(done)](pac::PacResult r) mutable {
                         auto self = weak.lock();
                         if (!self) {
                           Decision d;
                           d.reason = "the PAC route was replaced by a reload";
                           return done(std::move(d));
                         }
                         self->decideWith(std::make_shared<const pac::PacResult>(std::move(r)),
                                          conn, stream, ex, std::move(done));
                       });
}

std::optional<upstream::RouteDecider::Decision> PacRoute::decideNow(const RequestHead& head,
                                                                    const StreamInfo& info) const {
  if (!evaluator_) return std::nullopt;
  // The key is built in a buffer each thread keeps: no allocation per request.
  thread_local std::string key;
  std::shared_ptr<const pac::PacResult> hit = evaluator_->cachedAnswer(pac::PacQuery::cacheKeyFor(
      schemeOf(head), head.host, head.port, head.is_connect ? std::string_view() : head.path, key));
  if (!hit) return std::nullopt;
  // A proxy name on the listener's port whose addresses the loop check
  // does not have yet: decide() resolves it first.
  if (!own_addresses_.empty() && !unresolvedNames(*hit).empty()) return std::nullopt;
  return toDecision(*hit, info.connection_id, info.stream_id);
}

void PacRoute::explain(const std::string& url, asio::any_io_executor ex,
                       std::function<void(int, std::string)> done) const {
  std::string scheme, host, path;
  uint16_t port = 0;
  if (!splitUrl(url, &scheme, &host, &port, &path)) {
    asio::post(ex, [done = std::move(done), url] {
      done(400, "expected ?url=scheme://host[:port][/path], got '" + url + "'\n");
    });
    return;
  }
  if (!evaluator_) {
    asio::post(ex, [done = std::move(done)] { done(503, "the PAC route is not running\n"); });
    return;
  }
  pac::PacQuery q = pac::PacQuery::forRequest(scheme, host, port, path);
  std::weak_ptr<const PacRoute> weak = weak_from_this();
  const std::string asked = q.url, asked_host = q.host;
  evaluator_->evaluate(
      std::move(q), ex, [weak, asked, asked_host, done = std::move(done)](pac::PacResult r) {
        auto self = weak.lock();
        if (!self) return done(503, "the PAC route was replaced by a reload\n");
        std::string out = "route: " + self->name() + "\nFindProxyForURL(\"" + asked + "\", \"" +
                          asked_host + "\")\n";
        if (r.error) {
          out += "error: " + std::string(pac::kindName(r.error.kind)) + ": " + r.error.message +
                 "\nh2gate uses the fallback: " + fallbackName(self->config_.fallback) + "\n";
        } else {
          out += "answer: " + r.answer + "\nentries used: " + r.proxies.str() + "\n";
          for (const pac::SkippedEntry& s : r.proxies.skipped)
            out += "skipped: " + s.text + " (" + s.reason + ")\n";
          for (const pac::ProxyEntry& e : r.proxies.entries) {
            if (e.kind == pac::ProxyEntry::Kind::Direct) continue;
            out += "credentials for " + e.str() + ": ";
            if (self->auth_->scheme.empty()) {
              out += "none (pac.proxies has no proxy_authentication)\n";
            } else if (std::string why = self->mayAuthenticate(e.str(), e.host, false);
                       why.empty()) {
              out += self->auth_->scheme + "\n";
            } else {
              out += "none, " + why + "\n";
            }
          }
        }
        out += std::string("from cache: ") + (r.from_cache ? "yes" : "no") + "\n";
        done(200, std::move(out));
      });
}

std::string PacRoute::describe(bool with_text) const {
  std::string out = "route: " + name() + "\nsource: " + pac::kindName(config_.source.kind);
  if (!config_.source.location.empty()) out += " " + config_.source.location;
  out += "\nfallback: " + fallbackName(config_.fallback) + "\n";
  if (!source_) return out + "state: not running\n";
  const pac::PacSourceStatus st = source_->status();
  std::shared_ptr<const pac::PacScript> script = evaluator_->script();
  if (script) {
    out += "in use: " + script->origin + "\nsha256: " + script->sha256 +
           "\nloaded: " + timeOrNever(script->loaded_at) +
           "\nsize: " + std::to_string(script->text.size()) + " bytes\n";
  } else {
    out += "in use: none (requests take the fallback)\n";
  }
  out += "last fetch: " + timeOrNever(st.fetched_at) +
         "\nlast attempt: " + timeOrNever(st.attempted_at);
  out += st.last_error.empty() ? std::string(" (ok)\n") : " (failed: " + st.last_error + ")\n";
  out += "attempts: " + std::to_string(st.attempts) + ", failures: " + std::to_string(st.failures) +
         "\n";
  if (with_text && script) out += "\n" + script->text + (script->text.ends_with('\n') ? "" : "\n");
  return out;
}

std::string PacRoute::degraded() const {
  if (!source_) return {};
  const pac::PacSourceStatus st = source_->status();
  const bool have = evaluator_ && evaluator_->script();
  if (!have) {
    if (st.attempts == 0) return {};  // the first attempt is on its way
    return "pac " + name() + ": no PAC file loaded (" +
           (st.last_error.empty() ? std::string("it does not load") : st.last_error) +
           "); requests take the fallback, " + fallbackName(config_.fallback);
  }
  if (!st.last_error.empty())
    return "pac " + name() + ": the last fetch failed (" + st.last_error +
           "); keeping the PAC file fetched at " + timeOrNever(st.fetched_at);
  return {};
}

PacRoute::Counters PacRoute::counters() const {
  Counters c;
  c.fallbacks = fallbacks_.load();
  if (evaluator_) {
    const pac::PacStats s = evaluator_->stats();
    c.evaluations = s.evaluations;
    c.cache_hits = s.cache_hits;
    c.timeouts = s.timeouts;
    c.errors = s.errors + s.overloaded;
    c.loads = s.loads;
    c.load_failures = s.load_failures;
    c.cache_entries = s.cache_entries;
    c.cache_bytes = s.cache_bytes;
    c.have_script = evaluator_->script() != nullptr;
  }
  if (source_) c.download_failures = source_->status().failures;
  return c;
}

}  // namespace h2gate::filters
