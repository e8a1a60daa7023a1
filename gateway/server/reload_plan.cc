#include "gateway/server/reload_plan.h"

#include <fstream>
#include <functional>
#include <iterator>
#include <type_traits>

#include <asio/ip/address.hpp>

#include "config/dump.h"

namespace h2gate::reload {
namespace {

template <class T>
std::string dumpOne(const T& item) {
  config::Bootstrap b;
  b.source = "-";
  if constexpr (std::is_same_v<T, config::Listener>)
    b.listeners.push_back(item);
  else
    b.clusters.push_back(item);
  return config::dumpYaml(b);
}

template <class T, class Same>
NameDiff diffByName(const std::vector<T>& before, const std::vector<T>& after, Same same) {
  NameDiff d;
  for (const T& n : after) {
    const T* old = nullptr;
    for (const T& o : before)
      if (o.name == n.name) old = &o;
    if (!old)
      d.added.push_back(n.name);
    else if (same(*old, n))
      d.unchanged.push_back(n.name);
    else
      d.changed.push_back(n.name);
  }
  for (const T& o : before) {
    bool kept = false;
    for (const T& n : after) kept = kept || n.name == o.name;
    if (!kept) d.removed.push_back(o.name);
  }
  return d;
}

void describe(std::string& out, const char* kind, const NameDiff& d) {
  out += kind;
  out += ": ";
  std::string parts;
  auto part = [&](const std::vector<std::string>& names, const char* what, bool list) {
    if (names.empty()) return;
    if (!parts.empty()) parts += ", ";
    parts += std::to_string(names.size()) + " " + what;
    if (!list) return;
    parts += " (";
    for (size_t i = 0; i < names.size(); ++i) parts += (i ? ", " : "") + names[i];
    parts += ")";
  };
  part(d.added, "added", true);
  part(d.removed, "removed", true);
  part(d.changed, "changed", true);
  part(d.unchanged, "unchanged", false);
  out += parts.empty() ? "none" : parts;
}

}  // namespace

std::string addressKey(const config::SocketAddress& a) {
  std::string host = a.address;
  asio::error_code ec;
  const asio::ip::address ip = asio::ip::make_address(a.address, ec);
  if (!ec) host = ip.to_string();
  const std::string port = std::to_string(a.port_value);
  return host.find(':') != std::string::npos ? "[" + host + "]:" + port : host + ":" + port;
}

SocketPlan planSockets(const std::vector<std::string>& open,
                       const std::vector<config::Listener>& listeners) {
  SocketPlan plan;
  std::vector<bool> taken(open.size(), false);
  auto add = [&](size_t listener, const config::SocketAddress& a, bool optional) {
    SocketPlan::Entry e{listener, a, optional, std::nullopt};
    const std::string key = addressKey(a);
    for (size_t i = 0; i < open.size(); ++i) {
      if (taken[i] || open[i] != key) continue;
      taken[i] = true;
      e.reuse = i;
      break;
    }
    plan.entries.push_back(std::move(e));
  };
  for (size_t l = 0; l < listeners.size(); ++l) {
    add(l, listeners[l].address, false);
    for (const auto& extra : listeners[l].additional_addresses) add(l, extra, true);
  }
  for (size_t i = 0; i < open.size(); ++i)
    if (!taken[i]) plan.close.push_back(i);
  return plan;
}

bool sameListener(const config::Listener& a, const config::Listener& b) {
  if (a.filters.size() != b.filters.size()) return false;
  // typed_config by its redacted text (a running config has only that, and
  // rendering a big one through the emitter again would take seconds).
  for (size_t i = 0; i < a.filters.size(); ++i)
    if (config::typedConfigText(a.filters[i]) != config::typedConfigText(b.filters[i]))
      return false;
  auto bare = [](config::Listener l) {
    for (config::FilterConfig& f : l.filters) {
      f.typed_config.reset();
      f.redacted_yaml.clear();
    }
    return dumpOne(l);
  };
  return bare(a) == bare(b);
}

bool sameCluster(const config::Cluster& a, const config::Cluster& b) {
  if (a.credentials.has_value() != b.credentials.has_value()) return false;
  if (a.credentials && (a.credentials->username != b.credentials->username ||
                        a.credentials->password != b.credentials->password))
    return false;
  return dumpOne(a) == dumpOne(b);
}

NameDiff diffListeners(const std::vector<config::Listener>& before,
                       const std::vector<config::Listener>& after) {
  return diffByName(before, after, sameListener);
}

NameDiff diffClusters(const std::vector<config::Cluster>& before,
                      const std::vector<config::Cluster>& after) {
  return diffByName(before, after, sameCluster);
}

std::string tlsFilesFingerprint(const config::Cluster& c) {
  if (!c.tls) return {};
  std::string out;
  for (const std::string* path :
       {&c.tls->trusted_ca, &c.tls->certificate_chain, &c.tls->private_key}) {
    if (path->empty()) {
      out += "-;";
      continue;
    }
    std::ifstream in(*path, std::ios::binary);
    if (!in) {
      out += "unreadable;";
      continue;
    }
    const std::string content{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    out += std::to_string(content.size()) + ":" +
           std::to_string(std::hash<std::string>{}(content)) + ";";
  }
  return out;
}

std::vector<std::string> keepRestartOnly(const config::Bootstrap& running,
                                         config::Bootstrap& next) {
  std::vector<std::string> out;
  if (next.concurrency != running.concurrency) {
    out.push_back("concurrency " + std::to_string(running.concurrency) + " -> " +
                  std::to_string(next.concurrency) + " needs a restart; keeping " +
                  std::to_string(running.concurrency) + " worker(s)");
    next.concurrency = running.concurrency;
  }
  auto admin = [](const config::Admin& a) {
    return a.enabled ? addressKey(a.address) : std::string("disabled");
  };
  if (admin(next.admin) != admin(running.admin)) {
    out.push_back("admin address " + admin(running.admin) + " -> " + admin(next.admin) +
                  " needs a restart; keeping " + admin(running.admin));
  }
  // Only the address is bound once; allowed_hosts applies from now.
  next.admin.address = running.admin.address;
  next.admin.enabled = running.admin.enabled;
  return out;
}

std::string summary(const NameDiff& listeners, const NameDiff& clusters) {
  std::string out;
  describe(out, "listeners", listeners);
  out += "; ";
  describe(out, "clusters", clusters);
  return out;
}

}  // namespace h2gate::reload
