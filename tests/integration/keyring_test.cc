// Proxy credentials in the system's keyring (gateway/base/keyring_posix.cc)
// with a real Secret Service (tests/support/secret_service.h):
// gnome-keyring-daemon on a private D-Bus session bus, its login keyring
// created and unlocked with a password the test gives on standard input.
// secret-tool (libsecret-tools), an independent client, proves the fixture
// and reads what h2gate wrote.
//
// Then: h2gate credentials set/show/delete; h2gate sending the keyring's
// password as Basic to a squid that checks it (config `credentials:
// {keyring: NAME}`, --upstream and --pac with --proxy-credentials); and the
// failures a user meets, each a clear message within keyring::kTimeout: a
// locked keyring (no desktop for its unlock prompt), a Secret Service that
// does not answer (its daemon stopped), no session bus at all.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <chrono>
#include <csignal>
#include <string>
#include <vector>

#include "tests/support/h2gate.h"
#include "tests/support/origin.h"
#include "tests/support/process.h"
#include "tests/support/scrape.h"
#include "tests/support/secret_service.h"
#include "tests/support/temp_dir.h"
#include "tests/support/upstream_proxies.h"
#include "tests/support/util.h"

using namespace h2gate::test;
using std::chrono::milliseconds;

namespace {

using Env = SecretService::Env;
using Run = SecretService::Run;

// The bound of every keyring operation (gateway/base/keyring.h kTimeout).
constexpr auto kBound = std::chrono::seconds(10);
const std::string kProxyPassword = "kr-Proxy-pw-7";

std::string num(uint64_t n) {
  return std::to_string(n);
}

// A config whose one listener goes through cluster "corp" (squid on
// `port`), Basic with `credentials` (a flow mapping).
std::string clusterConfig(uint16_t port, const std::string& credentials) {
  return "admin:\n"
         "  address: {socket_address: {address: 127.0.0.1, port_value: 0}}\n"
         "static_resources:\n"
         "  listeners:\n" +
         listenerYaml("local_proxy",
                      "      - name: h2gate.filters.forward_proxy\n"
                      "        typed_config: {cluster: corp}\n") +
         "  clusters:\n"
         "  - name: corp\n"
         "    load_assignment:\n"
         "      endpoints:\n"
         "      - lb_endpoints:\n"
         "        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: " +
         num(port) +
         "}}}\n"
         "    proxy_authentication:\n"
         "      scheme: basic\n"
         "      credentials: " +
         credentials + "\n";
}

std::string statusThrough(const H2gate& gate, const std::string& url) {
  const CommandResult r =
      runCurl({"-sS", "-o", "/dev/null", "-w", "%{http_code}", "-x", gate.proxyUrl(), url});
  UNSCOPED_INFO("curl " << url << ": " << r.out << r.err);
  return r.out;
}

}  // namespace

TEST_CASE("keyring: the fixture is a real Secret Service; secret-tool and h2gate read each other",
          "[keyring]") {
  SecretService s;
  // An entry written by another client (secret-tool) with h2gate's schema.
  Run r = s.run({"secret-tool", "store", "--label=from secret-tool", "xdg:schema",
                 "org.h2gate.ProxyCredentials", "entry", "from-tool", "username", "bob"},
                "tool-pw-1");
  REQUIRE(r.code() == 0);
  r = s.run({"secret-tool", "lookup", "entry", "from-tool"});
  REQUIRE(r.code() == 0);
  CHECK(r.out == "tool-pw-1");
  r = s.h2gate({"credentials", "show", "from-tool"});
  CHECK(r.code() == 0);
  CHECK(r.out == "entry 'from-tool' in the Secret Service: user bob, a password is stored\n");
  CHECK_FALSE(has(r.out + r.err, "tool-pw-1"));

  // An entry h2gate wrote, as secret-tool sees it.
  r = s.h2gate({"credentials", "set", "from-h2gate", "carol"}, "h2-pw-2\n");
  REQUIRE(r.code() == 0);
  r = s.run({"secret-tool", "lookup", "entry", "from-h2gate"});
  CHECK(r.code() == 0);
  CHECK(r.out == "h2-pw-2");
  r = s.run({"secret-tool", "search", "--all", "entry", "from-h2gate"});
  // secret-tool writes the item's lines to stdout, its attributes to stderr.
  CHECK(has(r.out + r.err, "attribute.username = carol"));
  CHECK(has(r.out + r.err, "schema = org.h2gate.ProxyCredentials"));
  CHECK(has(r.out + r.err, "label = h2gate proxy credentials: from-h2gate"));
}

