// Real clients through h2gate, each configured the way its users configure
// it: app -> h2gate -> nghttpx (h2) -> squid -> nginx. The origin is
// addressed as origin.test, a name only squid resolves (its hosts_file), so
// a client that skipped the proxy (Go never proxies loopback addresses)
// fails instead of passing by accident. Every client downloads 1 MiB over
// HTTPS (CONNECT) and plain HTTP (absolute-form) byte-identical and, where it
// can, uploads 1 MiB that the origin's sink hashes. [clients]
//
// The client programs are in tests/clients/; deploy/install-deps.sh --test
// installs the tools (wget, git, python3-requests, python3-httpx, golang-go,
// nodejs, undici from npm in /opt/h2gate-test/node).
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/clients_env.h"
#include "tests/support/scrape.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

const std::string kNodeModules = "/opt/h2gate-test/node/node_modules";
// Debian's interpreter, where python3-requests / python3-httpx live (a
// pyenv or venv python3 earlier in PATH may lack them).
const std::string kPython = "/usr/bin/python3";

}  // namespace

TEST_CASE("clients: curl 7.88 and curl 8 with -x and with HTTPS_PROXY", "[clients]") {
  ClientsEnv env;
  std::vector<std::pair<std::string, std::string>> curls{{"curl7", "curl"}};
  const std::string curl8 = "/opt/h2gate-test/curl8/curl";
  if (std::filesystem::exists(curl8))
    curls.emplace_back("curl8", curl8);
  else
    WARN("curl 8 not installed in /opt/h2gate-test/curl8: run deploy/install-deps.sh --test");
  for (const auto& [name, bin] : curls) {
    INFO(name);
    // -x on the command line.
    env.check(
        name + "x",
        [&](const std::string& url, const std::string& file) {
          return env.run({}, {bin, "-q", "-sS", "-f", "-x", env.proxy(), "--cacert",
                              env.ca.caCertPath(), "-o", file, url});
        },
        [&](const std::string& url, const std::string& file) {
          return env.run({}, {bin, "-q", "-sS", "-f", "-x", env.proxy(), "--cacert",
                              env.ca.caCertPath(), "-T", file, url});
        });
    // The environment: curl reads https_proxy / HTTPS_PROXY and http_proxy
    // (lower case only: it ignores HTTP_PROXY, a CGI hazard).
    env.check(
        name + "env",
        [&](const std::string& url, const std::string& file) {
          return env.run(
              {"HTTPS_PROXY=" + env.proxy(), "http_proxy=" + env.proxy()},
              {bin, "-q", "-sS", "-f", "--cacert", env.ca.caCertPath(), "-o", file, url});
        },
        [&](const std::string& url, const std::string& file) {
          return env.run({"HTTPS_PROXY=" + env.proxy()}, {bin, "-q", "-sS", "-f", "--cacert",
                                                          env.ca.caCertPath(), "-T", file, url});
        });
  }
}

TEST_CASE("clients: wget with https_proxy/http_proxy", "[clients]") {
  if (!haveProgram("wget")) FAIL("wget not installed: run deploy/install-deps.sh --test");
  ClientsEnv env;
  // wget reads the lower-case variables; use_proxy is on by default (-e makes
  // it explicit, as a wgetrc would).
  const std::vector<std::string> vars{"https_proxy=" + env.proxy(), "http_proxy=" + env.proxy()};
  env.check(
      "wget",
      [&](const std::string& url, const std::string& file) {
        return env.run(vars, {"wget", "-q", "-e", "use_proxy=on", "--ca-certificate",
                              env.ca.caCertPath(), "-O", file, url});
      },
      [&](const std::string& url, const std::string& file) {
        return env.run(vars,
                       {"wget", "-q", "-e", "use_proxy=on", "--ca-certificate", env.ca.caCertPath(),
                        "--method=PUT", "--body-file=" + file, "-O", "-", url});
      });
}

