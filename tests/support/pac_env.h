// Routing by a PAC file in integration tests: nginx serves the PAC files
// from a work directory (and the test files, as the origin), h2gate runs
// with listeners whose forward_proxy has one `pac:` route, curl goes
// through it (tests/support/listeners_env.h). Header-only: it uses
// H2GATE_BINARY, which only the integration test binary defines. Used by
// tests/integration/pac_*_test.cc.
//
// Names: `hosts` lines go to h2gate alone (its own /etc/hosts in a mount
// namespace, as in routing_test.cc), e.g. "127.0.0.1 web.internal.test";
// origin.test and files.a.test resolve only for the squids made with
// squidOptions(), so what reached nginx under those names went through a
// proxy.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/h2_env.h"
#include "tests/support/listeners_env.h"

namespace h2gate::test {

struct PacEnv {
  // `tweak` may change nginx's options (e.g. a fixed port in a namespace).
  explicit PacEnv(const std::function<void(Nginx::Options&)>& tweak = {})
      : nginx(nginxOptions(tweak)) {
    testFile("1m");
    testFile("10m");
  }

  Nginx::Options nginxOptions(const std::function<void(Nginx::Options&)>& tweak) {
    Nginx::Options n;
    n.ca = &ca;
    n.dns_names = {"origin.test", "web.internal.test", "files.a.test"};
    // The PAC files, served from the work directory; /wpad.dat is
    // pac/wpad.dat, under any Host (WPAD asks http://wpad.<domain>/wpad.dat).
    n.extra_server_config = "    location /pac/ { alias " + work.path().string() +
                            "/pac/; default_type application/x-ns-proxy-autoconfig; }\n"
                            "    location = /wpad.dat { alias " +
                            work.path().string() +
                            "/pac/wpad.dat; default_type application/x-ns-proxy-autoconfig; }\n";
    if (tweak) tweak(n);
    return n;
  }
  static Squid::Options squidOptions() {
    Squid::Options s;
    s.hosts = {"origin.test", "files.a.test"};
    return s;
  }

  std::string writePac(const std::string& name, const std::string& text) {
    std::filesystem::create_directories(work.path() / "pac");
    return work.write("pac/" + name, text);
  }
  std::string pacUrl(const std::string& name) const {
    return "http://127.0.0.1:" + str(nginx.httpPort()) + "/pac/" + name;
  }

  // A listener on 127.0.0.1:0 whose forward_proxy has one pac route;
  // `pac_block` is the route's pac: body, indented 14.
  static std::string listener(const std::string& name, const std::string& pac_block) {
    return listenerYaml(name,
                        "      - name: h2gate.filters.forward_proxy\n"
                        "        typed_config:\n"
                        "          routes:\n"
                        "          - match: {}\n"
                        "            pac:\n" +
                            pac_block);
  }

  // The whole config: admin on `admin_address`:0 and `listeners`.
  static std::string yaml(const std::string& listeners,
                          const std::string& admin_address = "127.0.0.1") {
    return gateYaml(listeners, admin_address);
  }

  // Starts h2gate (debug log) with `hosts` as its /etc/hosts; `tweak` may
  // change the options (environment, resolv.conf, admin address) first.
  H2gate& start(const std::string& listeners, const std::vector<std::string>& names,
                const std::function<void(H2gate::Options&)>& tweak = {},
                const std::string& hosts = "127.0.0.1 web.internal.test\n") {
    H2gate::Options o = listenersOptions(yaml(listeners), names, hosts);
    if (tweak) tweak(o);
    gate = std::make_unique<H2gate>(std::move(o));
    return *gate;
  }

  CommandResult curl(const std::string& listener, const std::vector<std::string>& args) {
    return curlThrough(*gate, listener, ca, args);
  }
  // A 1 MiB download: true when 200 and byte-identical.
  bool fetch(const std::string& listener, const std::string& url, const std::string& name) {
    return fetch1m(*gate, listener, ca, url, out.file(name));
  }
  std::string url(const std::string& host, bool tls, const std::string& path) const {
    return nginxUrl(nginx, host, tls, path);
  }

  TempDir work{"pacroute"};
  TestCA ca{work.path().string()};
  Nginx nginx;
  TempDir out{"out"};
  std::unique_ptr<H2gate> gate;  // stops first
};

}  // namespace h2gate::test
