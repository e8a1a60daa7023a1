// The platform's proxy settings as a PAC source: the environment, GNOME's
// gsettings output and Windows' Internet Settings strings, and the PAC file
// h2gate makes from manual settings, evaluated by the engine.
#include "gateway/pac_engine/system_proxy.h"

#include <catch2/catch.hpp>

#include "tests/unit/pac_engine/pac_test_util.h"

using namespace h2gate::pac;
using namespace h2gate::pac::test;
using Mode = SystemProxySettings::Mode;

namespace {

// What the PAC file made from `m` answers for `url`.
std::string answer(const ManualProxy& m, const std::string& url, const std::string& host) {
  PacEnvironment env;
  env.resolver = std::make_shared<TableResolver>();
  PacContext ctx(env);
  const std::string text = manualProxyPac(m, "test");
  const PacError e = ctx.load(text, "manual.pac", in(std::chrono::seconds(5)));
  if (e) return "LOAD " + e.message + "\n" + text;
  RawAnswer a = ctx.findProxy(url, host, in(std::chrono::seconds(5)));
  return a.error ? "ERROR " + a.error.message : a.text;
}

}  // namespace

TEST_CASE("system proxy: environment variables, curl's rules", "[pac][system]") {
  SystemProxySettings s = settingsFromEnvironment({});
  CHECK(s.mode == Mode::Direct);

  s = settingsFromEnvironment({{"http_proxy", "http://proxy.corp:3128"},
                               {"https_proxy", "http://user:secret@proxy.corp:3129/"},
                               {"no_proxy", "localhost,.internal.corp,10.0.0.0/8,host:8080"}});
  REQUIRE(s.mode == Mode::Manual);
  CHECK(s.from == "environment");
  CHECK(s.manual.http == "PROXY proxy.corp:3128");
  CHECK(s.manual.https == "PROXY proxy.corp:3129");
  CHECK(s.manual.other.empty());
  REQUIRE(s.notes.size() == 2);
  CHECK(s.notes[0] ==
        "https_proxy: the credentials in the proxy URL are not used (configure them on the "
        "cluster instead)");
  CHECK_THAT(s.notes[1], Catch::StartsWith("no_proxy: 'host:8080'"));
  CHECK(s.notes[0].find("secret") == std::string::npos);

  CHECK(answer(s.manual, "http://www.example.com/", "www.example.com") == "PROXY proxy.corp:3128");
  CHECK(answer(s.manual, "https://www.example.com/", "www.example.com") == "PROXY proxy.corp:3129");
  CHECK(answer(s.manual, "https://localhost/", "localhost") == "DIRECT");
  CHECK(answer(s.manual, "https://wiki.internal.corp/", "wiki.internal.corp") == "DIRECT");
  CHECK(answer(s.manual, "https://internal.corp/", "internal.corp") == "DIRECT");
  CHECK(answer(s.manual, "https://notinternal.corp/", "notinternal.corp") ==
        "PROXY proxy.corp:3129");
  CHECK(answer(s.manual, "http://10.1.2.3/", "10.1.2.3") == "DIRECT");
  CHECK(answer(s.manual, "http://11.1.2.3/", "11.1.2.3") == "PROXY proxy.corp:3128");
  CHECK(answer(s.manual, "ftp://files.example.com/", "files.example.com") == "DIRECT");

  // Upper case variants, except HTTP_PROXY (httpoxy); lower case wins.
  s = settingsFromEnvironment({{"HTTP_PROXY", "http://evil:1"},
                               {"HTTPS_PROXY", "https://secure.corp"},
                               {"https_proxy", ""},
                               {"ALL_PROXY", "proxy.corp:8080"},
                               {"NO_PROXY", "*"}});
  REQUIRE(s.mode == Mode::Manual);
  CHECK(s.manual.http == "PROXY proxy.corp:8080");  // all_proxy, not HTTP_PROXY
  CHECK(s.manual.https == "HTTPS secure.corp:443");
  CHECK(answer(s.manual, "https://x.example/", "x.example") == "DIRECT");  // NO_PROXY=*

  s = settingsFromEnvironment({{"http_proxy", "socks5://s.corp:1080"}});
  CHECK(s.mode == Mode::Direct);
  REQUIRE(s.notes.size() == 1);
  CHECK(s.notes[0] == "http_proxy: socks5 proxies are not supported");
  s = settingsFromEnvironment({{"http_proxy", "http://proxy.corp:99999"}});
  CHECK(s.mode == Mode::Direct);
  CHECK_THAT(s.notes.at(0), Catch::Contains("port 99999 is out of range"));
}

