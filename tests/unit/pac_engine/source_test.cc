// PAC sources: a file and a URL kept fresh, the last good script kept when
// a refresh fails, and `system` from the environment.
#include "gateway/pac_engine/source.h"

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "tests/support/config_util.h"
#include "tests/support/origin.h"
#include "tests/support/temp_dir.h"
#include "tests/support/util.h"
#include "tests/unit/pac_engine/pac_test_util.h"

using namespace h2gate::pac;
using namespace h2gate::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

struct Owner {
  asio::io_context io;
  std::vector<std::shared_ptr<PacScript>> scripts;

  PacSource::OnScript collect() {
    return [this](std::shared_ptr<PacScript> s) { scripts.push_back(std::move(s)); };
  }
  template <typename Pred>
  bool runUntil(Pred done, std::chrono::milliseconds wait = 10s) {
    const auto until = Clock::now() + wait;
    while (!done() && Clock::now() < until) {
      if (io.stopped()) io.restart();
      io.run_for(5ms);
    }
    return done();
  }
  // Runs for `d` whatever happens.
  void runFor(std::chrono::milliseconds d) {
    runUntil([] { return false; }, d);
  }
};

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::string pac(const std::string& answer) {
  return "function FindProxyForURL(u, h) { return \"" + answer + "\"; }\n";
}

}  // namespace

TEST_CASE("pac source: a file, its changes, and the last good copy when it goes away",
          "[pac][source]") {
  TempDir dir("pac-source");
  const std::string path = dir.file("proxy.pac");
  writeFile(path, pac("PROXY a:1"));
  Owner owner;
  PacSourceConfig c;
  c.kind = PacSourceConfig::Kind::File;
  c.location = path;
  c.refresh_interval = 0ms;  // refreshed by hand below
  c.retry_interval = 60s;
  PacSource source(c, owner.io.get_executor(), owner.collect());
  source.start();
  REQUIRE(owner.runUntil([&] { return owner.scripts.size() == 1; }));
  CHECK(owner.scripts[0]->text == pac("PROXY a:1"));
  CHECK(owner.scripts[0]->origin == path);
  PacSourceStatus st = source.status();
  CHECK(st.have_script);
  CHECK(st.origin == path);
  CHECK(st.sha256 == owner.scripts[0]->sha256);
  CHECK(st.last_error.empty());

  // Unchanged: no new script (the cache stays).
  source.refreshNow();
  REQUIRE(owner.runUntil([&] { return source.status().attempts == 2; }));
  owner.runFor(50ms);
  CHECK(owner.scripts.size() == 1);

  writeFile(path, pac("PROXY b:2"));
  source.refreshNow();
  REQUIRE(owner.runUntil([&] { return owner.scripts.size() == 2; }));
  CHECK(owner.scripts[1]->text == pac("PROXY b:2"));

  // Gone: the last good script stays, the status says why.
  std::filesystem::remove(path);
  source.refreshNow();
  REQUIRE(owner.runUntil([&] { return source.status().attempts == 4; }));
  owner.runFor(50ms);
  st = source.status();
  CHECK(owner.scripts.size() == 2);
  CHECK(st.have_script);
  CHECK(st.sha256 == owner.scripts[1]->sha256);
  CHECK_THAT(st.last_error, Catch::StartsWith("cannot open " + path));
  CHECK(st.consecutive_failures == 1);

  writeFile(path, pac("PROXY b:2"));
  source.refreshNow();
  REQUIRE(owner.runUntil([&] { return source.status().attempts == 5; }));
  owner.runFor(50ms);
  st = source.status();
  CHECK(st.last_error.empty());
  CHECK(st.consecutive_failures == 0);
  CHECK(owner.scripts.size() == 2);  // same text as before it went away
}

TEST_CASE("pac source: refresh_interval picks up changes by itself; max_size bounds a file",
          "[pac][source]") {
  TempDir dir("pac-source");
  const std::string path = dir.file("proxy.pac");
  writeFile(path, pac("PROXY a:1"));
  Owner owner;
  PacSourceConfig c;
  c.kind = PacSourceConfig::Kind::File;
  c.location = path;
  c.refresh_interval = 200ms;
  c.fetch.max_bytes = 4096;
  PacSource source(c, owner.io.get_executor(), owner.collect());
  source.start();
  REQUIRE(owner.runUntil([&] { return owner.scripts.size() == 1; }));
  writeFile(path, pac("PROXY c:3"));
  REQUIRE(owner.runUntil([&] { return owner.scripts.size() == 2; }, 3s));
  CHECK(owner.scripts[1]->text == pac("PROXY c:3"));

  writeFile(path, pac("PROXY c:3") + std::string(5000, ' '));
  REQUIRE(owner.runUntil([&] { return !source.status().last_error.empty(); }, 3s));
  CHECK(source.status().last_error == path + " is larger than 4096 bytes (max_size)");
  CHECK(owner.scripts.size() == 2);
}

