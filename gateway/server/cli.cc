#include "gateway/server/cli.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string_view>

#include "config/node_reader.h"
#include "filters/access_log.h"
#include "filters/pac_routing_config.h"
#include "filters/registry.h"
#include "gateway/base/ascii.h"
#include "gateway/base/keyring.h"
#include "gateway/base/log.h"
#include "gateway/net/ip_address.h"
#include "gateway/pac_engine/fetch.h"
#include "gateway/server/load_config.h"

namespace h2gate::cli {
namespace {

constexpr const char* kUpstreamCluster = "upstream";
constexpr uint32_t kMaxConcurrency = 1024;
constexpr uint64_t kMaxConfigSizeLimit = uint64_t{1} << 30;

bool allDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Parses a decimal port; false when not digits or above 65535.
bool parsePort(std::string_view text, uint16_t* out) {
  if (!allDigits(text) || text.size() > 5) return false;
  const unsigned long v = std::stoul(std::string(text));
  if (v > 65535) return false;
  *out = static_cast<uint16_t>(v);
  return true;
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool percentDecode(std::string_view in, std::string* out) {
  out->clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      *out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = hexValue(in[i + 1]);
    const int lo = hexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    *out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

// An address to bind: an IP literal, or "localhost" (→ 127.0.0.1). Binding
// must not depend on DNS.
std::string bindAddress(const std::string& text, config::SocketAddress* out) {
  config::SocketAddress a;
  if (std::string err = parseHostPort(text, &a); !err.empty()) return err;
  if (a.address == "localhost") a.address = "127.0.0.1";
  if (!config::isIpLiteral(a.address)) {
    return "'" + a.address + "' is not an IP address (use e.g. 127.0.0.1:3128 or [::1]:3128)";
  }
  *out = a;
  return {};
}

// "1048576", "64K", "8M", "1G" (also "8MiB", "8MB": binary multiples).
std::optional<uint64_t> parseSize(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 10) return std::nullopt;
  uint64_t value = std::stoull(std::string(text.substr(0, digits)));
  std::string unit = toLowerAscii(text.substr(digits));
  if (unit.ends_with("ib"))
    unit.resize(unit.size() - 2);
  else if (unit.size() == 2 && unit.back() == 'b')
    unit.pop_back();
  int shift = 0;
  if (unit == "k")
    shift = 10;
  else if (unit == "m")
    shift = 20;
  else if (unit == "g")
    shift = 30;
  else if (!unit.empty() && unit != "b")
    return std::nullopt;
  if (value > (uint64_t{1} << (63 - shift))) return std::nullopt;
  return value << shift;
}

void addError(ParseResult& r, const std::string& flag, const std::string& message) {
  r.errors.push_back(flag + ": " + message);
}

// --pac, --wpad, --system-proxy: where the PAC file comes from, once.
void setPacSource(ParseResult& r, const std::string& flag, Options::PacSource source,
                  std::string location) {
  Options& o = r.options;
  if (o.pac != Options::PacSource::None) {
    r.errors.push_back(o.pac_flag + " and " + flag +
                       " cannot be combined: give one source of the PAC file");
    return;
  }
  o.pac = source;
  o.pac_flag = flag;
  o.pac_location = std::move(location);
}

// The checks of --pac's value (a readable file, or a URL the PAC fetcher
// takes) and of the flags that go with a PAC route; errors into `r`.
void checkPacFlags(ParseResult& r, bool upstream_env) {
  Options& o = r.options;
  using Source = Options::PacSource;
  if (o.pac == Source::File) {
    if (std::string err = config::checkReadableFile(o.pac_location); !err.empty()) {
      addError(r, "--pac", err);
    } else {
      std::error_code ec;
      const auto absolute = std::filesystem::absolute(o.pac_location, ec);
      if (!ec) o.pac_location = absolute.string();
    }
  } else if (o.pac == Source::Url) {
    pac::FetchUrl parsed;
    if (std::string err = pac::parseFetchUrl(o.pac_location, &parsed); !err.empty()) {
      // The message may quote the URL: never its user:password@.
      const std::string shown = filters::redactUserinfo(o.pac_location);
      for (std::size_t at = err.find(o.pac_location); at != std::string::npos;
           at = err.find(o.pac_location, at + shown.size()))
        err.replace(at, o.pac_location.size(), shown);
      addError(r, "--pac", err);
    }
  }
  const bool pac = o.pac != Source::None;
  if (pac && !o.upstreams.empty())
    r.errors.push_back(o.pac_flag +
                       " and --upstream cannot be combined: the PAC file chooses the proxies");
  if (pac && !o.config_path.empty())
    r.errors.push_back(o.pac_flag +
                       " and -c cannot be combined: in a config file, write the route as the "
                       "forward_proxy's pac: (config/README.md)");
  if (o.proxy_auth && !pac && o.upstreams.empty() && (!o.config_path.empty() || !upstream_env))
    r.errors.push_back(
        "--proxy-auth needs the proxies it is for: --upstream URL, --pac, --wpad or "
        "--system-proxy (for clusters in a config file set proxy_authentication instead)");
  if (pac && o.proxy_auth == "basic" && o.proxy_keyring.empty())
    r.errors.push_back(
        "--proxy-auth basic needs a password, which flags never carry: for the "
        "proxies a PAC file names, give --proxy-credentials keyring:NAME (h2gate "
        "credentials set NAME USER stores it) or write proxy_authentication.credentials "
        "(password_file) in a config file (config/README.md)");
  if (!o.proxy_keyring.empty() && !o.proxy_auth)
    r.errors.push_back(
        "--proxy-credentials gives --proxy-auth's user name and password, but there is no "
        "--proxy-auth");
  if (pac && o.insecure)
    r.errors.push_back(
        "--insecure applies to --upstream proxies; give the CA of the proxies a "
        "PAC file names with --cacert FILE");
  if (!o.proxy_auth_allow.empty() && !o.proxy_auth)
    r.errors.push_back(
        "--proxy-auth-allow says which proxies get --proxy-auth's credentials, but there is no "
        "--proxy-auth");
  else if (!o.proxy_auth_allow.empty() && !pac)
    r.errors.push_back(
        "--proxy-auth-allow applies to the proxies a PAC file names (--pac, --wpad, "
        "--system-proxy)");
}

// Sets the route of listener `l`'s forward_proxy to `key: value` ("cluster"
// or "routes"), keeping the filter's other settings.
void setRoute(config::Listener& l, const char* key, const YAML::Node& value) {
  for (config::FilterConfig& f : l.filters) {
    if (f.name != filters::kForwardProxy) continue;
    YAML::Node routed(YAML::NodeType::Map);
    if (f.typed_config.IsMap()) {
      for (auto it = f.typed_config.begin(); it != f.typed_config.end(); ++it) {
        const std::string& k = it->first.Scalar();
        if (k != "cluster" && k != "routes") routed[it->first] = it->second;
      }
    }
    routed[key] = value;
    f.typed_config = routed;
    f.filter = nullptr;  // built from the old typed_config: validated again by checkConfig
  }
}

// The forward_proxy routes --pac, --wpad or --system-proxy stand for, as a
// config file writes them (filters/pac_routing_config.h reads them):
//   routes:
//   - match: {}
//     pac:
//       url: URL | file: PATH | wpad: true | system: true
//       trusted_ca: CACERT             # an https:// url
//       proxies:
//         trusted_ca: CACERT
//         proxy_authentication: {scheme: SCHEME, credentials: {keyring: NAME}}
//         authenticate_to: [ALLOW, ...]
YAML::Node pacRoutes(const Options& o) {
  using Source = Options::PacSource;
  YAML::Node pac(YAML::NodeType::Map);
  if (o.pac == Source::Url) pac["url"] = o.pac_location;
  if (o.pac == Source::File) pac["file"] = o.pac_location;
  if (o.pac == Source::Wpad) pac["wpad"] = true;
  if (o.pac == Source::System) pac["system"] = true;
  if (!o.cacert.empty() && o.pac == Source::Url && o.pac_location.rfind("https://", 0) == 0)
    pac["trusted_ca"] = o.cacert;
  YAML::Node proxies(YAML::NodeType::Map);
  if (!o.cacert.empty()) proxies["trusted_ca"] = o.cacert;
  if (o.proxy_auth) {
    YAML::Node auth(YAML::NodeType::Map);
    auth["scheme"] = *o.proxy_auth;
    if (!o.proxy_keyring.empty()) {
      YAML::Node credentials(YAML::NodeType::Map);
      credentials["keyring"] = o.proxy_keyring;
      auth["credentials"] = credentials;
    }
    proxies["proxy_authentication"] = auth;
  }
  if (!o.proxy_auth_allow.empty()) {
    YAML::Node allow(YAML::NodeType::Sequence);
    for (const std::string& entry : o.proxy_auth_allow) allow.push_back(entry);
    proxies["authenticate_to"] = allow;
  }
  if (proxies.size() > 0) pac["proxies"] = proxies;
  YAML::Node route(YAML::NodeType::Map);
  route["match"] = YAML::Node(YAML::NodeType::Map);
  route["pac"] = pac;
  YAML::Node routes(YAML::NodeType::Sequence);
  routes.push_back(route);
  return routes;
}

// --allow CIDR: "10.0.0.0/8", "fd00::/8" or an address alone, as a
// source_prefix_ranges entry. "" or why not.
std::string allowRange(const std::string& text, config::SourcePrefixRange* out) {
  std::string error;
  const std::optional<net::CidrRange> range = net::parseCidr(text, /*strict=*/true, &error);
  if (!range) return error + " (expected a range such as 192.168.0.0/16 or fd00::/8)";
  *out = config::SourcePrefixRange{range->base.str(), range->prefix, config::Mark{"<flags>"}};
  return {};
}

// `autostart ACTION` (gateway/server/autostart.h): the action at argv[i + 1]
// into o.autostart; returns the index of the last argument taken.
int parseAutostart(int argc, const char* const* argv, int i, ParseResult& r) {
  static constexpr std::string_view kActions[] = {"install", "uninstall", "status", "run"};
  if (i + 1 < argc && std::find(std::begin(kActions), std::end(kActions),
                                std::string_view(argv[i + 1])) != std::end(kActions)) {
    r.options.autostart = argv[i + 1];
    return i + 1;
  }
  r.errors.push_back("autostart: expected install, uninstall, status or run");
  return i;
}

// What does not go with `autostart ACTION`.
void checkAutostart(int argc, ParseResult& r) {
  const Options& o = r.options;
  if (o.autostart.empty()) return;
  if (o.validate) r.errors.push_back("autostart and --validate cannot be combined");
  if ((o.autostart == "uninstall" || o.autostart == "status") && argc > 3)
    r.errors.push_back("autostart " + o.autostart + " takes no flags");
}

}  // namespace

std::string parseHostPort(const std::string& text, config::SocketAddress* out) {
  const std::string expected = "expected HOST:PORT or [IPv6]:PORT, got '" + text + "'";
  std::string host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return expected;
    }
    host = text.substr(1, close - 1);
    if (host.find(':') == std::string::npos || !config::isIpLiteral(host)) {
      return "'" + host + "' in brackets is not an IPv6 address";
    }
    port = std::string_view(text).substr(close + 2);
  } else {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string::npos) return expected;
    host = text.substr(0, colon);
    if (host.find(':') != std::string::npos) {
      return "put IPv6 addresses in brackets, e.g. [::1]:3128 (got '" + text + "')";
    }
    port = std::string_view(text).substr(colon + 1);
  }
  if (host.empty()) return "missing host in '" + text + "'";
  uint16_t p = 0;
  if (!parsePort(port, &p)) return "invalid port in '" + text + "' (expected 0-65535)";
  *out = config::SocketAddress{host, p};
  return {};
}