TEST_CASE("clients: Python requests and httpx with HTTPS_PROXY", "[clients]") {
  ClientsEnv env;
  const std::string script = kClientsDir + "/python_client.py";
  for (const std::string lib : {"requests", "httpx"}) {
    INFO(lib);
    if (runCommand({kPython, "-c", "import " + lib}).exit_code != 0)
      FAIL("python3-" + lib + " not installed: run deploy/install-deps.sh --test");
    const std::vector<std::string> vars{"HTTPS_PROXY=" + env.proxy(), "HTTP_PROXY=" + env.proxy()};
    env.check(
        lib,
        [&](const std::string& url, const std::string& file) {
          return env.run(vars, {kPython, script, lib, "get", url, file, env.ca.caCertPath()});
        },
        [&](const std::string& url, const std::string& file) {
          return env.run(vars, {kPython, script, lib, "put", url, file, env.ca.caCertPath()});
        });
  }
}

TEST_CASE("clients: Go net/http with HTTPS_PROXY", "[clients]") {
  if (!haveProgram("go")) FAIL("go not installed: run deploy/install-deps.sh --test");
  ClientsEnv env;
  // Built from source at test time. The first build compiles the standard
  // library's net/http and crypto/tls into Go's build cache: minutes on a
  // loaded 2-core machine (180 s ran out at load 15), so the cache is kept in
  // the build tree, beside this program, for the next run and the ASan stage
  // (Go's cache is safe for concurrent builds).
  const std::string bin = env.work.path().string() + "/go-client";
  const std::string cache =
      (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "test-cache/go").string();
  auto built =
      env.run({"GOCACHE=" + cache + "/build", "GOPATH=" + cache + "/path", "GOTOOLCHAIN=local",
               "CGO_ENABLED=0"},
              {"go", "build", "-o", bin, kClientsDir + "/go/main.go"}, milliseconds(600000));
  REQUIRE(built.exit_code == 0);
  const std::vector<std::string> vars{"HTTPS_PROXY=" + env.proxy(), "HTTP_PROXY=" + env.proxy()};
  env.check(
      "golang",
      [&](const std::string& url, const std::string& file) {
        return env.run(vars, {bin, "get", url, file, env.ca.caCertPath()});
      },
      [&](const std::string& url, const std::string& file) {
        return env.run(vars, {bin, "put", url, file, env.ca.caCertPath()});
      });
  // Go never proxies loopback destinations: with the origin's IP address the
  // request bypasses h2gate (documented in tests/clients/README.md). Nothing new reaches
  // the proxy for it.
  const size_t before = env.nghttpx.accessLines().size();
  auto direct =
      env.run(vars, {bin, "get", "http://127.0.0.1:" + str(env.nginx.httpPort()) + "/1m?loopback",
                     env.out.file("loopback"), env.ca.caCertPath()});
  CHECK(direct.exit_code == 0);
  CHECK(env.nghttpx.accessLines().size() == before);
}

TEST_CASE("clients: Node.js undici ProxyAgent", "[clients]") {
  if (!haveProgram("node")) FAIL("node not installed: run deploy/install-deps.sh --test");
  if (!std::filesystem::exists(kNodeModules + "/undici"))
    FAIL("undici not installed in " + kNodeModules + ": run deploy/install-deps.sh --test");
  ClientsEnv env;
  const std::string script = kClientsDir + "/node/client.js";
  const std::vector<std::string> vars{"NODE_PATH=" + kNodeModules};
  env.check(
      "undici",
      [&](const std::string& url, const std::string& file) {
        return env.run(vars, {"node", script, "get", url, file, env.ca.caCertPath(), env.proxy()});
      },
      [&](const std::string& url, const std::string& file) {
        return env.run(vars, {"node", script, "put", url, file, env.ca.caCertPath(), env.proxy()});
      });
}

