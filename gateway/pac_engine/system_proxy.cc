#include "gateway/pac_engine/system_proxy.h"

#include <algorithm>
#include <cstdlib>

#include "gateway/base/ascii.h"
#include "gateway/net/ip_address.h"
#include "gateway/pac_engine/answer.h"

namespace h2gate::pac {
namespace {

// What js() writes as itself (or escaped); anything else becomes '?'.
bool printableAscii(char c) {
  return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7F;
}

// A JavaScript string literal.
std::string js(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (!printableAscii(c)) {
      // Settings hold ASCII names; anything else cannot match a host anyway.
      out += "?";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// One ignore-hosts (GNOME) or ProxyOverride (Windows) entry.
void addHostPattern(std::vector<BypassRule>& out, std::string_view entry) {
  std::string e = toLowerAscii(trim(entry));
  if (e.empty()) return;
  if (e == "<local>") return addBypass(out, {BypassRule::Kind::PlainNames, ""});
  if (e == "*") return addBypass(out, {BypassRule::Kind::Any, ""});
  if (e.find('/') != std::string::npos) {
    std::string error;
    if (auto range = net::parseCidr(e, /*strict=*/false, &error))
      return addBypass(out, {BypassRule::Kind::Cidr, range->str()});
  }
  if (auto ip = net::parseIp(e); ip && e.front() != '[') {
    return addBypass(out, {BypassRule::Kind::Cidr, ip->str() + (ip->v6 ? "/128" : "/32")});
  }
  if (e.find_first_of("*?") != std::string::npos)
    return addBypass(out, {BypassRule::Kind::Glob, e});
  if (e.front() == '.') return addBypass(out, {BypassRule::Kind::Suffix, e.substr(1)});
  addBypass(out, {BypassRule::Kind::Exact, e});
}

// The PAC file's own glob matcher, as pac::globMatch (pac_library.h) does
// it: the file stays a PAC file any browser can run, and a pattern like
// "a(b*" stays literal, which shExpMatch would not keep.
constexpr std::string_view kGlobMatch = R"JS(function (s, p) {
  // Greedy; only the last '*' is ever retried: at most s.length * p.length steps.
  var i = 0, j = 0, star = -1, mark = 0;
  while (i < s.length) {
    var c = p.charAt(j);
    if (c == "*") {
      star = j++;
      mark = i;
    } else if (j < p.length && (c == "?" || c == s.charAt(i))) {
      i++;
      j++;
    } else if (star >= 0) {
      j = star + 1;
      i = ++mark;
    } else {
      return false;
    }
  }
  while (p.charAt(j) == "*") j++;
  return j == p.length;
})JS";

std::string condition(const BypassRule& r) {
  switch (r.kind) {
    case BypassRule::Kind::Exact:
      return "h == " + js(r.value);
    case BypassRule::Kind::Suffix:
      return "(h == " + js(r.value) + " || dnsDomainIs(h, " + js("." + r.value) + "))";
    case BypassRule::Kind::Glob:
      // js() writes other than printable ASCII as '?', a wildcard here:
      // such a pattern matches no host name, so it is left out.
      if (!std::all_of(r.value.begin(), r.value.end(), printableAscii)) return "false";
      return "matchesGlob(h, " + js(r.value) + ")";
    case BypassRule::Kind::Cidr:
      return "isInNetEx(h, " + js(r.value) + ")";
    case BypassRule::Kind::PlainNames:
      return "isPlainHostName(h)";
    case BypassRule::Kind::Any:
      return "true";
  }
  return "false";
}

}  // namespace

void addBypass(std::vector<BypassRule>& out, BypassRule r) {
  if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(std::move(r));
}

std::string proxyEntryFromUrl(std::string_view url_in, std::vector<std::string>& notes,
                              std::string_view what) {
  std::string_view url = trim(url_in);
  if (url.empty()) return {};
  std::string scheme = "http";
  if (const std::size_t sep = url.find("://"); sep != std::string_view::npos) {
    scheme = toLowerAscii(url.substr(0, sep));
    url.remove_prefix(sep + 3);
  }
  if (scheme != "http" && scheme != "https") {
    notes.push_back(std::string(what) + ": " + scheme + " proxies are not supported");
    return {};
  }
  url = url.substr(0, url.find_first_of("/?#"));
  if (const std::size_t at = url.rfind('@'); at != std::string_view::npos) {
    notes.push_back(std::string(what) +
                    ": the credentials in the proxy URL are not used (configure them on the "
                    "cluster instead)");
    url.remove_prefix(at + 1);
  }
  const std::string keyword = scheme == "https" ? "HTTPS " : "PROXY ";
  const ProxyList parsed = parseProxyList(keyword + std::string(url));
  if (parsed.entries.size() != 1) {
    notes.push_back(std::string(what) + ": '" + std::string(url) + "' is not host:port" +
                    (parsed.skipped.empty() ? "" : " (" + parsed.skipped.front().reason + ")"));
    return {};
  }
  return parsed.entries.front().str();
}

namespace {

// GVariant text as gsettings prints it: 'string' (with \' and \\ escapes),
// numbers, true/false, ['a', 'b'] and @as [] (an empty typed array).
struct GValue {
  std::string scalar;
  std::vector<std::string> list;
  bool is_list = false;
};

std::optional<std::string> parseQuoted(std::string_view& in) {
  if (in.empty() || (in.front() != '\'' && in.front() != '"')) return std::nullopt;
  const char quote = in.front();
  in.remove_prefix(1);
  std::string out;
  while (!in.empty()) {
    const char c = in.front();
    in.remove_prefix(1);
    if (c == quote) return out;
    if (c == '\\') {
      if (in.empty()) return std::nullopt;
      out += in.front();
      in.remove_prefix(1);
    } else {
      out += c;
    }
  }
  return std::nullopt;  // unterminated
}

std::optional<GValue> parseGValue(std::string_view in) {
  in = trim(in);
  GValue v;
  if (in.starts_with("@as")) in = trim(in.substr(3));
  if (!in.empty() && in.front() == '[') {
    v.is_list = true;
    in.remove_prefix(1);
    while (true) {
      in = trim(in);
      if (in.empty()) return std::nullopt;
      if (in.front() == ']') return v;
      std::optional<std::string> item = parseQuoted(in);
      if (!item) return std::nullopt;
      v.list.push_back(std::move(*item));
      in = trim(in);
      if (!in.empty() && in.front() == ',') in.remove_prefix(1);
    }
  }
  if (!in.empty() && (in.front() == '\'' || in.front() == '"')) {
    std::optional<std::string> s = parseQuoted(in);
    if (!s) return std::nullopt;
    v.scalar = std::move(*s);
    return v;
  }
  if (in.starts_with("uint32 ")) in = trim(in.substr(7));
  if (in.starts_with("int32 ")) in = trim(in.substr(6));
  v.scalar = std::string(in);
  return v;
}

}  // namespace

std::optional<SystemProxySettings> settingsFromGsettings(std::string_view output) {
  // "org.gnome.system.proxy.http port 8080" -> values["http.port"]
  std::map<std::string, GValue> values;
  constexpr std::string_view kSchema = "org.gnome.system.proxy";
  while (!output.empty()) {
    const std::size_t nl = output.find('\n');
    std::string_view line = trim(output.substr(0, nl));
    output = nl == std::string_view::npos ? std::string_view() : output.substr(nl + 1);
    if (!line.starts_with(kSchema)) continue;
    line.remove_prefix(kSchema.size());
    std::string child;
    if (!line.empty() && line.front() == '.') {
      const std::size_t sp = line.find(' ');
      if (sp == std::string_view::npos) continue;
      child = std::string(line.substr(1, sp - 1)) + ".";
      line.remove_prefix(sp);
    }
    line = trim(line);
    const std::size_t sp = line.find(' ');
    if (sp == std::string_view::npos) continue;
    const std::string key = child + std::string(line.substr(0, sp));
    if (std::optional<GValue> v = parseGValue(line.substr(sp + 1))) values[key] = std::move(*v);
  }
  auto scalar = [&](const std::string& key) {
    auto it = values.find(key);
    return it == values.end() ? std::string() : it->second.scalar;
  };
  if (values.find("mode") == values.end()) return std::nullopt;
  SystemProxySettings s;
  s.from = "GNOME (org.gnome.system.proxy)";
  const std::string mode = scalar("mode");
  if (mode == "auto") {
    s.pac_url = scalar("autoconfig-url");
    s.mode = s.pac_url.empty() ? SystemProxySettings::Mode::AutoDetect
                               : SystemProxySettings::Mode::AutoUrl;
    return s;
  }
  if (mode != "manual") return s;  // "none" or unknown: Direct
  auto entry = [&](const char* scheme, const char* keyword) -> std::string {
    const std::string host = scalar(std::string(scheme) + ".host");
    if (host.empty()) return {};
    const std::string port = scalar(std::string(scheme) + ".port");
    const std::string url =
        std::string(keyword) + "://" +
        (host.find(':') != std::string::npos && host.front() != '[' ? "[" + host + "]" : host) +
        (port.empty() || port == "0" ? "" : ":" + port);
    return proxyEntryFromUrl(url, s.notes, std::string(scheme) + ".host");
  };
  s.manual.http = entry("http", "http");
  // GNOME's https settings name a proxy for https:// URLs; it is spoken to
  // in plain HTTP (CONNECT), like the http one.
  s.manual.https = entry("https", "http");
  if (!scalar("socks.host").empty())
    s.notes.push_back("socks.host: SOCKS proxies are not supported");
  s.manual.other = s.manual.http;
  if (s.manual.http.empty() && s.manual.https.empty()) {
    s.notes.push_back("mode is manual but no http or https proxy is set: DIRECT");
    return s;
  }
  s.mode = SystemProxySettings::Mode::Manual;
  if (auto it = values.find("ignore-hosts"); it != values.end())
    for (const std::string& h : it->second.list) addHostPattern(s.manual.bypass, h);
  return s;
}

SystemProxySettings settingsFromWindows(bool auto_detect, std::string_view auto_config_url,
                                        std::string_view proxy_server,
                                        std::string_view proxy_override) {
  SystemProxySettings s;
  s.from = "Windows Internet Settings";
  // WinINet's own order: the script first, then detection, then the proxy.
  if (!trim(auto_config_url).empty()) {
    s.mode = SystemProxySettings::Mode::AutoUrl;
    s.pac_url = std::string(trim(auto_config_url));
    return s;
  }
  if (auto_detect) {
    s.mode = SystemProxySettings::Mode::AutoDetect;
    return s;
  }
  std::string_view servers = trim(proxy_server);
  if (servers.empty()) return s;
  // "host:port" for every scheme, or "scheme=host:port" entries split by ';'.
  if (servers.find('=') == std::string_view::npos) {
    const std::string e = proxyEntryFromUrl(servers, s.notes, "ProxyServer");
    s.manual.http = s.manual.https = s.manual.other = e;
  } else {
    while (!servers.empty()) {
      const std::size_t semi = servers.find_first_of("; ");
      const std::string_view item = trim(servers.substr(0, semi));
      servers = semi == std::string_view::npos ? std::string_view() : servers.substr(semi + 1);
      const std::size_t eq = item.find('=');
      if (item.empty() || eq == std::string_view::npos) continue;
      const std::string scheme = toLowerAscii(trim(item.substr(0, eq)));
      const std::string_view where = trim(item.substr(eq + 1));
      if (scheme == "socks") {
        s.notes.push_back("ProxyServer: SOCKS proxies are not supported");
        continue;
      }
      // The proxy for a scheme is an HTTP proxy unless written as a URL.
      const std::string e = proxyEntryFromUrl(where, s.notes, "ProxyServer " + scheme);
      if (scheme == "http")
        s.manual.http = e;
      else if (scheme == "https")
        s.manual.https = e;
      else if (scheme == "ftp")
        s.manual.other = e;
    }
  }
  if (s.manual.http.empty() && s.manual.https.empty() && s.manual.other.empty()) return s;
  s.mode = SystemProxySettings::Mode::Manual;
  std::string_view overrides = proxy_override;
  while (!overrides.empty()) {
    const std::size_t semi = overrides.find_first_of("; ");
    addHostPattern(s.manual.bypass, overrides.substr(0, semi));
    overrides = semi == std::string_view::npos ? std::string_view() : overrides.substr(semi + 1);
  }
  return s;
}

std::string manualProxyPac(const ManualProxy& m, std::string_view from) {
  std::string out = "// Made by h2gate from the " + std::string(from) + " proxy settings.\n";
  if (std::any_of(m.bypass.begin(), m.bypass.end(),
                  [](const BypassRule& r) { return r.kind == BypassRule::Kind::Glob; }))
    out += "var matchesGlob = " + std::string(kGlobMatch) + ";\n";
  out +=
      "function FindProxyForURL(url, host) {\n"
      "  var h = host.toLowerCase();\n"
      "  if (h.charAt(h.length - 1) == \".\") h = h.substring(0, h.length - 1);\n";
  for (const BypassRule& r : m.bypass) out += "  if (" + condition(r) + ") return \"DIRECT\";\n";
  auto answer = [](const std::string& e) { return js(e.empty() ? "DIRECT" : e); };
  out += "  var scheme = url.substring(0, url.indexOf(\":\")).toLowerCase();\n";
  out += "  if (scheme == \"http\" || scheme == \"ws\") return " + answer(m.http) + ";\n";
  out += "  if (scheme == \"https\" || scheme == \"wss\") return " + answer(m.https) + ";\n";
  out += "  return " + answer(m.other) + ";\n}\n";
  return out;
}

}  // namespace h2gate::pac