// Messages below never quote the URL's authority: it may hold a password,
// and when the URL is malformed we cannot tell which part is the password.
std::string parseUpstreamUrl(const std::string& url, config::Cluster* out) {
  const std::string shape = " (expected https://[user:pass@]HOST[:PORT])";
  const std::size_t sep = url.find("://");
  if (sep == std::string::npos) return "not a URL" + shape;
  const std::string scheme = toLowerAscii(std::string_view(url).substr(0, sep));
  const bool tls = scheme == "https";
  if (!tls && scheme != "http") {
    const bool printable = std::all_of(scheme.begin(), scheme.end(), [](char c) {
      return isAsciiAlnum(c) || c == '+' || c == '-' || c == '.';
    });
    return (printable ? "unsupported scheme '" + scheme + "'" : std::string("unsupported scheme")) +
           shape;
  }
  const std::string rest = url.substr(sep + 3);
  // The last '@' ends the userinfo, so an unescaped '@' or '/' in a password
  // still splits where the user meant.
  const std::size_t at = rest.rfind('@');
  std::string hostport = at == std::string::npos ? rest : rest.substr(at + 1);
  if (!hostport.empty() && hostport.back() == '/') hostport.pop_back();
  if (hostport.find_first_of("/?#") != std::string::npos) {
    return "a proxy URL has no path, query or fragment" + shape;
  }

  config::Cluster c;
  if (at != std::string::npos) {
    const std::string userinfo = rest.substr(0, at);
    const std::size_t colon = userinfo.find(':');
    config::ProxyCredentials creds;
    if (!percentDecode(userinfo.substr(0, colon), &creds.username)) {
      return "invalid percent-encoding in the user name";
    }
    if (colon != std::string::npos &&
        !percentDecode(std::string_view(userinfo).substr(colon + 1), &creds.password)) {
      return "invalid percent-encoding in the password";
    }
    if (creds.username.empty()) return "empty user name" + shape;
    if (creds.username.find(':') != std::string::npos) {
      return "the user name must not contain ':' (Basic authentication cannot carry it)";
    }
    c.credentials = std::move(creds);
  }

  std::string host;
  std::string port_text;
  if (!hostport.empty() && hostport.front() == '[') {
    const std::size_t close = hostport.find(']');
    if (close == std::string::npos) return "missing ']' after an IPv6 address" + shape;
    host = hostport.substr(1, close - 1);
    if (host.find(':') == std::string::npos || !config::isIpLiteral(host)) {
      return "invalid IPv6 address in brackets" + shape;
    }
    const std::string after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return "unexpected text after ']'" + shape;
      port_text = after.substr(1);
      if (port_text.empty()) return "empty port" + shape;
    }
  } else {
    const std::size_t colon = hostport.find(':');
    host = hostport.substr(0, colon);
    if (colon != std::string::npos) {
      port_text = hostport.substr(colon + 1);
      if (port_text.find(':') != std::string::npos) {
        return "put IPv6 addresses in brackets, e.g. https://[2001:db8::1]:443";
      }
      if (port_text.empty()) return "empty port" + shape;
    }
    if (host.empty()) return "missing host" + shape;
    if (!config::isIpLiteral(host) && !config::isHostName(host)) {
      return "invalid host name" + shape;
    }
  }
  uint16_t port = tls ? 443 : 80;
  if (!port_text.empty() && (!parsePort(port_text, &port) || port == 0)) {
    return "invalid port (expected 1-65535)";
  }

  c.endpoints.push_back(config::SocketAddress{host, port});
  if (tls) {
    config::TlsContext t;
    // RFC 6066: SNI carries host names only; empty means "no SNI" for an IP.
    t.sni = config::isIpLiteral(host) ? std::string() : host;
    c.tls = std::move(t);
  }
  c.mark.file = "<flags>";
  *out = std::move(c);
  return {};
}