TEST_CASE("pac source: a URL from nginx, kept when nginx goes away", "[pac][source]") {
  auto nginx = std::make_unique<Nginx>([] {
    Nginx::Options o;
    o.with_sink = false;
    o.extra_server_config =
        "    location = /proxy.pac { return 200 'function FindProxyForURL(u, h) { return "
        "\"PROXY from-nginx:3128\"; }'; }\n";
    return o;
  }());
  Owner owner;
  PacSourceConfig c;
  c.kind = PacSourceConfig::Kind::Url;
  c.location = nginx->httpUrl("/proxy.pac");
  c.refresh_interval = 0ms;
  c.fetch.timeout = 2s;
  PacSource source(c, owner.io.get_executor(), owner.collect());
  source.start();
  REQUIRE(owner.runUntil([&] { return owner.scripts.size() == 1; }));
  CHECK_THAT(owner.scripts[0]->text, Catch::Contains("PROXY from-nginx:3128"));
  CHECK(owner.scripts[0]->origin == c.location);

  nginx.reset();
  source.refreshNow();
  REQUIRE(owner.runUntil([&] { return source.status().attempts == 2; }));
  REQUIRE(owner.runUntil([&] { return !source.status().last_error.empty(); }));
  const PacSourceStatus st = source.status();
  CHECK_THAT(st.last_error, Catch::EndsWith(": cannot connect: Connection refused"));
  CHECK(st.have_script);
  CHECK(owner.scripts.size() == 1);
}

TEST_CASE("pac source: a URL whose server accepts and never answers", "[pac][source]") {
  h2gate::pac::test::MuteServer hang(true);
  Owner owner;
  PacSourceConfig c;
  c.kind = PacSourceConfig::Kind::Url;
  c.location = "http://127.0.0.1:" + std::to_string(hang.port()) + "/proxy.pac";
  c.fetch.timeout = 300ms;
  c.retry_interval = 1s;
  PacSource source(c, owner.io.get_executor(), owner.collect());
  const auto start = Clock::now();
  source.start();
  REQUIRE(owner.runUntil([&] { return source.status().failures >= 2; }, 10s));
  CHECK(Clock::now() - start >= 1200ms);  // the first timeout, then the retry's
  const PacSourceStatus st = source.status();
  CHECK(st.last_error ==
        "127.0.0.1:" + std::to_string(hang.port()) + ": no complete answer within 300 ms");
  CHECK_FALSE(st.have_script);
  CHECK(owner.scripts.empty());
  CHECK(hang.accepted() >= 2);
}

TEST_CASE("pac source: system from the environment becomes a PAC file", "[pac][source]") {
  // No desktop setting (gsettings' memory backend holds the defaults: mode
  // none), so the environment decides.
  h2gate::testing::ScopedEnv backend("GSETTINGS_BACKEND", "memory");
  h2gate::testing::ScopedEnv http("http_proxy", "http://env-proxy.corp:3128");
  h2gate::testing::ScopedEnv https("https_proxy", std::nullopt);
  h2gate::testing::ScopedEnv https_upper("HTTPS_PROXY", std::nullopt);
  h2gate::testing::ScopedEnv all("all_proxy", std::nullopt);
  h2gate::testing::ScopedEnv all_upper("ALL_PROXY", std::nullopt);
  h2gate::testing::ScopedEnv no("no_proxy", ".corp");
  Owner owner;
  PacSourceConfig c;
  c.kind = PacSourceConfig::Kind::System;
  c.refresh_interval = 0ms;
  PacSource source(c, owner.io.get_executor(), owner.collect());
  source.start();
  REQUIRE(owner.runUntil([&] { return owner.scripts.size() == 1; }));
  CHECK(owner.scripts[0]->origin == "system: environment: manual settings");

  PacEnvironment env;
  env.resolver = std::make_shared<SystemResolver>();
  PacContext ctx(env);
  REQUIRE(ctx.load(owner.scripts[0]->text, "system", Clock::now() + 5s).ok());
  CHECK(ctx.findProxy("http://www.example.com/", "www.example.com", Clock::now() + 5s).text ==
        "PROXY env-proxy.corp:3128");
  CHECK(ctx.findProxy("https://www.example.com/", "www.example.com", Clock::now() + 5s).text ==
        "DIRECT");  // no https_proxy: curl goes direct
  CHECK(ctx.findProxy("http://wiki.corp/", "wiki.corp", Clock::now() + 5s).text == "DIRECT");
}

