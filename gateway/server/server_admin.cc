// What the admin endpoints say about the server. The admin listener runs on
// the main thread; everything here reads state shared with the workers only
// through thread-safe objects (metrics registry, ClusterHealth, atomics).
// POST /reload starts a reload like SIGHUP (the file is read on the config
// thread) and answers when it is over; /config_dump is rendered there too.
// POST /quitquitquit (Envoy's name) stops like SIGTERM: the answer first,
// then no more accepting and the connections drain; the process exits 0.
#include <map>
#include <set>

#include "config/dump.h"
#include "filters/forward_proxy.h"
#include "filters/served_pac.h"
#include "gateway/metrics/process.h"
#include "gateway/metrics/registry.h"
#include "gateway/server/server.h"

namespace h2gate {
namespace {

constexpr std::string_view kIndex =
    "h2gate admin\n"
    "  /metrics            Prometheus text format 0.0.4 (also /stats/prometheus)\n"
    "  /ready              200 when listeners are up and every cluster has a usable proxy\n"
    "  /healthz            200 while the process is alive and not draining\n"
    "  /clusters           one line per upstream endpoint: state, ALPN, connections, streams,\n"
    "                      proxy authentication scheme; also the proxies PAC files named\n"
    "  /config_dump        the effective configuration as YAML, secrets redacted\n"
    "  /proxy.pac          PAC file of the first listener (?listener=NAME for another)\n"
    "  /pac                the PAC files routes follow: source, fetch time, sha256 (&text=1)\n"
    "  /pac/eval?url=URL   what the PAC file answers for URL (loopback clients only)\n"
    "  /server_info        version, state, uptime (JSON)\n"
    "  POST /reload        re-read the config file (-c) and apply it; 400 with the errors\n"
    "  POST /quitquitquit  drain the connections (like SIGTERM, Ctrl+C) and exit 0\n"
    "                      (every POST needs the header X-H2gate-Admin: 1)\n";

Admin::Reply text(int status, std::string body) {
  return Admin::Reply{status, "text/plain; charset=utf-8", std::move(body), {}};
}

// Sum of a gauge family's values by (cluster, endpoint).
std::map<std::pair<std::string, std::string>, double> byEndpoint(
    const std::vector<prometheus::MetricFamily>& families, std::string_view name) {
  std::map<std::pair<std::string, std::string>, double> out;
  for (const auto& f : families) {
    if (f.name != name) continue;
    for (const auto& m : f.metric) {
      std::string cluster, endpoint;
      for (const auto& l : m.label) {
        if (l.name == "cluster") cluster = l.value;
        if (l.name == "endpoint") endpoint = l.value;
      }
      out[{cluster, endpoint}] += m.gauge.value;
    }
  }
  return out;
}

// The value of `name` among &-separated parameters, %XX-decoded ("" when
// absent).
std::string queryParam(std::string_view query, std::string_view name) {
  for (size_t start = 0; start <= query.size();) {
    const size_t end = std::min(query.find('&', start), query.size());
    const std::string_view param = query.substr(start, end - start);
    start = end + 1;
    if (param.size() <= name.size() || !param.starts_with(name) || param[name.size()] != '=')
      continue;
    const std::string_view v = param.substr(name.size() + 1);
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) {
      auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      if (v[i] == '%' && i + 2 < v.size() + 0 && hex(v[i + 1]) >= 0 && hex(v[i + 2]) >= 0) {
        out += static_cast<char>(hex(v[i + 1]) * 16 + hex(v[i + 2]));
        i += 2;
      } else {
        out += v[i] == '+' ? ' ' : v[i];
      }
    }
    return out;
  }
  return {};
}

}  // namespace

std::vector<std::pair<std::string, std::shared_ptr<filters::PacRoute>>> Server::pacRoutes() const {
  std::vector<std::pair<std::string, std::shared_ptr<filters::PacRoute>>> out;
  for (const auto& l : listeners_)
    for (const auto& f : l->filters)
      if (auto* fp = dynamic_cast<const filters::ForwardProxyFilter*>(f.get()))
        for (auto& r : fp->pacRoutes()) out.emplace_back(l->name, std::move(r));
  return out;
}