ParseResult parse(int argc, const char* const* argv, bool upstream_env) {
  ParseResult r;
  Options& o = r.options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string name;
    std::optional<std::string> inline_value;
    if (arg.rfind("--", 0) == 0 && arg.size() > 2) {
      const std::size_t eq = arg.find('=');
      name = arg.substr(0, eq);
      if (eq != std::string::npos) inline_value = arg.substr(eq + 1);
    } else if (arg == "-c" || arg == "-h" || arg == "-V") {
      name = arg;
    } else if (arg == "check" && !o.check && i == 1) {
      o.check = true;  // a subcommand: only as the first argument
      continue;
    } else if (arg == "service" && i == 1) {
      // A subcommand with an action: `service install|uninstall|run`.
      if (i + 1 < argc && (std::string_view(argv[i + 1]) == "install" ||
                           std::string_view(argv[i + 1]) == "uninstall" ||
                           std::string_view(argv[i + 1]) == "run")) {
        o.service = argv[++i];
      } else {
        r.errors.push_back("service: expected install, uninstall or run");
      }
      continue;
    } else if (arg == "autostart" && i == 1) {
      i = parseAutostart(argc, argv, i, r);
      continue;
    } else if (o.check && o.check_url.empty() && arg.rfind("-", 0) != 0) {
      if (arg.find("://") == std::string::npos)
        r.errors.push_back("check: expected a URL such as https://example.com/, got '" +
                           filters::redactUserinfo(arg) + "'");
      o.check_url = arg;
      continue;
    } else {
      // May be a mistyped URL with a password: never echo userinfo.
      r.errors.push_back("unexpected argument '" + filters::redactUserinfo(arg) + "' (see --help)");
      continue;
    }

    if (name == "-h" || name == "--help" || name == "-V" || name == "--version" ||
        name == "--validate" || name == "--insecure" || name == "--wpad" ||
        name == "--system-proxy") {
      if (inline_value) {
        addError(r, name, "takes no value");
        continue;
      }
      if (name == "-h" || name == "--help") o.help = true;
      if (name == "-V" || name == "--version") o.version = true;
      if (name == "--validate") o.validate = true;
      if (name == "--insecure") o.insecure = true;
      if (name == "--wpad") setPacSource(r, name, Options::PacSource::Wpad, "");
      if (name == "--system-proxy") setPacSource(r, name, Options::PacSource::System, "");
      continue;
    }

    static constexpr const char* kValued[] = {"-c",
                                              "--config",
                                              "--listen",
                                              "--admin",
                                              "--allow",
                                              "--upstream",
                                              "--cacert",
                                              "--concurrency",
                                              "--log-level",
                                              "--max-config-size",
                                              "--proxy-auth",
                                              "--proxy-auth-allow",
                                              "--proxy-credentials",
                                              "--pac",
                                              "--log-file",
                                              "--log-file-max-size",
                                              "--log-file-keep",
                                              "--step-timeout"};
    if (std::find_if(std::begin(kValued), std::end(kValued),
                     [&](const char* v) { return name == v; }) == std::end(kValued)) {
      r.errors.push_back("unknown flag '" + name + "' (see --help)");
      continue;
    }
    std::string value;
    if (inline_value) {
      value = *inline_value;
    } else if (i + 1 < argc && std::string_view(argv[i + 1]).rfind("--", 0) != 0) {
      value = argv[++i];
    } else {
      addError(r, name, "missing value");
      continue;
    }

    if (name == "-c" || name == "--config") {
      if (value.empty()) addError(r, name, "missing value");
      o.config_path = value;
    } else if (name == "--listen" || name == "--admin") {
      config::SocketAddress a;
      if (std::string err = bindAddress(value, &a); !err.empty()) addError(r, name, err);
      (name == "--listen" ? o.listen : o.admin) = value;
    } else if (name == "--allow") {
      config::SourcePrefixRange range;
      if (std::string err = allowRange(value, &range); !err.empty()) addError(r, name, err);
      o.allow.push_back(value);
    } else if (name == "--upstream") {
      config::Cluster c;
      if (std::string err = parseUpstreamUrl(value, &c); !err.empty()) addError(r, name, err);
      o.upstreams.push_back(value);
    } else if (name == "--log-file") {
      if (value.empty()) addError(r, name, "missing value");
      o.log_file = value;
    } else if (name == "--log-file-max-size") {
      if (auto bytes = parseSize(value); bytes && (*bytes == 0 || *bytes >= 4096))
        o.log_file_options.max_bytes = *bytes;
      else
        addError(
            r, name,
            "expected 0 (never rotate) or a size of at least 4K (e.g. 10M), got '" + value + "'");
    } else if (name == "--log-file-keep") {
      if (allDigits(value) && value.size() <= 3 && std::stoul(value) <= 100)
        o.log_file_options.keep = static_cast<unsigned>(std::stoul(value));
      else
        addError(r, name, "expected a number of old files from 0 to 100, got '" + value + "'");
    } else if (name == "--cacert") {
      if (value.empty()) addError(r, name, "missing value");
      o.cacert = value;
    } else if (name == "--concurrency") {
      if (!allDigits(value) || value.size() > 5 || std::stoul(value) < 1 ||
          std::stoul(value) > kMaxConcurrency) {
        addError(r, name,
                 "expected a number from 1 to " + std::to_string(kMaxConcurrency) + ", got '" +
                     value + "'");
      } else {
        o.concurrency = static_cast<uint32_t>(std::stoul(value));
      }
    } else if (name == "--proxy-auth") {
      if (value != "auto" && value != "negotiate" && value != "ntlm" && value != "basic")
        addError(r, name, "expected one of auto, negotiate, ntlm, basic, got '" + value + "'");
      else
        o.proxy_auth = value;
    } else if (name == "--pac") {
      if (value.empty())
        addError(r, name, "expected a PAC file's URL (http:// or https://) or path");
      else
        setPacSource(r, name,
                     value.find("://") != std::string::npos ? Options::PacSource::Url
                                                            : Options::PacSource::File,
                     value);
    } else if (name == "--proxy-credentials") {
      // Only from the keyring: a password in a flag would be in ps and the
      // shell's history.
      constexpr std::string_view kPrefix = "keyring:";
      const std::string entry =
          value.rfind(kPrefix, 0) == 0 ? value.substr(kPrefix.size()) : std::string();
      if (value.rfind(kPrefix, 0) != 0)
        addError(r, name, "expected keyring:NAME (a keyring entry; see h2gate credentials)");
      else if (std::string why = keyring::checkName(entry); !why.empty())
        addError(r, name, why);
      else
        o.proxy_keyring = entry;
    } else if (name == "--proxy-auth-allow") {
      // "a,b" or a repeated flag; each entry as authenticate_to takes it.
      std::size_t start = 0;
      do {
        std::size_t comma = value.find(',', start);
        if (comma == std::string::npos) comma = value.size();
        const std::string entry(trim(std::string_view(value).substr(start, comma - start)));
        filters::AuthenticateTo to;
        if (entry.empty())
          addError(r, name, "an empty entry (expected HOST, .DOMAIN, an IP address or *)");
        else if (std::string why = to.add(entry); !why.empty())
          addError(r, name, why);
        else
          o.proxy_auth_allow.push_back(entry);
        start = comma + 1;
      } while (start <= value.size());
    } else if (name == "--max-config-size") {
      if (auto bytes = parseSize(value); bytes && *bytes >= 1024 && *bytes <= kMaxConfigSizeLimit)
        o.max_config_bytes = *bytes;
      else
        addError(r, name, "expected a size from 1K to 1G (e.g. 64M, 1048576), got '" + value + "'");
    } else if (name == "--step-timeout") {
      const auto d = config::parseDuration(value);
      if (d && *d >= std::chrono::milliseconds(100) && *d <= std::chrono::minutes(10))
        o.step_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*d);
      else
        addError(r, name, "expected a duration from 100ms to 10m (e.g. 30s), got '" + value + "'");
    } else if (name == "--log-level") {
      log::Level level;
      if (!log::parseLevel(value, &level)) {
        addError(r, name, "expected one of trace, debug, info, warn, error, got '" + value + "'");
      }
      o.log_level = value;
    }
  }
  checkPacFlags(r, upstream_env);
  if (o.check && o.validate) r.errors.push_back("check and --validate cannot be combined");
  if (o.step_timeout && !o.check) r.errors.push_back("--step-timeout is an option of h2gate check");
  if (!o.service.empty() && o.validate)
    r.errors.push_back("service and --validate cannot be combined");
  if (o.service == "uninstall" && argc > 3) r.errors.push_back("service uninstall takes no flags");
  checkAutostart(argc, r);
  if (o.validate && o.config_path.empty()) {
    r.errors.push_back("--validate needs -c FILE (the built-in default is always valid)");
  }
  return r;
}

