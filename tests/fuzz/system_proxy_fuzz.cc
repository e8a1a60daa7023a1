// Feeds arbitrary bytes to the readers of platform proxy settings (gsettings
// output, Windows' ProxyServer/ProxyOverride strings, proxy URLs from the
// environment, resolv.conf for WPAD) and checks what h2gate makes of them:
// the PAC file made from manual settings must always compile, whatever the
// settings held (no JavaScript injection, no syntax error).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gateway/pac_engine/fetch.h"
#include "gateway/pac_engine/pac_context.h"
#include "gateway/pac_engine/system_proxy.h"
#include "gateway/pac_engine/wpad.h"
#include "gateway/pac_engine/wpad_posix.h"

namespace {

using namespace h2gate::pac;

// Resolves nothing: the generated files must not need DNS to compile.
class NoResolver : public PacResolver {
 public:
  std::vector<h2gate::net::IpAddress> resolve(const std::string&, bool, Deadline,
                                              std::string_view) override {
    return {};
  }
  std::vector<h2gate::net::IpAddress> localAddresses(Deadline) override { return {}; }
};

void checkCompiles(const SystemProxySettings& s) {
  if (s.mode != SystemProxySettings::Mode::Manual) return;
  static PacEnvironment env = [] {
    PacEnvironment e;
    e.resolver = std::make_shared<NoResolver>();
    e.heap_limit = 8u << 20;
    return e;
  }();
  PacContext ctx(env);
  const PacError err = ctx.load(manualProxyPac(s.manual, "fuzz"), "fuzz.pac",
                                std::chrono::steady_clock::now() + std::chrono::seconds(5));
  if (err) std::abort();
  const RawAnswer a = ctx.findProxy("http://x.example/", "x.example",
                                    std::chrono::steady_clock::now() + std::chrono::seconds(5));
  if (a.error) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  if (std::optional<SystemProxySettings> g = settingsFromGsettings(in)) checkCompiles(*g);

  // Three fields split by NUL bytes: AutoConfigURL, ProxyServer, ProxyOverride.
  const std::size_t a = in.find('\0');
  const std::size_t b = a == std::string_view::npos ? a : in.find('\0', a + 1);
  const std::string_view url = in.substr(0, a);
  const std::string_view server =
      a == std::string_view::npos ? std::string_view() : in.substr(a + 1, b - a - 1);
  const std::string_view bypass =
      b == std::string_view::npos ? std::string_view() : in.substr(b + 1);
  checkCompiles(settingsFromWindows(size % 2 == 0, url, server, bypass));
  checkCompiles(settingsFromWindows(false, "", in, in));

  std::vector<std::string> notes;
  (void)proxyEntryFromUrl(in, notes, "fuzz");
  FetchUrl u;
  (void)parseFetchUrl(in, &u);
  (void)wpadUrls(searchDomains(in, in.substr(0, 64)));
  return 0;
}
