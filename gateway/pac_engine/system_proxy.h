// The platform's own proxy setting, as a PAC source (`pac: {system: true}`):
//
//   Windows  the user's Internet Settings, through WinHTTP
//            (WinHttpGetIEProxyConfigForCurrentUser: AutoConfigURL,
//            ProxyEnable + ProxyServer, ProxyOverride, "Automatically detect
//            settings"): system_proxy_win.cc.
//   GNOME    org.gnome.system.proxy (mode none/manual/auto, autoconfig-url,
//            ignore-hosts, http/https host and port), read with
//            `gsettings list-recursively` (a subprocess, on the PAC
//            source's thread): system_proxy_posix.cc. Used when its mode is
//            manual or auto.
//   env      otherwise http_proxy / https_proxy / all_proxy / no_proxy
//            (lower case first, then upper case, as curl; HTTP_PROXY in
//            upper case is ignored, as curl and Go do, because CGI sets it
//            from a request header), NO_PROXY read as curl reads it.
//
// Whatever the platform says becomes one of: DIRECT, a PAC URL to fetch,
// WPAD to run, or a fixed choice (manual settings), which h2gate turns into
// a small PAC file of its own (manualProxyPac) so every source is evaluated
// the same way.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace h2gate::pac {

// A destination the manual settings send DIRECT.
struct BypassRule {
  enum class Kind {
    Exact,       // host == value
    Suffix,      // host == value or ends with "." + value
    Glob,        // '*' and '?' wildcards, everything else literal
    Cidr,        // an IP literal host in the range value ("10.0.0.0/8", "fd00::/8")
    PlainNames,  // names without a dot (Windows' "<local>")
    Any,         // everything ("*" as the whole NO_PROXY list)
  };
  Kind kind = Kind::Exact;
  std::string value;  // lower case
  bool operator==(const BypassRule&) const = default;
};

struct ManualProxy {
  // PAC entries ("PROXY h:p", "HTTPS h:p") per URL scheme; empty: DIRECT.
  std::string http;   // http:// and ws://
  std::string https;  // https:// and wss://
  std::string other;  // ftp:// and anything else
  std::vector<BypassRule> bypass;
};

struct SystemProxySettings {
  enum class Mode { Direct, Manual, AutoUrl, AutoDetect };
  Mode mode = Mode::Direct;
  std::string pac_url;  // AutoUrl
  ManualProxy manual;   // Manual
  std::string from;  // "environment", "GNOME (org.gnome.system.proxy)", "Windows Internet Settings"
  // What was left out and why ("SOCKS proxies are not supported", "bad port").
  std::vector<std::string> notes;
};

// From the environment variables (name -> value; lower-case names win;
// system_proxy_env.cc).
SystemProxySettings settingsFromEnvironment(const std::map<std::string, std::string>& env);
// The process's own environment.
SystemProxySettings settingsFromProcessEnvironment();
// The process's environment as the C runtime holds it: "NAME=value" strings
// up to a null pointer (POSIX environ: system_proxy_posix.cc; the C
// runtime's _environ on Windows: system_proxy_win.cc).
char** processEnvironment();

// From the output of `gsettings list-recursively org.gnome.system.proxy`;
// nullopt when it holds no org.gnome.system.proxy mode line.
std::optional<SystemProxySettings> settingsFromGsettings(std::string_view output);

// From WinINet's strings (WinHttpGetIEProxyConfigForCurrentUser's fields,
// also the registry values): ProxyServer "host:port" or
// "http=h:p;https=h:p;ftp=h:p;socks=h:p", ProxyOverride "*.corp;<local>".
SystemProxySettings settingsFromWindows(bool auto_detect, std::string_view auto_config_url,
                                        std::string_view proxy_server,
                                        std::string_view proxy_override);

// The desktop's setting (GNOME via gsettings, Windows via WinHTTP); nullopt
// when there is none, or it is "none" (then the environment applies).
// Blocking (a subprocess or a system call): call it off the event loop.
std::optional<SystemProxySettings> readDesktopProxySettings();

// What `system` means here and now: the desktop's setting when it is manual
// or automatic, else the environment's. Blocking, as above.
SystemProxySettings readSystemProxySettings();

// A PAC file that answers as `manual` says.
std::string manualProxyPac(const ManualProxy& manual, std::string_view from);

// Appends `rule` unless it is there already.
void addBypass(std::vector<BypassRule>& out, BypassRule rule);

// "PROXY h:p" / "HTTPS h:p" for a proxy URL or host:port as found in
// settings ("http://u:p@proxy:3128/", "proxy:8080", "https://p"); "" and a
// note when unusable (SOCKS, garbage). Credentials are dropped (and noted).
std::string proxyEntryFromUrl(std::string_view url, std::vector<std::string>& notes,
                              std::string_view what);

}  // namespace h2gate::pac