Admin::Reply Server::pacStatusReply(std::string_view query) const {
  const std::string listener = queryParam(query, "listener");
  const bool with_text = queryParam(query, "text") == "1";
  std::string out;
  for (const auto& [name, route] : pacRoutes()) {
    if (!listener.empty() && name != listener) continue;
    out += (out.empty() ? "" : "\n") + route->describe(with_text);
  }
  if (out.empty()) return text(404, "no route follows a PAC file\n");
  return text(200, std::move(out));
}

void Server::pacEval(const Admin::Request& request, Admin::Respond respond) {
  if (!request.loopback_peer)
    return respond(text(403, "/pac/eval answers loopback clients only (it runs the PAC file)\n"));
  const std::string url = queryParam(request.query, "url");
  const std::string listener = queryParam(request.query, "listener");
  if (url.empty() || url.size() > 8192)
    return respond(text(400, "expected /pac/eval?url=scheme://host[:port][/path]\n"));
  for (const auto& [name, route] : pacRoutes()) {
    if (!listener.empty() && name != listener) continue;
    route->explain(url, main_io_.get_executor(),
                   [respond = std::move(respond)](int status, std::string body) {
                     respond(text(status, std::move(body)));
                   });
    return;
  }
  respond(text(404, "no route follows a PAC file\n"));
}

Admin::Reply Server::pacReply(std::string_view query) const {
  std::string_view name;
  // listener=NAME among &-separated parameters; names need no unescaping
  // for the usual [A-Za-z0-9_.-].
  for (size_t start = 0; start <= query.size();) {
    const size_t end = std::min(query.find('&', start), query.size());
    const std::string_view param = query.substr(start, end - start);
    if (param.starts_with("listener=")) name = param.substr(9);
    start = end + 1;
  }
  for (const auto& l : listeners_) {
    if (!name.empty() && l->name != name) continue;
    return Admin::Reply{200, std::string(filters::kPacContentType), l->pac, {}};
  }
  return text(404, "no listener named '" + std::string(name) + "'\n");
}

void Server::adminRequest(const Admin::Request& request, Admin::Respond respond) {
  if (request.path == "/reload" && request.method == "POST") {
    requestReload("POST /reload", [respond = std::move(respond)](const ReloadOutcome& out) {
      respond(text(out.status, out.message));
    });
    return;
  }
  if (request.path == "/pac/eval" && request.method != "POST") return pacEval(request, respond);
  if (request.path == "/quitquitquit" && request.method == "POST") {
    size_t active = 0;
    for (const auto& w : workers_) active += w->activeConnections();
    respond(text(200, draining_ ? "already draining\n"
                                : "draining " + std::to_string(active) + " connection(s)\n"));
    // After the answer is on its way; a second one cuts, like a second
    // SIGTERM.
    asio::post(main_io_, [this] { beginShutdown("POST /quitquitquit"); });
    return;
  }
  if (request.path == "/config_dump" && request.method != "POST") {
    // Rendering a big configuration takes a while: on the config thread.
    asio::post(config_io_, [this, b = bootstrap_, respond = std::move(respond)]() mutable {
      std::string yaml = config::dumpYaml(*b);
      asio::post(main_io_, [respond = std::move(respond), yaml = std::move(yaml)]() mutable {
        respond(Admin::Reply{200, "application/yaml; charset=utf-8", std::move(yaml), {}});
      });
    });
    return;
  }
  respond(adminReply(request));
}

Admin::Reply Server::adminReply(const Admin::Request& request) {
  const std::string_view method = request.method;
  const std::string_view path = request.path;
  if (path == "/reload" || path == "/quitquitquit") {
    Admin::Reply r = text(405, std::string(path) + " takes POST\n");
    r.allow = "POST";
    return r;
  }
  if (method == "POST") {
    Admin::Reply r = text(
        405, "only /reload and /quitquitquit take POST; " + std::string(path) + " takes GET\n");
    r.allow = "GET, HEAD";
    return r;
  }
  if (path == "/metrics" || path == "/stats/prometheus")
    return Admin::Reply{
        200, "text/plain; version=0.0.4; charset=utf-8", metrics::Registry::global().scrape(), {}};
  if (path == "/ready") {
    auto [ok, why] = readiness();
    return text(ok ? 200 : 503, why + "\n");
  }
  if (path == "/healthz") return draining_ ? text(503, "DRAINING\n") : text(200, "OK\n");
  if (path == "/clusters") return text(200, clustersText());
  if (path == "/server_info") return Admin::Reply{200, "application/json", serverInfo(), {}};
  if (path == filters::kPacPath) return pacReply(request.query);
  if (path == "/pac") return pacStatusReply(request.query);
  if (path == "/") return text(200, std::string(kIndex));
  return text(404, "no such admin endpoint: " + std::string(path) + " (see /)\n");
}