TEST_CASE("keyring: h2gate credentials set, show, delete", "[keyring]") {
  SecretService s;
  Run r = s.h2gate({"credentials", "set", "corp", "alice"}, kProxyPassword + "\n");
  CHECK(r.code() == 0);
  CHECK(r.out == "stored entry 'corp' (user alice) in the Secret Service\n");
  CHECK(r.err.empty());  // stdin is not a terminal: no prompt
  r = s.h2gate({"credentials", "show", "corp"});
  CHECK(r.code() == 0);
  CHECK(r.out == "entry 'corp' in the Secret Service: user alice, a password is stored\n");
  CHECK_FALSE(has(r.out + r.err, kProxyPassword));

  // Set again: replaced, one item.
  r = s.h2gate({"credentials", "set", "corp", "dave"}, "second-pw\r\n");
  CHECK(r.code() == 0);
  r = s.run({"secret-tool", "search", "--all", "entry", "corp"});
  CHECK(countOccurrences(r.out + r.err, "attribute.entry = corp") == 1);
  r = s.run({"secret-tool", "lookup", "entry", "corp"});
  CHECK(r.out == "second-pw");  // the line break (CRLF too) is not part of it
  r = s.h2gate({"credentials", "show", "corp"});
  CHECK(r.out == "entry 'corp' in the Secret Service: user dave, a password is stored\n");

  r = s.h2gate({"credentials", "show", "nope"});
  CHECK(r.code() == 1);
  CHECK(r.err == "h2gate: no entry 'nope' in the Secret Service\n");

  r = s.h2gate({"credentials", "delete", "corp"});
  CHECK(r.code() == 0);
  CHECK(r.out == "deleted entry 'corp' from the Secret Service\n");
  r = s.h2gate({"credentials", "show", "corp"});
  CHECK(r.code() == 1);
  r = s.run({"secret-tool", "lookup", "entry", "corp"});
  CHECK(r.code() != 0);
  r = s.h2gate({"credentials", "delete", "corp"});
  CHECK(r.code() == 1);
  CHECK(r.err == "h2gate: no entry 'corp' in the Secret Service\n");

  // No password, no entry; usage errors.
  r = s.h2gate({"credentials", "set", "corp", "alice"}, "");
  CHECK(r.code() == 1);
  CHECK(r.err == "h2gate: credentials set: no password read from standard input\n");
  r = s.h2gate({"credentials", "show", "corp"});
  CHECK(r.code() == 1);
  r = s.h2gate({"credentials", "set", "corp"});
  CHECK(r.code() == 2);
  CHECK(r.err == "h2gate: usage: h2gate credentials set NAME USER | show NAME | delete NAME\n");
}

// On a terminal (tests/support/on_terminal.py: a pseudo-terminal, typed
// into as a person would): the prompts show, the password is asked twice
// and never shown (echo is off while it is typed), and two different ones
// store nothing. The fixture is proven first with bash's `read`, with and
// without -s, so a fixture that could not see echo would fail here.
TEST_CASE("keyring: credentials set on a terminal: prompts, no echo, asked twice", "[keyring]") {
  SecretService s;
  const std::string typist = supportDir() + "/on_terminal.py";
  Run r = s.run({"python3", typist, "Secret: =hidden-1", "--", "bash", "-c",
                 "read -s -p 'Secret: ' x; echo; echo \"got ${#x}\""});
  INFO(r.out << r.err);
  REQUIRE(r.code() == 0);
  CHECK(r.out == "Secret: \ngot 8\n");
  CHECK(has(r.err, "'Secret: ': echo off"));
  r = s.run({"python3", typist, "Seen: =shown-1", "--", "bash", "-c", "read -p 'Seen: ' x"});
  REQUIRE(r.code() == 0);
  CHECK(r.out == "Seen: shown-1\n");  // typed with echo on: shown
  CHECK(has(r.err, "'Seen: ': echo on"));

  const std::string h2gate = H2gate::binaryPath(H2GATE_BINARY);
  const std::string pw = "tty-Proxy-pw-9";
  r = s.run({"python3", typist, "Password for erin (entry tty): =" + pw, "Again: =" + pw, "--",
             h2gate, "credentials", "set", "tty", "erin"});
  INFO(r.out << r.err);
  CHECK(r.code() == 0);
  CHECK(r.out ==
        "Password for erin (entry tty): \nAgain: \nstored entry 'tty' (user erin) in the Secret "
        "Service\n");
  CHECK(countOccurrences(r.err, ": echo off") == 2);
  CHECK_FALSE(has(r.out, pw));
  Run stored = s.run({"secret-tool", "lookup", "entry", "tty"});
  CHECK(stored.out == pw);

  r = s.run({"python3", typist, "Password for erin (entry tty2): =" + pw, "Again: =other-pw", "--",
             h2gate, "credentials", "set", "tty2", "erin"});
  CHECK(r.code() == 1);
  CHECK(has(r.out, "h2gate: credentials set: the passwords differ; nothing stored\n"));
  CHECK_FALSE(has(r.out, pw));
  CHECK(s.h2gate({"credentials", "show", "tty2"}).code() == 1);
}