std::string usage() {
  return R"(Usage: h2gate [options]
       h2gate check [URL] [options]
       h2gate credentials set NAME USER | show NAME | delete NAME
       h2gate service install|uninstall [options]     (Windows)
       h2gate autostart install|uninstall|status [options]   (Windows)

A local forward proxy: applications use it as their HTTP(S) proxy
(127.0.0.1:3128 by default); it carries their traffic to upstream HTTPS
proxies over HTTP/2 (one TLS connection, many tunnels) or connects directly.

Options:
  -c, --config FILE        Envoy-style YAML config (see config/examples/)
      --validate           check the config given with -c, print every problem,
                           exit 0 if it is valid, 1 if not
      --listen HOST:PORT   address of the proxy listener (an IP, [::1] or
                           localhost); replaces the first listener's addresses
      --allow CIDR         clients that may use the first listener (--listen):
                           192.168.0.0/16, fd00::/8 or one address; repeat for
                           several. Others are closed at once. Needed when it
                           listens on an address other than loopback
      --admin HOST:PORT    admin/metrics address (default 127.0.0.1:9901)
      --upstream URL       upstream proxy: https://[user:pass@]HOST[:PORT]
                           (port 443) or http://HOST[:PORT] (port 80); repeat
                           for several endpoints of one cluster. Percent-encode
                           special characters in user and password. Default:
                           $H2GATE_UPSTREAM when none of --upstream, -c, --pac,
                           --wpad, --system-proxy is given; otherwise connect
                           directly.
      --pac URL|FILE       route as the PAC file at URL (http:// or https://)
                           or in FILE says: the proxies it names (PROXY,
                           HTTPS) or DIRECT, per request
      --wpad               route by the PAC file WPAD finds (DNS:
                           http://wpad.<domain>/wpad.dat)
      --system-proxy       route by this machine's proxy settings (their PAC
                           file, WPAD or proxy). --pac, --wpad, --system-proxy
                           and --upstream exclude each other; none with -c
      --cacert FILE        CA bundle to verify --upstream proxies, the HTTPS
                           proxies a PAC file names and an https:// --pac URL
                           (default: the system bundle)
      --insecure           do not verify the --upstream proxy's certificate
      --proxy-auth SCHEME  authenticate to the --upstream proxy, or to the
                           proxies the PAC file names: negotiate (Kerberos:
                           your kinit ticket), ntlm (user:pass@ in the
                           --upstream URL or --proxy-credentials; without
                           them $NTLM_USER_FILE, or on Windows the logged-on
                           user), basic (user:pass@ in the --upstream URL or
                           --proxy-credentials) or auto (the strongest the
                           proxy asks for)
      --proxy-credentials keyring:NAME
                           --proxy-auth's user name and password from the
                           keyring entry NAME (h2gate credentials set);
                           negotiate and auto then get the Kerberos ticket
                           with that password (no kinit) and renew it
      --proxy-auth-allow HOST|.DOMAIN|IP|*
                           the proxies a PAC file names that get --proxy-auth's
                           credentials (repeat, or a comma list). Default: the
                           PAC file's own domain (--pac
                           http://wpad.corp.example/x.pac: .corp.example;
                           a FILE: every proxy)
      --concurrency N      worker threads (default 1)
      --max-config-size SIZE
                           refuse a config file larger than SIZE (bytes, or
                           with K, M, G: 64M); default 8M. Loading takes
                           tens of times the file's size in memory
      --log-level LEVEL    trace, debug, info, warn or error (default info)
      --log-file FILE      append the log to FILE instead of writing it to
                           stderr. At --log-file-max-size SIZE (default
                           10M; 0: never) FILE becomes FILE.1 (FILE.1
                           FILE.2, ...; --log-file-keep N old files, default
                           5) and a new FILE is started
  -h, --help               this text
  -V, --version            print the version

Commands:
  check [URL]              walk the path a request for URL takes with this
                           configuration (same flags and -c FILE as the daemon;
                           no daemon needed): route, DNS, TCP, TLS, proxy
                           authentication, CONNECT, a HEAD request through the
                           tunnel. Prints each step with its time, then the
                           first failure and what to do. Exit 0 when the path
                           works, 1 when not. URL default: https://example.com/
      --step-timeout DURATION
                           check: how long a step may wait for a server in
                           all (DNS and TCP to the destination, the proxy's
                           answer, TLS and the request through the tunnel;
                           the proxy's DNS, TCP and TLS take the cluster's
                           connect_timeout), e.g. 30s; default 10s. A
                           response head is at most 64 KiB
  credentials set NAME USER
                           store USER and a password (typed without echo, or
                           one line on standard input) as the entry NAME of
                           the system's keyring: the Secret Service (GNOME
                           Keyring, KWallet) or Windows Credential Manager.
                           A config's credentials: {keyring: NAME} and
                           --proxy-credentials keyring:NAME read it
  credentials show NAME    print the entry's user name and whether it holds a
                           password (never the password); exit 1 if absent
  credentials delete NAME  delete the entry; exit 1 if absent
  service install [options]
                           Windows: register the service "h2gate" (started
                           automatically at boot, as LocalSystem) that runs
                           h2gate with these options (-c FILE, ...); the
                           config is checked first. Its log goes to
                           --log-file FILE, default
                           %ProgramData%\h2gate\h2gate.log
  service uninstall        Windows: stop the service if it runs (it drains)
                           and remove it
  service run [options]    what the service manager starts (not for a console)
  autostart install [options]
                           Windows: start h2gate with these options at each of
                           your logons, as you (no administrator needed; single
                           sign-on to proxies is then yours, where the service
                           is the computer's account): the value "h2gate" of
                           HKCU\Software\Microsoft\Windows\CurrentVersion\Run,
                           runs "<this h2gate.exe>" autostart run [options];
                           the config is checked first, paths made absolute.
                           No console window stays open; the log goes to
                           --log-file FILE, default
                           %LOCALAPPDATA%\h2gate\h2gate.log. Installing
                           again replaces the value
  autostart uninstall      Windows: remove that value (a running h2gate goes on)
  autostart status         Windows: print it; exit 0 if there, 1 if not
  autostart run [options]  what the Run value starts: h2gate without a console

Flags accept --flag VALUE and --flag=VALUE.
Exit status: 0 on a clean stop, 1 on a configuration or start error, 2 on a
usage error.
)";
}