TEST_CASE("clients: git clone over HTTPS with http.proxy", "[clients]") {
  if (!haveProgram("git")) FAIL("git not installed: run deploy/install-deps.sh --test");
  ClientsEnv env;
  // A repository with one commit, published for git's dumb HTTP protocol
  // (nginx serves its files) as <work>/git/repo.git.
  const std::string src = env.work.path().string() + "/src";
  const std::string bare = env.work.path().string() + "/git/repo.git";
  const std::vector<std::string> id{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.test",
                                    "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.test",
                                    "HOME=" + env.work.path().string()};
  std::filesystem::create_directories(src);
  std::filesystem::copy_file(env.upload, src + "/blob.bin");
  REQUIRE(env.run(id, {"git", "-C", src, "init", "-q", "-b", "main"}).exit_code == 0);
  REQUIRE(env.run(id, {"git", "-C", src, "add", "blob.bin"}).exit_code == 0);
  REQUIRE(env.run(id, {"git", "-C", src, "commit", "-q", "-m", "one"}).exit_code == 0);
  REQUIRE(env.run(id, {"git", "clone", "-q", "--bare", src, bare}).exit_code == 0);
  REQUIRE(env.run(id, {"git", "-C", bare, "update-server-info"}).exit_code == 0);

  const std::string clone = env.out.file("clone");
  // The proxy as git's own config (http.proxy, as `git config --global` sets
  // it); the origin's CA through GIT_SSL_CAINFO: Debian's git 2.39 (GnuTLS)
  // ignored `-c http.sslCAInfo=` in our runs, with or without a proxy.
  std::vector<std::string> git_env = id;
  git_env.push_back("GIT_SSL_CAINFO=" + env.ca.caCertPath());
  auto r = env.run(git_env, {"git", "-c", "http.proxy=" + env.proxy(), "clone", "-q",
                             env.httpsUrl("/git/repo.git"), clone});
  CHECK(r.exit_code == 0);
  CHECK(sha256File(clone + "/blob.bin") == env.upload_sha);
  auto ls = env.run(git_env, {"git", "-c", "http.proxy=" + env.proxy(), "ls-remote",
                              env.httpsUrl("/git/repo.git")});
  CHECK(ls.exit_code == 0);
  CHECK(ls.out.find("refs/heads/main") != std::string::npos);
  // Both went through h2gate and the h2 proxy (which logs a tunnel when it ends).
  CHECK(env.nghttpx.waitForAccessLines(2, "CONNECT", milliseconds(5000)).size() >= 2);
}

TEST_CASE("clients: Java HttpClient with https.proxyHost/http.proxyHost", "[clients]") {
  if (!haveProgram("java") || !haveProgram("keytool"))
    FAIL("java not installed: run deploy/install-deps.sh --test");
  ClientsEnv env;
  // The origin's CA as a PKCS#12 trust store.
  const std::string store = env.work.path().string() + "/trust.p12";
  REQUIRE(env.run({}, {"keytool", "-importcert", "-noprompt", "-alias", "h2gate-test", "-file",
                       env.ca.caCertPath(), "-keystore", store, "-storetype", "PKCS12",
                       "-storepass", "changeit"})
              .exit_code == 0);
  const std::string port = str(env.gate->port());
  const std::vector<std::string> java{"java",
                                      "-Dhttps.proxyHost=127.0.0.1",
                                      "-Dhttps.proxyPort=" + port,
                                      "-Dhttp.proxyHost=127.0.0.1",
                                      "-Dhttp.proxyPort=" + port,
                                      "-Djavax.net.ssl.trustStore=" + store,
                                      "-Djavax.net.ssl.trustStorePassword=changeit",
                                      kClientsDir + "/java/Client.java"};
  auto cmd = [&](const std::string& op, const std::string& url, const std::string& file) {
    std::vector<std::string> argv = java;
    argv.insert(argv.end(), {op, url, file});
    return env.run({}, argv, milliseconds(120000));
  };
  env.check(
      "java",
      [&](const std::string& url, const std::string& file) { return cmd("get", url, file); },
      [&](const std::string& url, const std::string& file) { return cmd("put", url, file); });
}

