// The environment's proxy variables as system proxy settings
// (gateway/pac_engine/system_proxy.h), NO_PROXY read as curl reads it
// (gateway/match/no_proxy.h).
#include <cstdlib>

#include "gateway/base/ascii.h"
#include "gateway/match/no_proxy.h"
#include "gateway/pac_engine/system_proxy.h"

namespace h2gate::pac {

SystemProxySettings settingsFromEnvironment(const std::map<std::string, std::string>& env) {
  SystemProxySettings s;
  s.from = "environment";
  auto get = [&](const char* lower, const char* upper) -> std::string {
    if (auto it = env.find(lower); it != env.end() && !it->second.empty()) return it->second;
    if (upper != nullptr)
      if (auto it = env.find(upper); it != env.end() && !it->second.empty()) return it->second;
    return {};
  };
  // HTTP_PROXY in upper case is left out on purpose (httpoxy, CVE-2016-5385).
  const std::string all = proxyEntryFromUrl(get("all_proxy", "ALL_PROXY"), s.notes, "all_proxy");
  std::string http = proxyEntryFromUrl(get("http_proxy", nullptr), s.notes, "http_proxy");
  std::string https = proxyEntryFromUrl(get("https_proxy", "HTTPS_PROXY"), s.notes, "https_proxy");
  s.manual.http = http.empty() ? all : http;
  s.manual.https = https.empty() ? all : https;
  s.manual.other = all;
  if (s.manual.http.empty() && s.manual.https.empty() && s.manual.other.empty()) return s;
  s.mode = SystemProxySettings::Mode::Manual;
  const std::string no_proxy = get("no_proxy", "NO_PROXY");
  const match::NoProxyList list = match::parseNoProxy(no_proxy, match::NoProxyMode::Curl);
  for (const std::string& why : list.ignored) s.notes.push_back("no_proxy: " + why);
  for (const match::HostPattern& p : list.patterns) {
    switch (p.kind) {
      case match::HostPattern::Kind::Any:
        addBypass(s.manual.bypass, {BypassRule::Kind::Any, ""});
        break;
      case match::HostPattern::Kind::Cidr:
        addBypass(s.manual.bypass, {BypassRule::Kind::Cidr, p.cidr.str()});
        break;
      case match::HostPattern::Kind::Exact:
        addBypass(s.manual.bypass, {BypassRule::Kind::Exact, p.name});
        break;
      case match::HostPattern::Kind::Domain:
      case match::HostPattern::Kind::Subdomains:
        addBypass(s.manual.bypass, {BypassRule::Kind::Suffix, p.name});
        break;
    }
  }
  return s;
}

SystemProxySettings settingsFromProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = processEnvironment(); e != nullptr && *e != nullptr; ++e) {
    std::string_view kv(*e);
    const std::size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string name(kv.substr(0, eq));
    const std::string low = toLowerAscii(name);
    if (low == "http_proxy" || low == "https_proxy" || low == "all_proxy" || low == "no_proxy")
      env[name] = std::string(kv.substr(eq + 1));
  }
  return settingsFromEnvironment(env);
}

SystemProxySettings readSystemProxySettings() {
  if (std::optional<SystemProxySettings> desktop = readDesktopProxySettings()) {
    if (desktop->mode != SystemProxySettings::Mode::Direct) return *desktop;
  }
  return settingsFromProcessEnvironment();
}

}  // namespace h2gate::pac