config::LoadResult buildBootstrap(const Options& options,
                                  const std::optional<std::string>& upstream_env) {
  config::LoadResult r;
  if (!options.config_path.empty()) {
    r = loadConfigFile(options.config_path, options.max_config_bytes);
    if (!r.ok()) return r;
  } else {
    r.bootstrap = config::defaultBootstrap();
  }
  config::Bootstrap& b = r.bootstrap;
  const bool from_flags = options.config_path.empty();
  auto fail = [&](std::string message) {
    r.problems.push_back(config::Problem{config::Mark{}, "", std::move(message)});
  };

  if (options.listen) {
    config::SocketAddress a;
    if (std::string err = bindAddress(*options.listen, &a); !err.empty()) {
      fail("--listen: " + err);
    } else if (b.listeners.empty()) {
      fail("--listen: the config has no listener to move");
    } else {
      b.listeners[0].address = a;
      b.listeners[0].additional_addresses.clear();
    }
  }
  if (!options.allow.empty()) {
    std::vector<config::SourcePrefixRange> ranges;
    for (const std::string& text : options.allow) {
      config::SourcePrefixRange range;
      if (std::string err = allowRange(text, &range); !err.empty())
        fail("--allow: " + err);
      else
        ranges.push_back(std::move(range));
    }
    if (b.listeners.empty())
      fail("--allow: the config has no listener");
    else
      b.listeners[0].source_prefix_ranges = std::move(ranges);
  }
  if (options.admin) {
    config::SocketAddress a;
    if (std::string err = bindAddress(*options.admin, &a); !err.empty()) {
      fail("--admin: " + err);
    } else {
      b.admin.address = a;
      b.admin.enabled = true;
    }
  }

  std::vector<std::string> urls = options.upstreams;
  std::string origin = "--upstream";
  // The environment's default proxy is not for a PAC route: its file names them.
  if (urls.empty() && options.config_path.empty() && options.pac == Options::PacSource::None &&
      upstream_env && !upstream_env->empty()) {
    urls.push_back(*upstream_env);
    origin = "H2GATE_UPSTREAM";
  }
  config::Cluster* flag_cluster = nullptr;
  if (!urls.empty()) {
    // All URLs become endpoints of one cluster, so routing stays "the
    // upstream"; they must therefore agree on scheme and credentials.
    std::optional<config::Cluster> merged;
    for (const std::string& url : urls) {
      config::Cluster c;
      if (std::string err = parseUpstreamUrl(url, &c); !err.empty()) {
        fail(origin + ": " + err);
        continue;
      }
      if (!merged) {
        merged = std::move(c);
        continue;
      }
      const auto same_creds = [](const auto& x, const auto& y) {
        if (x.has_value() != y.has_value()) return false;
        return !x || (x->username == y->username && x->password == y->password);
      };
      if (merged->tls.has_value() != c.tls.has_value() ||
          !same_creds(merged->credentials, c.credentials)) {
        fail(origin +
             ": all upstreams must use the same scheme and credentials (they are "
             "endpoints of one cluster)");
        continue;
      }
      merged->endpoints.push_back(c.endpoints.front());
      if (merged->tls) merged->tls->sni.clear();  // each endpoint's own host name
    }
    if (merged) {
      if (b.findCluster(kUpstreamCluster) != nullptr) {
        fail(origin + ": the config already has a cluster named '" + kUpstreamCluster + "'");
      } else {
        merged->name = kUpstreamCluster;
        b.clusters.push_back(std::move(*merged));
        flag_cluster = &b.clusters.back();
        for (config::Listener& l : b.listeners)
          setRoute(l, "cluster", YAML::Node(kUpstreamCluster));
      }
    }
  }

  const bool pac = options.pac != Options::PacSource::None;
  if (pac) {
    if (b.listeners.empty())
      fail(options.pac_flag + ": the config has no listener to route");
    else
      setRoute(b.listeners[0], "routes", pacRoutes(options));
  }

  if (!options.cacert.empty() && pac) {
    if (std::string err = config::checkReadableFile(options.cacert); !err.empty())
      fail("--cacert: " + err);
  } else if (!options.cacert.empty() || options.insecure) {
    const std::string flag = !options.cacert.empty() ? "--cacert" : "--insecure";
    if (flag_cluster == nullptr) {
      if (urls.empty()) {
        fail(flag +
             " applies to --upstream (or H2GATE_UPSTREAM) proxies; for clusters in a "
             "config file set common_tls_context.validation_context instead");
      }
    } else if (!flag_cluster->tls) {
      fail(flag + " needs an https:// upstream");
    } else {
      if (!options.cacert.empty()) {
        if (std::string err = config::checkReadableFile(options.cacert); !err.empty()) {
          fail("--cacert: " + err);
        } else {
          flag_cluster->tls->trusted_ca = options.cacert;
        }
      }
      if (options.insecure) flag_cluster->tls->insecure_skip_verify = true;
    }
  }

  if (!options.proxy_keyring.empty() && !pac) {
    if (flag_cluster == nullptr) {
      fail(
          "--proxy-credentials applies to --upstream (or H2GATE_UPSTREAM) proxies and to those "
          "a PAC file names; for clusters in a config file write credentials: {keyring: " +
          options.proxy_keyring + "}");
    } else if (flag_cluster->credentials) {
      fail("--proxy-credentials and user:pass@ in the --upstream URL: give the credentials once");
    } else {
      std::string why;
      std::optional<std::string> user;
      std::optional<std::string> password =
          config::keyringPassword(options.proxy_keyring, {}, &user, &why);
      if (!password) {
        fail("--proxy-credentials: " + why);
      } else {
        flag_cluster->credentials.emplace(*user, std::move(*password), std::string(),
                                          options.proxy_keyring);
        config::wipe(*password);
      }
    }
  }

  if (options.proxy_auth && !pac) {
    using Scheme = config::ProxyAuthentication::Scheme;
    const std::string& v = *options.proxy_auth;
    const Scheme scheme = v == "negotiate" ? Scheme::Negotiate
                          : v == "ntlm"    ? Scheme::Ntlm
                          : v == "basic"   ? Scheme::Basic
                                           : Scheme::Auto;
    if (flag_cluster == nullptr) {
      fail(
          "--proxy-auth applies to --upstream (or H2GATE_UPSTREAM) proxies; for clusters in a "
          "config file set proxy_authentication instead");
    } else if (scheme == Scheme::Basic && !flag_cluster->credentials) {
      fail("--proxy-auth basic needs user:pass@ in the --upstream URL or --proxy-credentials");
    } else {
      flag_cluster->authentication.emplace();
      flag_cluster->authentication->scheme = scheme;
      // NTLM authenticates connections, which HTTP/2 cannot carry.
      if (scheme == Scheme::Ntlm && flag_cluster->tls)
        flag_cluster->tls->alpn_protocols = {"http/1.1"};
    }
  }

  if (options.concurrency) b.concurrency = *options.concurrency;
  if (from_flags) b.source = "<flags>";
  if (!r.problems.empty()) return r;
  r.problems = checkConfig(b);
  return r;
}

}  // namespace h2gate::cli