namespace {

// Headless Chromium, pointed at h2gate by `proxy_flag`, renders
// https://origin.test/web/index.html (a page with a stylesheet, a script
// and two images) and takes a screenshot; checks it all came through the
// h2 proxy.
void renderThroughGate(ClientsEnv& env, const std::string& proxy_flag) {
  // index.html pulls a stylesheet, a script and two images; the script
  // writes what arrived into the title once the page has loaded.
  const std::string web = env.work.path().string() + "/web";
  std::filesystem::create_directories(web);
  writeFile(web + "/index.html",
            "<!doctype html><html><head><title>loading</title>"
            "<link rel=stylesheet href=style.css></head><body>"
            "<h1 id=h>h2gate</h1><img id=a src=a.png><img id=b src=b.png>"
            "<script src=app.js></script></body></html>\n");
  writeFile(web + "/style.css", "h1 { color: rgb(0, 128, 0); }\n");
  writeFile(web + "/app.js",
            "window.addEventListener('load', () => {\n"
            "  const imgs = [...document.images].filter(i => i.complete && i.naturalWidth > 0);\n"
            "  const css = getComputedStyle(document.getElementById('h')).color;\n"
            "  document.title = 'rendered ' + imgs.length + ' images, css ' + css;\n"
            "});\n");
  for (const char* img : {"a.png", "b.png"}) {
    // A 1x1 PNG.
    REQUIRE(
        runCommand({"sh", "-c",
                    "echo iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGA"
                    "hKmMIQAAAABJRU5ErkJggg== | base64 -d > " +
                        web + "/" + img})
            .exit_code == 0);
  }
  // Chromium keeps its own trust store; the origin's certificate is accepted
  // by its key (SHA-256 of the SubjectPublicKeyInfo), nothing else is.
  std::string leaf;
  for (const auto& f : std::filesystem::directory_iterator(env.work.path())) {
    const std::string name = f.path().filename().string();
    if (name.rfind("nginx-", 0) == 0 && name.ends_with(".pem") && !name.ends_with("-chain.pem"))
      leaf = f.path().string();
  }
  REQUIRE(!leaf.empty());
  auto spki = runCommand({"sh", "-c",
                          "openssl x509 -in " + leaf +
                              " -pubkey -noout | openssl pkey -pubin -outform der | "
                              "openssl dgst -sha256 -binary | base64"});
  REQUIRE(spki.exit_code == 0);
  std::string hash = spki.out;
  while (!hash.empty() && (hash.back() == '\n' || hash.back() == '\r')) hash.pop_back();

  const std::string profile = env.work.path().string() + "/chromium-profile";
  const std::vector<std::string> chromium{"chromium",
                                          "--headless",
                                          "--no-sandbox",
                                          "--disable-gpu",
                                          "--disable-quic",
                                          "--no-first-run",
                                          "--disable-background-networking",
                                          "--disable-component-update",
                                          "--disable-sync",
                                          "--user-data-dir=" + profile,
                                          proxy_flag,
                                          "--ignore-certificate-errors-spki-list=" + hash,
                                          "--virtual-time-budget=5000",
                                          "--window-size=800,600"};
  const std::string url = env.httpsUrl("/web/index.html");
  std::vector<std::string> dump = chromium;
  dump.insert(dump.end(), {"--dump-dom", url});
  auto r = env.run({"HOME=" + env.work.path().string()}, dump, milliseconds(120000));
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("<title>rendered 2 images, css rgb(0, 128, 0)</title>") != std::string::npos);