TEST_CASE("system proxy: GNOME's gsettings", "[pac][system]") {
  const std::string manual = R"(org.gnome.system.proxy autoconfig-url ''
org.gnome.system.proxy ignore-hosts ['localhost', '127.0.0.0/8', '::1', '*.corp.example', 'intranet', '.lan.example', '192.168.1.7']
org.gnome.system.proxy mode 'manual'
org.gnome.system.proxy use-same-proxy true
org.gnome.system.proxy.ftp host ''
org.gnome.system.proxy.ftp port 0
org.gnome.system.proxy.http authentication-password ''
org.gnome.system.proxy.http authentication-user ''
org.gnome.system.proxy.http enabled false
org.gnome.system.proxy.http host 'proxy.corp.example'
org.gnome.system.proxy.http port 3128
org.gnome.system.proxy.http use-authentication false
org.gnome.system.proxy.https host 'secure.corp.example'
org.gnome.system.proxy.https port 8443
org.gnome.system.proxy.socks host 'socks.corp.example'
org.gnome.system.proxy.socks port 1080
)";
  std::optional<SystemProxySettings> s = settingsFromGsettings(manual);
  REQUIRE(s);
  REQUIRE(s->mode == Mode::Manual);
  CHECK(s->from == "GNOME (org.gnome.system.proxy)");
  CHECK(s->manual.http == "PROXY proxy.corp.example:3128");
  CHECK(s->manual.https == "PROXY secure.corp.example:8443");
  CHECK(s->notes == std::vector<std::string>{"socks.host: SOCKS proxies are not supported"});
  CHECK(s->manual.bypass.size() == 7);
  CHECK(answer(s->manual, "http://a.example/", "a.example") == "PROXY proxy.corp.example:3128");
  CHECK(answer(s->manual, "https://a.example/", "a.example") == "PROXY secure.corp.example:8443");
  CHECK(answer(s->manual, "https://localhost/", "localhost") == "DIRECT");
  CHECK(answer(s->manual, "https://LocalHost./", "LocalHost.") == "DIRECT");
  CHECK(answer(s->manual, "http://127.0.0.5/", "127.0.0.5") == "DIRECT");
  CHECK(answer(s->manual, "http://[::1]/", "::1") == "DIRECT");
  CHECK(answer(s->manual, "https://git.corp.example/", "git.corp.example") == "DIRECT");
  CHECK(answer(s->manual, "https://corp.example/", "corp.example") ==
        "PROXY secure.corp.example:8443");  // '*.' needs a subdomain
  CHECK(answer(s->manual, "https://intranet/", "intranet") == "DIRECT");
  CHECK(answer(s->manual, "https://intranet2/", "intranet2") == "PROXY secure.corp.example:8443");
  CHECK(answer(s->manual, "https://nas.lan.example/", "nas.lan.example") == "DIRECT");
  CHECK(answer(s->manual, "http://192.168.1.7/", "192.168.1.7") == "DIRECT");
  CHECK(answer(s->manual, "http://192.168.1.8/", "192.168.1.8") == "PROXY proxy.corp.example:3128");

  s = settingsFromGsettings(
      "org.gnome.system.proxy autoconfig-url 'http://wpad.corp.example/proxy.pac'\n"
      "org.gnome.system.proxy mode 'auto'\n");
  REQUIRE(s);
  CHECK(s->mode == Mode::AutoUrl);
  CHECK(s->pac_url == "http://wpad.corp.example/proxy.pac");
  s = settingsFromGsettings("org.gnome.system.proxy mode 'auto'\n");
  REQUIRE(s);
  CHECK(s->mode == Mode::AutoDetect);
  s = settingsFromGsettings("org.gnome.system.proxy mode 'none'\n");
  REQUIRE(s);
  CHECK(s->mode == Mode::Direct);
  CHECK_FALSE(settingsFromGsettings("No such schema \"org.gnome.system.proxy\"\n"));
  // Manual without an http or https proxy: nothing to use.
  s = settingsFromGsettings(
      "org.gnome.system.proxy mode 'manual'\norg.gnome.system.proxy.socks host 's'\n");
  REQUIRE(s);
  CHECK(s->mode == Mode::Direct);
  // Quotes and escapes in values; an empty typed array.
  s = settingsFromGsettings(
      "org.gnome.system.proxy mode 'manual'\n"
      "org.gnome.system.proxy ignore-hosts @as []\n"
      "org.gnome.system.proxy.http host \"it's.example\"\n"
      "org.gnome.system.proxy.http port 80\n");
  REQUIRE(s);
  CHECK(s->mode == Mode::Direct);  // "it's.example" is no host name
  CHECK_THAT(s->notes.at(0), Catch::Contains("is not host:port"));
}