TEST_CASE("pac source: system from GNOME's settings (gsettings, keyfile backend)",
          "[pac][source][gsettings]") {
  if (runCommand({"gsettings", "--version"}).exit_code != 0)
    FAIL("gsettings not installed: run deploy/install-deps.sh --test");
  TempDir home("pac-gsettings");
  h2gate::testing::ScopedEnv backend("GSETTINGS_BACKEND", "keyfile");
  h2gate::testing::ScopedEnv config("XDG_CONFIG_HOME", home.path().string());
  h2gate::testing::ScopedEnv http("http_proxy", "http://env-proxy.corp:3128");  // GNOME wins
  auto set = [](const std::string& schema, const std::string& key, const std::string& value) {
    const CommandResult r = runCommand({"gsettings", "set", schema, key, value});
    INFO("gsettings set " << schema << " " << key << " " << value << ": " << r.err);
    REQUIRE(r.exit_code == 0);
  };
  set("org.gnome.system.proxy", "mode", "manual");
  set("org.gnome.system.proxy.http", "host", "gnome-proxy.corp");
  set("org.gnome.system.proxy.http", "port", "8080");
  set("org.gnome.system.proxy", "ignore-hosts", "['localhost', '*.intra.corp', '10.0.0.0/8']");
  // The fixture: another gsettings process reads back what was stored.
  REQUIRE(runCommand({"gsettings", "get", "org.gnome.system.proxy.http", "host"}).out ==
          "'gnome-proxy.corp'\n");

  Owner owner;
  PacSourceConfig c;
  c.kind = PacSourceConfig::Kind::System;
  c.refresh_interval = 0ms;
  auto source = std::make_unique<PacSource>(c, owner.io.get_executor(), owner.collect());
  source->start();
  REQUIRE(owner.runUntil([&] { return owner.scripts.size() == 1; }));
  CHECK(owner.scripts[0]->origin == "system: GNOME (org.gnome.system.proxy): manual settings");
  PacEnvironment env;
  env.resolver = std::make_shared<SystemResolver>();
  {
    PacContext ctx(env);
    REQUIRE(ctx.load(owner.scripts[0]->text, "system", Clock::now() + 5s).ok());
    auto ask = [&](const std::string& url, const std::string& host) {
      return ctx.findProxy(url, host, Clock::now() + 5s).text;
    };
    CHECK(ask("http://www.example.com/", "www.example.com") == "PROXY gnome-proxy.corp:8080");
    CHECK(ask("https://www.example.com/", "www.example.com") == "DIRECT");  // no https proxy set
    CHECK(ask("http://wiki.intra.corp/", "wiki.intra.corp") == "DIRECT");
    CHECK(ask("http://10.9.8.7/", "10.9.8.7") == "DIRECT");
    CHECK(ask("http://localhost/", "localhost") == "DIRECT");
  }

  // mode auto with a URL: the file is fetched from there.
  Nginx nginx([] {
    Nginx::Options o;
    o.with_sink = false;
    o.extra_server_config =
        "    location = /gnome.pac { return 200 'function FindProxyForURL(u, h) { return "
        "\"PROXY from-gnome-url:3128\"; }'; }\n";
    return o;
  }());
  set("org.gnome.system.proxy", "autoconfig-url", nginx.httpUrl("/gnome.pac"));
  set("org.gnome.system.proxy", "mode", "auto");
  source->refreshNow();
  REQUIRE(owner.runUntil([&] { return owner.scripts.size() == 2; }));
  CHECK(owner.scripts[1]->origin ==
        "system: GNOME (org.gnome.system.proxy): " + nginx.httpUrl("/gnome.pac"));
  CHECK_THAT(owner.scripts[1]->text, Catch::Contains("PROXY from-gnome-url:3128"));

  // mode none: the environment decides.
  set("org.gnome.system.proxy", "mode", "none");
  source->refreshNow();
  REQUIRE(owner.runUntil([&] { return owner.scripts.size() == 3; }));
  CHECK(owner.scripts[2]->origin == "system: environment: manual settings");
  CHECK_THAT(owner.scripts[2]->text, Catch::Contains("PROXY env-proxy.corp:3128"));
}