  const std::string shot = env.out.file("page.png");
  std::vector<std::string> screenshot = chromium;
  screenshot.insert(screenshot.end(), {"--screenshot=" + shot, url});
  auto s = env.run({"HOME=" + env.work.path().string()}, screenshot, milliseconds(120000));
  CHECK(s.exit_code == 0);
  CHECK(std::filesystem::exists(shot));
  CHECK((std::filesystem::exists(shot) && std::filesystem::file_size(shot) > 1000));
  // The page and its sub-resources came through h2gate and the h2 proxy.
  CHECK(!env.nghttpx.waitForAccessLines(1, "CONNECT", milliseconds(5000)).empty());
  CHECK(env.nginx.waitForAccessCount("/web/a.png", 1) >= 1);
}

}  // namespace

TEST_CASE("clients: headless Chromium with --proxy-server renders an HTTPS page", "[clients]") {
  if (!haveProgram("chromium")) FAIL("chromium not installed: run deploy/install-deps.sh --test");
  ClientsEnv env;
  renderThroughGate(env, "--proxy-server=http://127.0.0.1:" + str(env.gate->port()));
}

TEST_CASE("clients: headless Chromium with --proxy-pac-url (h2gate's PAC) renders an HTTPS page",
          "[clients][pac]") {
  if (!haveProgram("chromium")) FAIL("chromium not installed: run deploy/install-deps.sh --test");
  ClientsEnv env;
  // The PAC file from the admin listener (tests/clients/README.md's snippet): every
  // request goes to PROXY 127.0.0.1:<listener>.
  const std::string pac = "http://127.0.0.1:" + str(env.gate->adminPort()) + "/proxy.pac";
  REQUIRE(adminGet(env.gate->adminPort(), "/proxy.pac")
              .body.find("PROXY 127.0.0.1:" + str(env.gate->port())) != std::string::npos);
  renderThroughGate(env, "--proxy-pac-url=" + pac);
}

TEST_CASE("clients: pip with the proxy in its config (PIP_PROXY = global.proxy)", "[clients]") {
  if (runCommand({kPython, "-m", "pip", "--version"}).exit_code != 0)
    FAIL("pip not installed for " + kPython + ": run deploy/install-deps.sh --test");
  ClientsEnv env;
  // A wheel of one module, and a PEP 503 index page that links it.
  const std::string pypi = env.work.path().string() + "/pypi";
  const std::string wheel_name = "h2gate_probe-1.0-py3-none-any.whl";
  std::filesystem::create_directories(pypi + "/simple/h2gate-probe");
  REQUIRE(runCommand({kPython, "-c",
                      "import sys, zipfile\n"
                      "d = 'h2gate_probe-1.0.dist-info/'\n"
                      "with zipfile.ZipFile(sys.argv[1], 'w') as z:\n"
                      "  z.writestr('h2gate_probe.py', 'VALUE = 42\\n')\n"
                      "  z.writestr(d + 'METADATA', 'Metadata-Version: 2.1\\nName: h2gate-probe\\n"
                      "Version: 1.0\\n')\n"
                      "  z.writestr(d + 'WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\n"
                      "Root-Is-Purelib: true\\nTag: py3-none-any\\n')\n"
                      "  z.writestr(d + 'RECORD', '')\n",
                      pypi + "/simple/h2gate-probe/" + wheel_name})
              .exit_code == 0);
  const std::string wheel_sha = sha256File(pypi + "/simple/h2gate-probe/" + wheel_name);
  writeFile(pypi + "/simple/h2gate-probe/index.html",
            "<!doctype html><html><body><a href=\"" + wheel_name + "#sha256=" + wheel_sha + "\">" +
                wheel_name + "</a></body></html>\n");
  // `pip config set global.proxy URL` and PIP_PROXY are the same setting;
  // the variable keeps the test out of the user's pip.conf.
  const std::string dest = env.out.file("pip");
  // The machine's own pip and requests settings (a CA bundle that overrides
  // --cert, find-links) stay out: only the proxy setting under test counts.
  auto r = env.run(
      {"-u", "REQUESTS_CA_BUNDLE", "-u", "CURL_CA_BUNDLE", "-u", "PIP_CERT", "-u", "PIP_FIND_LINKS",
       "-u", "PIP_INDEX_URL", "PIP_PROXY=" + env.proxy(), "PIP_CONFIG_FILE=/dev/null",
       "PIP_DISABLE_PIP_VERSION_CHECK=1", "HOME=" + env.work.path().string()},
      {kPython, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--cert",
       env.ca.caCertPath(), "--index-url", env.httpsUrl("/pypi/simple/"), "-d", dest,
       "h2gate-probe"});
  CHECK(r.exit_code == 0);
  CHECK(sha256File(dest + "/" + wheel_name) == wheel_sha);
  CHECK(env.nghttpx.waitForAccessLines(1, "CONNECT", milliseconds(5000)).size() >= 1);
}