std::pair<bool, std::string> Server::readiness() const {
  if (draining_) return {false, "DRAINING"};
  for (const auto& h : health_) {
    if (h->usable()) continue;
    std::string why = "cluster " + h->name() + ": no usable upstream proxy";
    std::string detail;
    for (const auto& e : h->snapshot()) {
      if (!detail.empty()) detail += "; ";
      detail += e.name + " " + upstream::stateName(e.state);
      if (e.state == upstream::ClusterHealth::State::Unknown)
        detail += " (connecting)";
      else if (!e.last_error.empty())
        detail += ": " + e.last_error;
    }
    return {false, why + (detail.empty() ? "" : " (" + detail + ")")};
  }
  // A PAC route on an old PAC file or on its fallback still carries
  // traffic: ready, but say so.
  std::string pac;
  for (const auto& [name, route] : pacRoutes())
    if (std::string d = route->degraded(); !d.empty()) pac += "\n" + d;
  return {true, "LIVE" + pac};
}

std::string Server::clustersText() const {
  const auto families = metrics::Registry::global().Collect();
  const auto conns = byEndpoint(families, "h2gate_upstream_connections_active");
  const auto streams = byEndpoint(families, "h2gate_upstream_streams_active");
  std::string out;
  for (const auto& h : health_) {
    for (const auto& e : h->snapshot()) {
      const auto key = std::make_pair(h->name(), e.name);
      auto get = [&](const auto& m) {
        auto it = m.find(key);
        return std::to_string(it == m.end() ? 0 : static_cast<int64_t>(it->second));
      };
      out += h->name() + " " + e.name + " state=" + upstream::stateName(e.state) +
             " alpn=" + (e.alpn.empty() ? "-" : e.alpn) + " connections=" + get(conns) +
             " streams=" + get(streams) + " auth=" + (e.auth.empty() ? "-" : e.auth);
      out +=
          " last_error=" + (e.last_error.empty() ? std::string("-") : "\"" + e.last_error + "\"");
      out += "\n";
    }
  }
  // The proxies PAC files named (pools made on demand, per worker): one line
  // per proxy and PAC route, "pac=" naming the route.
  for (const auto& [listener, route] : pacRoutes()) {
    std::set<std::string> shown;
    for (const auto& p : route->proxies()->pools->list()) {
      if (!shown.insert(p.health->name()).second) continue;
      for (const auto& e : p.health->snapshot()) {
        const auto key = std::make_pair(p.health->name(), e.name);
        auto get = [&](const auto& m) {
          auto it = m.find(key);
          return std::to_string(it == m.end() ? 0 : static_cast<int64_t>(it->second));
        };
        out += p.health->name() + " state=" + upstream::stateName(e.state) +
               " alpn=" + (e.alpn.empty() ? "-" : e.alpn) + " connections=" + get(conns) +
               " streams=" + get(streams) + " auth=" + (e.auth.empty() ? "-" : e.auth) +
               " pac=" + route->name();
        out += " last_error=" +
               (e.last_error.empty() ? std::string("-") : "\"" + e.last_error + "\"") + "\n";
      }
    }
  }
  if (out.empty()) out = "no upstream clusters (direct mode)\n";
  return out;
}