TEST_CASE("keyring: h2gate sends the keyring's password as Basic to squid", "[keyring]") {
  SecretService s;
  Squid::Options so;
  so.auth = true;
  so.username = "alice";
  so.password = kProxyPassword;
  so.log_user = true;
  Squid squid(so);
  Nginx::Options no;
  no.with_sink = false;
  Nginx nginx(no);
  const std::string url = nginx.httpUrl("/1k");

  REQUIRE(s.h2gate({"credentials", "set", "corp", "alice"}, kProxyPassword + "\n").code() == 0);

  SECTION("a config's credentials: {keyring: corp}; /config_dump names the entry") {
    H2gate::Options o;
    o.binary = H2GATE_BINARY;
    o.yaml = clusterConfig(squid.httpPort(), "{keyring: corp}");
    o.args = {"--log-level", "debug"};
    o.env = s.env();
    H2gate gate(o);
    CHECK(statusThrough(gate, url) == "200");
    const auto lines = squid.waitForAccessLines(1, "GET", milliseconds(5000));
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].ends_with(" alice"));
    const std::string dump = adminGet(gate.adminPort(), "/config_dump").body;
    INFO(dump);
    CHECK(has(dump, "keyring: corp"));
    CHECK(has(dump, "username: alice"));
    CHECK_FALSE(has(dump, kProxyPassword));
    CHECK_FALSE(has(gate.stderrText(), kProxyPassword));
    CHECK_FALSE(has(gate.process().stdoutText(), kProxyPassword));
  }
  SECTION("--upstream with --proxy-auth basic --proxy-credentials keyring:corp") {
    H2gate::Options o;
    o.binary = H2GATE_BINARY;
    o.args = {"--listen",     "127.0.0.1:0", "--admin",
              "127.0.0.1:0",  "--upstream",  "http://127.0.0.1:" + num(squid.httpPort()),
              "--proxy-auth", "basic",       "--proxy-credentials",
              "keyring:corp", "--log-level", "debug"};
    o.env = s.env();
    H2gate gate(o);
    CHECK(statusThrough(gate, url) == "200");
    const auto lines = squid.waitForAccessLines(1, "GET", milliseconds(5000));
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].ends_with(" alice"));
    CHECK_FALSE(has(gate.stderrText(), kProxyPassword));
  }
  SECTION("--pac FILE with --proxy-auth basic --proxy-credentials keyring:corp") {
    const std::string pac = s.dir().write(
        "proxy.pac", "function FindProxyForURL(url, host) { return \"PROXY 127.0.0.1:" +
                         num(squid.httpPort()) + "\"; }\n");
    H2gate::Options o;
    o.binary = H2GATE_BINARY;
    o.args = {"--listen",    "127.0.0.1:0",  "--admin", "127.0.0.1:0",         "--pac",
              pac,           "--proxy-auth", "basic",   "--proxy-credentials", "keyring:corp",
              "--log-level", "debug"};
    o.env = s.env();
    H2gate gate(o);
    REQUIRE(gate.process().waitForLog("using the PAC file from", kPacLoadTimeout));
    CHECK(statusThrough(gate, url) == "200");
    const auto lines = squid.waitForAccessLines(1, "GET", milliseconds(5000));
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].ends_with(" alice"));
    CHECK_FALSE(has(gate.stderrText(), kProxyPassword));
  }
  SECTION("the password squid checks is the keyring's: a wrong one there gets 407") {
    REQUIRE(s.h2gate({"credentials", "set", "corp", "alice"}, "not-the-password\n").code() == 0);
    H2gate::Options o;
    o.binary = H2GATE_BINARY;
    o.yaml = clusterConfig(squid.httpPort(), "{username: alice, keyring: corp}");
    o.env = s.env();
    H2gate gate(o);
    CHECK(statusThrough(gate, url) == "407");
  }
}