TEST_CASE("clients: npm with proxy / https-proxy config", "[clients]") {
  if (!haveProgram("npm")) FAIL("npm not installed: run deploy/install-deps.sh --test");
  ClientsEnv env;
  // A package tarball made by npm pack, and the registry document that
  // points at it (what `npm view` / `npm pack NAME` fetch).
  const std::string npm = env.work.path().string() + "/npm";
  const std::string pkg = env.work.path().string() + "/pkg";
  std::filesystem::create_directories(npm);
  std::filesystem::create_directories(pkg);
  writeFile(pkg + "/package.json", "{\"name\": \"h2gate-probe\", \"version\": \"1.0.0\"}\n");
  writeFile(pkg + "/index.js", "module.exports = 42;\n");
  const std::vector<std::string> npm_env{
      "HOME=" + env.work.path().string(),
      "npm_config_cache=" + env.work.path().string() + "/npm-cache",
      "npm_config_update_notifier=false"};
  auto packed = env.run(npm_env, {"npm", "pack", "--json", "--pack-destination", npm, pkg});
  REQUIRE(packed.exit_code == 0);
  auto field = [&](const std::string& name) {
    const std::string key = "\"" + name + "\": \"";
    const size_t at = packed.out.find(key);
    if (at == std::string::npos) return std::string();
    const size_t start = at + key.size();
    return packed.out.substr(start, packed.out.find('"', start) - start);
  };
  const std::string integrity = field("integrity"), shasum = field("shasum");
  REQUIRE(!integrity.empty());
  const std::string tarball = env.httpsUrl("/npm/h2gate-probe-1.0.0.tgz");
  writeFile(npm + "/h2gate-probe",
            "{\"name\": \"h2gate-probe\", \"dist-tags\": {\"latest\": \"1.0.0\"}, "
            "\"versions\": {\"1.0.0\": {\"name\": \"h2gate-probe\", \"version\": \"1.0.0\", "
            "\"dist\": {\"tarball\": \"" +
                tarball + "\", \"shasum\": \"" + shasum + "\", \"integrity\": \"" + integrity +
                "\"}}}}\n");
  // `npm config set proxy URL` / `https-proxy URL` write these keys to .npmrc.
  writeFile(env.work.path().string() + "/.npmrc",
            "proxy=" + env.proxy() + "\nhttps-proxy=" + env.proxy() +
                "\ncafile=" + env.ca.caCertPath() + "\nregistry=" + env.httpsUrl("/npm/") + "\n");
  const std::string dest = env.out.file("npm");
  std::filesystem::create_directories(dest);
  auto r = env.run(npm_env, {"npm", "pack", "h2gate-probe", "--pack-destination", dest});
  CHECK(r.exit_code == 0);
  CHECK(sha256File(dest + "/h2gate-probe-1.0.0.tgz") ==
        sha256File(npm + "/h2gate-probe-1.0.0.tgz"));
  CHECK(env.nghttpx.waitForAccessLines(1, "CONNECT", milliseconds(5000)).size() >= 1);
}
