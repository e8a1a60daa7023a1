#include "gateway/server/run_as.h"

#include <memory>
#include <optional>

#include "filters/forward_proxy.h"
#include "filters/registry.h"
#include "gateway/base/ascii.h"
#include "gateway/server/cli.h"
#include "gateway/server/service.h"

namespace h2gate::run_as {
namespace {

// Without credentials, every scheme but Basic is the process's own identity.
bool singleSignOn(const config::Cluster& c) {
  return c.authentication &&
         c.authentication->scheme != config::ProxyAuthentication::Scheme::Basic && !c.credentials;
}

// The service manager's names of LocalSystem (lpServiceStartName).
bool localSystemAccount(const std::string& account) {
  const std::string a = toLowerAscii(account);
  return a == "localsystem" || a == ".\\localsystem" || a == "nt authority\\system";
}

}  // namespace

std::vector<std::string> singleSignOnProxies(const config::Bootstrap& b) {
  std::vector<std::string> out;
  for (const config::Cluster& c : b.clusters)
    if (singleSignOn(c))
      out.push_back("cluster '" + c.name + "' (" +
                    std::string(config::schemeName(c.authentication->scheme)) + ")");
  for (const config::Listener& l : b.listeners)
    for (const config::FilterConfig& f : l.filters) {
      if (f.name != filters::kForwardProxy) continue;
      auto fp = std::dynamic_pointer_cast<const filters::ForwardProxyFilter>(f.filter);
      if (!fp) continue;
      for (const std::shared_ptr<filters::PacRoute>& route : fp->pacRoutes()) {
        const config::Cluster& proxies = route->config().proxies.cluster;
        if (singleSignOn(proxies))
          out.push_back("the proxies the PAC file of listener '" + l.name + "' names (" +
                        std::string(config::schemeName(proxies.authentication->scheme)) + ")");
      }
    }
  return out;
}

Warning localSystemWarning(const std::vector<std::string>& proxies, const std::string& who) {
  if (proxies.empty()) return {};
  std::string list;
  for (const std::string& p : proxies) list += (list.empty() ? "" : ", ") + p;
  return Warning{who + " as LocalSystem: single sign-on (Negotiate, NTLM) to " + list +
                     " authenticates as this computer's account (DOMAIN\\HOST$), not as the "
                     "user logged on",
                 "for the user's identity run h2gate as that user ('h2gate autostart "
                 "install', deploy/windows/README.md), or give the proxies credentials "
                 "(proxy_authentication.credentials)"};
}

std::vector<Warning> checkWarnings(const config::Bootstrap& b) {
  std::vector<Warning> out;
  if (isLocalSystem(processUserSid()))
    if (Warning w = localSystemWarning(singleSignOnProxies(b), "h2gate runs"); !w.empty())
      out.push_back(std::move(w));
  const std::optional<service::Installed> svc = service::installed();
  if (!svc || !localSystemAccount(svc->account)) return out;
  // The service's flags after "<exe> service run", parsed and built as the
  // service does at its start. (Found by the words, not their place: wine's
  // msi registers C:\Program Files\h2gate\h2gate.exe unquoted: two words.)
  size_t run = 1;
  while (run + 1 < svc->args.size() &&
         !(svc->args[run] == "service" && svc->args[run + 1] == "run"))
    ++run;
  if (run + 1 >= svc->args.size()) return out;
  std::vector<const char*> argv = {"h2gate"};
  for (size_t i = run + 2; i < svc->args.size(); ++i) argv.push_back(svc->args[i].c_str());
  const cli::ParseResult parsed = cli::parse(static_cast<int>(argv.size()), argv.data());
  if (!parsed.ok()) return out;
  const config::LoadResult loaded = cli::buildBootstrap(parsed.options, std::nullopt);
  if (!loaded.ok()) return out;
  if (Warning w =
          localSystemWarning(singleSignOnProxies(loaded.bootstrap),
                             "the installed service " + std::string(service::kName) + " runs");
      !w.empty())
    out.push_back(std::move(w));
  return out;
}

}  // namespace h2gate::run_as