TEST_CASE("keyring: a locked keyring is a clear error within the bound, not a hang", "[keyring]") {
  SecretService s;
  REQUIRE(s.h2gate({"credentials", "set", "corp", "alice"}, kProxyPassword + "\n").code() == 0);
  const std::string config = s.dir().write("h2gate.yaml", clusterConfig(9, "{keyring: corp}"));
  // Locked, as after a screen lock; no desktop shows its unlock prompt.
  s.lock();
  const std::string locked = "the keyring is locked and was not unlocked";

  Run r = s.h2gate({"credentials", "show", "corp"});
  CHECK(r.code() == 1);
  CHECK(r.err.starts_with("h2gate: credentials show corp: " + locked));
  CHECK(has(r.err, "use password_file or ${ENV} instead"));
  CHECK(r.seconds < std::chrono::duration<double>(kBound).count() + 3);

  r = s.h2gate({"--validate", "-c", config});
  CHECK(r.code() == 1);
  CHECK(regexSearch(r.out, "(^|\n)" + regexEscape(config) +
                               ":[0-9]+:[0-9]+: static_resources\\.clusters\\[0\\]\\."
                               "proxy_authentication\\.credentials\\.keyring: keyring entry "
                               "'corp': " +
                               regexEscape(locked)));
  CHECK(r.seconds < std::chrono::duration<double>(kBound).count() + 3);

  // The daemon does not start with it.
  r = s.h2gate({"-c", config});
  CHECK(r.code() == 1);
  CHECK(has(r.err, "keyring entry 'corp': " + locked));
  CHECK(has(r.err, "not starting"));

  r = s.h2gate({"credentials", "set", "other", "alice"}, "pw\n");
  CHECK(r.code() == 1);
  CHECK(r.err.starts_with("h2gate: credentials set other: " + locked));
  CHECK(r.seconds < std::chrono::duration<double>(kBound).count() + 3);
}

TEST_CASE("keyring: a Secret Service that does not answer: the error after the bound",
          "[keyring]") {
  SecretService s;
  REQUIRE(s.h2gate({"credentials", "set", "corp", "alice"}, kProxyPassword + "\n").code() == 0);
  // Its daemon stopped: the bus takes the calls, nobody answers them.
  s.keyringDaemon().signalMain(SIGSTOP);
  const Run r = s.h2gate({"credentials", "show", "corp"});
  s.keyringDaemon().signalMain(SIGCONT);
  CHECK(r.code() == 1);
  CHECK(r.err ==
        "h2gate: credentials show corp: the Secret Service (org.freedesktop.secrets on the "
        "D-Bus session bus) did not answer within 10 s: is its keyring daemon "
        "(gnome-keyring-daemon, KWallet) hung? use password_file or ${ENV} instead\n");
  CHECK(r.seconds >= std::chrono::duration<double>(kBound).count() - 0.5);
  CHECK(r.seconds < std::chrono::duration<double>(kBound).count() + 4);
  // Answering again, it works.
  CHECK(s.h2gate({"credentials", "show", "corp"}).code() == 0);
}

TEST_CASE("keyring: no D-Bus session bus at all", "[keyring]") {
  SecretService s;  // for its directory and tools; its bus is not given
  const std::string empty_runtime = s.dir().file("no-runtime");
  ::mkdir(empty_runtime.c_str(), 0700);
  const Env no_bus{{"DBUS_SESSION_BUS_ADDRESS", std::nullopt}, {"XDG_RUNTIME_DIR", empty_runtime}};
  const std::string reason =
      "no Secret Service: DBUS_SESSION_BUS_ADDRESS is not set (there is no D-Bus session bus, "
      "as in a system service or an ssh login); use password_file or ${ENV} instead";
  Run r = s.h2gate({"credentials", "show", "corp"}, "", no_bus);
  CHECK(r.code() == 1);
  CHECK(r.err == "h2gate: credentials show corp: " + reason + "\n");
  CHECK(r.seconds < 3);
  r = s.h2gate({"credentials", "set", "corp", "alice"}, "pw\n", no_bus);
  CHECK(r.code() == 1);
  CHECK(r.err == "h2gate: credentials set corp: " + reason + "\n");

  const std::string config = s.dir().write("h2gate.yaml", clusterConfig(9, "{keyring: corp}"));
  r = s.h2gate({"--validate", "-c", config}, "", no_bus);
  CHECK(r.code() == 1);
  CHECK(regexSearch(r.out, regexEscape(config) +
                               ":[0-9]+:[0-9]+: static_resources\\.clusters\\[0\\]\\."
                               "proxy_authentication\\.credentials\\.keyring: keyring entry "
                               "'corp': " +
                               regexEscape(reason)));
  CHECK(r.seconds < 3);
}