void Server::appendMetrics(std::vector<prometheus::MetricFamily>& out) const {
  auto info = metrics::gaugeFamily("h2gate_build_info", "h2gate's version; always 1.");
  metrics::addGauge(info, 1, {{"version", H2GATE_VERSION}});
  out.push_back(std::move(info));

  auto start = metrics::gaugeFamily("h2gate_start_time_seconds",
                                    "When h2gate started, in seconds since the Unix epoch.");
  metrics::addGauge(start, std::chrono::duration<double>(started_wall_.time_since_epoch()).count());
  out.push_back(std::move(start));

  auto ready = metrics::gaugeFamily(
      "h2gate_ready",
      "1 when /ready answers 200 (not draining, every cluster has a usable proxy).");
  metrics::addGauge(ready, readiness().first ? 1 : 0);
  out.push_back(std::move(ready));

  auto up = metrics::gaugeFamily(
      "h2gate_upstream_endpoint_up",
      "1 when the last connection attempt to this upstream proxy worked, 0 when it failed or "
      "none was made yet.");
  for (const auto& h : health_)
    for (const auto& e : h->snapshot())
      metrics::addGauge(up, e.state == upstream::ClusterHealth::State::Up ? 1 : 0,
                        {{"cluster", h->name()}, {"endpoint", e.name}});
  out.push_back(std::move(up));

  auto reloads =
      metrics::gaugeFamily("h2gate_config_reloads_total", "Configuration reloads, by result.");
  reloads.type = prometheus::MetricType::Counter;
  metrics::addGauge(reloads, static_cast<double>(reloads_ok_.load()), {{"result", "success"}});
  metrics::addGauge(reloads, static_cast<double>(reloads_failed_.load()), {{"result", "failure"}});
  out.push_back(std::move(reloads));

  auto changes = metrics::gaugeFamily(
      "h2gate_network_changes_total",
      "Network changes and resumes from suspend noticed (each makes every upstream h2 "
      "connection answer a PING within network_change_timeout).");
  changes.type = prometheus::MetricType::Counter;
  metrics::addGauge(changes, static_cast<double>(network_changes_.load()), {});
  out.push_back(std::move(changes));

  appendPacMetrics(out);
  metrics::appendProcessFamilies(out);
}

void Server::appendPacMetrics(std::vector<prometheus::MetricFamily>& out) const {
  const auto routes = pacRoutes();
  if (routes.empty()) return;
  auto counter = [](const char* name, const char* help) {
    auto f = metrics::gaugeFamily(name, help);
    f.type = prometheus::MetricType::Counter;
    return f;
  };
  auto evals = counter("h2gate_pac_evaluations_total",
                       "Runs of a PAC file's FindProxyForURL (answers not from the cache).");
  auto hits = counter("h2gate_pac_cache_hits_total", "PAC answers taken from the per-host cache.");
  auto timeouts =
      counter("h2gate_pac_timeouts_total", "PAC evaluations cut off at the evaluation timeout.");
  auto errors = counter("h2gate_pac_errors_total",
                        "PAC evaluations that failed otherwise (exception, bad answer, memory, "
                        "overload).");
  auto fallbacks = counter("h2gate_pac_fallbacks_total",
                           "Requests of a PAC route that took its configured fallback.");
  auto downloads = counter("h2gate_pac_download_failures_total",
                           "Failed attempts to fetch a PAC file (URL, WPAD, system, file).");
  auto loaded =
      metrics::gaugeFamily("h2gate_pac_loaded", "1 when the PAC route has a PAC file in use.");
  auto cache_entries = metrics::gaugeFamily(
      "h2gate_pac_cache_entries", "PAC answers in the route's cache now (expired ones freed).");
  auto cache_bytes = metrics::gaugeFamily(
      "h2gate_pac_cache_bytes",
      "Memory the PAC answers in the route's cache hold, estimated (bounded by cache_bytes).");
  for (const auto& [listener, route] : routes) {
    const filters::PacRoute::Counters c = route->counters();
    const std::vector<prometheus::ClientMetric::Label> labels{{"route", route->name()}};
    metrics::addGauge(evals, static_cast<double>(c.evaluations), labels);
    metrics::addGauge(hits, static_cast<double>(c.cache_hits), labels);
    metrics::addGauge(timeouts, static_cast<double>(c.timeouts), labels);
    metrics::addGauge(errors, static_cast<double>(c.errors), labels);
    metrics::addGauge(fallbacks, static_cast<double>(c.fallbacks), labels);
    metrics::addGauge(downloads, static_cast<double>(c.download_failures), labels);
    metrics::addGauge(loaded, c.have_script ? 1 : 0, labels);
    metrics::addGauge(cache_entries, static_cast<double>(c.cache_entries), labels);
    metrics::addGauge(cache_bytes, static_cast<double>(c.cache_bytes), labels);
  }
  for (auto* f : {&evals, &hits, &timeouts, &errors, &fallbacks, &downloads, &loaded,
                  &cache_entries, &cache_bytes})
    out.push_back(std::move(*f));
}

}  // namespace h2gate