TEST_CASE("system proxy: Windows Internet Settings strings", "[pac][system]") {
  SystemProxySettings s = settingsFromWindows(false, "", "proxy.corp:8080", "*.corp;<local>;10.*");
  REQUIRE(s.mode == Mode::Manual);
  CHECK(s.manual.http == "PROXY proxy.corp:8080");
  CHECK(s.manual.https == "PROXY proxy.corp:8080");
  CHECK(answer(s.manual, "https://x.example/", "x.example") == "PROXY proxy.corp:8080");
  CHECK(answer(s.manual, "https://git.corp/", "git.corp") == "DIRECT");
  CHECK(answer(s.manual, "https://printer/", "printer") == "DIRECT");
  CHECK(answer(s.manual, "http://10.4.4.4/", "10.4.4.4") == "DIRECT");
  CHECK(answer(s.manual, "http://11.4.4.4/", "11.4.4.4") == "PROXY proxy.corp:8080");

  s = settingsFromWindows(false, "", "http=web.corp:3128;https=tls.corp:3129;socks=s.corp:1080",
                          "");
  REQUIRE(s.mode == Mode::Manual);
  CHECK(s.manual.http == "PROXY web.corp:3128");
  CHECK(s.manual.https == "PROXY tls.corp:3129");
  CHECK(s.manual.other.empty());
  CHECK(s.notes == std::vector<std::string>{"ProxyServer: SOCKS proxies are not supported"});
  CHECK(answer(s.manual, "ftp://f.example/", "f.example") == "DIRECT");

  s = settingsFromWindows(true, " http://wpad.corp/proxy.pac ", "proxy.corp:8080", "");
  CHECK(s.mode == Mode::AutoUrl);  // the script wins, as in WinINet
  CHECK(s.pac_url == "http://wpad.corp/proxy.pac");
  s = settingsFromWindows(true, "", "proxy.corp:8080", "");
  CHECK(s.mode == Mode::AutoDetect);
  s = settingsFromWindows(false, "", "", "*.corp");
  CHECK(s.mode == Mode::Direct);
}

TEST_CASE("system proxy: proxy URLs as found in settings", "[pac][system]") {
  std::vector<std::string> notes;
  CHECK(proxyEntryFromUrl("proxy:8080", notes, "x") == "PROXY proxy:8080");
  CHECK(proxyEntryFromUrl("http://proxy", notes, "x") == "PROXY proxy:80");
  CHECK(proxyEntryFromUrl("HTTPS://Proxy.Corp/", notes, "x") == "HTTPS proxy.corp:443");
  CHECK(proxyEntryFromUrl("http://[2001:db8::1]:3128", notes, "x") == "PROXY [2001:db8::1]:3128");
  CHECK(proxyEntryFromUrl("  ", notes, "x").empty());
  CHECK(notes.empty());
  CHECK(proxyEntryFromUrl("http://a b:1", notes, "x").empty());
  CHECK(notes.size() == 1);
}

TEST_CASE("system proxy: the PAC file from manual settings quotes what it embeds",
          "[pac][system]") {
  ManualProxy m;
  m.http = "PROXY p:1";
  m.bypass.push_back({BypassRule::Kind::Exact, "a\"b\\c"});
  m.bypass.push_back({BypassRule::Kind::Glob, "*\");alert(\"x"});
  const std::string text = manualProxyPac(m, "test");
  CHECK(answer(m, "http://a\"b\\c/", "a\"b\\c") == "DIRECT");
  CHECK(answer(m, "http://other/", "other") == "PROXY p:1");
  CHECK(text.find("alert(\"x\")") == std::string::npos);
  // Windows-style globs with regular-expression characters stay literal.
  ManualProxy w;
  w.http = "PROXY p:1";
  w.bypass.push_back({BypassRule::Kind::Glob, "a(b)+.corp*"});
  CHECK(answer(w, "http://a(b)+.corp.example/", "a(b)+.corp.example") == "DIRECT");
  CHECK(answer(w, "http://abb.corp/", "abb.corp") == "PROXY p:1");
}

TEST_CASE("system proxy: bypass globs of many '*' answer at once; non-ASCII ones match nothing",
          "[pac][system][hostile]") {
  // From a fuzzer's GNOME ignore-hosts: as regular expressions these took
  // seconds per host (exponential backtracking) and the answer timed out.
  ManualProxy m;
  m.http = "PROXY p:1";
  m.bypass.push_back({BypassRule::Kind::Glob, std::string(40, '*') + "localhost"});
  m.bypass.push_back({BypassRule::Kind::Glob, "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b"});
  m.bypass.push_back({BypassRule::Kind::Glob, "*.in?ra.example"});
  const std::string host = std::string(200, 'a') + ".example";
  CHECK(answer(m, "http://" + host + "/", host) == "PROXY p:1");
  CHECK(answer(m, "http://x.localhost/", "x.localhost") == "DIRECT");
  const std::string as = std::string(14, 'a') + "b";
  CHECK(answer(m, "http://" + as + "/", as) == "DIRECT");
  CHECK(answer(m, "http://www.intra.example/", "www.intra.example") == "DIRECT");
  CHECK(answer(m, "http://www.inxra.example/", "www.inxra.example") == "DIRECT");
  CHECK(answer(m, "http://www.intro.example/", "www.intro.example") == "PROXY p:1");
  CHECK(answer(m, "http://www.intra.example.org/", "www.intra.example.org") == "PROXY p:1");
  // A byte outside printable ASCII cannot be in a host name: the pattern
  // matches nothing (it is not widened to a wildcard).
  ManualProxy u;
  u.http = "PROXY p:1";
  u.bypass.push_back({BypassRule::Kind::Glob, "*\xc3\xa4*"});
  CHECK(answer(u, "http://x.example/", "x.example") == "PROXY p:1");
}
