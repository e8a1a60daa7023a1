// The scheme chooser and the per-request exchange (auth/proxy_auth.h) with
// a fake platform: which scheme auto picks from a 407, what each attempt
// sends, when it retries (at most once), NTLM's legs on one connection,
// Kerberos mutual authentication, the metric and the logging of failures
// (bounded, whatever a proxy sends).
// The real GSSAPI backend is tested against a KDC in gssapi_posix_test.cc.
#include "gateway/upstream/auth/proxy_auth.h"

#include <catch2/catch.hpp>

#include "gateway/base/log.h"
#include "tests/support/temp_dir.h"

using namespace h2gate;
using namespace h2gate::upstream;
using namespace h2gate::upstream::auth;
using Kind = Verdict::Kind;

namespace {

// Tokens are text: "neg:<n>" (Negotiate), "ntlm1" / "ntlm3:<challenge>"
// (NTLM). A Negotiate answer "mutual-ok" verifies, anything else fails.
struct FakeMechanisms : Mechanisms {
  bool negotiate_fails = false;
  bool ntlm_fails = false;
  bool local = false;  // firstStepIsLocal's answer
  int tokens = 0;
  std::vector<std::string> spns;
  struct Ctx : SecurityContext {
    FakeMechanisms& m;
    Mechanism mech;
    int leg = 0;
    Ctx(FakeMechanisms& f, Mechanism x) : m(f), mech(x) {}
    Step step(std::string_view in) override {
      Step s;
      ++leg;
      if (mech == Mechanism::Negotiate) {
        if (leg == 1) {
          if (m.negotiate_fails) {
            s.error = "No Kerberos credentials available";
            s.hint = "run kinit";
            return s;
          }
          s.status = Step::Status::Continue;
          s.token = "neg:" + std::to_string(++m.tokens);
          return s;
        }
        s.status = in == "mutual-ok" ? Step::Status::Complete : Step::Status::Failed;
        if (s.status == Step::Status::Failed) s.error = "bad mutual token";
        return s;
      }
      if (m.ntlm_fails) {
        s.error = "no NTLM credentials";
        return s;
      }
      s.status = leg == 1 ? Step::Status::Continue : Step::Status::Complete;
      s.token = leg == 1 ? "ntlm1" : "ntlm3:" + std::string(in);
      return s;
    }
  };
  std::unique_ptr<SecurityContext> newContext(Mechanism m, const std::string& spn) override {
    spns.push_back(spn);
    return std::make_unique<Ctx>(*this, m);
  }
  bool firstStepIsLocal(Mechanism, const std::string&) override { return local; }
};

config::Cluster cluster(std::optional<config::ProxyAuthentication::Scheme> scheme,
                        bool credentials) {
  config::Cluster c;
  c.name = "corp";
  c.endpoints = {{"proxy.corp.example", 8443}, {"proxy2.corp.example", 8443}};
  if (scheme) {
    c.authentication.emplace();
    c.authentication->scheme = *scheme;
  }
  if (credentials) c.credentials = config::ProxyCredentials{"alice", "pw"};
  return c;
}

ResponseHead response(int status, Headers headers = {}, bool keep_alive = true) {
  ResponseHead r;
  r.status = status;
  r.headers = std::move(headers);
  r.keep_alive = keep_alive;
  return r;
}

struct ProxyAuthFixture {
  config::Cluster c;
  asio::io_context io;
  metrics::Registry registry;
  metrics::Shard& shard = registry.newShard();
  std::shared_ptr<FakeMechanisms> fake = std::make_shared<FakeMechanisms>();
  std::shared_ptr<ClusterHealth> health;
  std::shared_ptr<ProxyAuth> auth;
  std::vector<size_t> http1_required;

  explicit ProxyAuthFixture(config::Cluster cl) : c(std::move(cl)) {
    health = std::make_shared<ClusterHealth>(
        c.name, std::vector<std::string>{"proxy.corp.example:8443", "proxy2.corp.example:8443"});
    auth = std::make_shared<ProxyAuth>(c, io, shard, health, fake);
    auth->onHttp1Required([this](size_t e) { http1_required.push_back(e); });
  }
  std::shared_ptr<RequestAuth> request(bool has_body = false) {
    return std::make_shared<RequestAuth>(auth, 7, 1, has_body);
  }
  // prepare(), running the event loop until the result comes.
  Prepared prepare(RequestAuth& r, size_t endpoint = 0, bool h2 = true, bool authed = false) {
    std::optional<Prepared> got;
    r.prepare(endpoint, h2, authed, [&](Prepared p) { got = std::move(p); });
    auto work = asio::make_work_guard(io);  // run_for waits for the token thread's post
    for (int i = 0; i < 500 && !got; ++i) {
      io.restart();
      io.run_for(std::chrono::milliseconds(10));
    }
    REQUIRE(got);
    return std::move(*got);
  }
  uint64_t count(const char* scheme, const char* result) {
    return shard.counter(metrics::Family::UpstreamAuth, {"corp", scheme, result}).value();
  }
  std::string shown(size_t endpoint) { return health->snapshot()[endpoint].auth; }
};

const Headers kAllThree{{"Proxy-Authenticate", "Basic realm=\"corp\""},
                        {"Proxy-Authenticate", "NTLM"},
                        {"Proxy-Authenticate", "Negotiate"}};

}  // namespace

TEST_CASE("auto picks the strongest scheme the proxy offers", "[auth][proxy_auth]") {
  ProxyAuthFixture f(cluster(config::ProxyAuthentication::Scheme::Auto, /*credentials=*/true));
  auto offers = [](std::vector<std::string> schemes) {
    Headers h;
    for (auto& s : schemes) h.push_back({"Proxy-Authenticate", s});
    return challengesOf(h);
  };
  CHECK(f.auth->choose(offers({"Basic realm=x", "NTLM", "Negotiate"})) == Scheme::Negotiate);
  CHECK(f.auth->choose(offers({"Basic realm=x, NTLM"})) == Scheme::Ntlm);
  CHECK(f.auth->choose(offers({"Basic realm=x"})) == Scheme::Basic);
  CHECK(f.auth->choose(offers({"Digest realm=x"})) == Scheme::None);
  // A scheme that just failed here is skipped: the next one the proxy offers.
  CHECK(f.auth->choose(offers({"Negotiate", "NTLM"}), Scheme::Negotiate) == Scheme::Ntlm);

  ProxyAuthFixture nocreds(
      cluster(config::ProxyAuthentication::Scheme::Auto, /*credentials=*/false));
  CHECK(nocreds.auth->choose(offers({"Basic realm=x"})) == Scheme::None);
  // NTLM may use the platform's own credentials.
  CHECK(nocreds.auth->choose(offers({"Basic realm=x", "NTLM"})) == Scheme::Ntlm);

  ProxyAuthFixture negotiate(cluster(config::ProxyAuthentication::Scheme::Negotiate, true));
  CHECK(negotiate.auth->choose(offers({"NTLM", "Basic realm=x"})) == Scheme::None);
  CHECK(negotiate.auth->upFront(1) == Scheme::Negotiate);
}

TEST_CASE("auto: the first 407 teaches the scheme, later requests send it up front",
          "[auth][proxy_auth]") {
  ProxyAuthFixture f(cluster(config::ProxyAuthentication::Scheme::Auto, true));
  CHECK(f.shown(0) == "auto");
  auto first = f.request();
  CHECK(f.prepare(*first).authorization.empty());
  Verdict v = first->onResponse(response(407, kAllThree), true, false);
  CHECK(v.kind == Kind::Retry);
  CHECK(f.shown(0) == "negotiate");
  CHECK(f.shown(1) == "auto");  // another proxy has not said yet
  // The retry carries a Negotiate token for HTTP@<endpoint>.
  CHECK(f.prepare(*first).authorization == "Negotiate " + base64Encode("neg:1"));
  CHECK(f.fake->spns.back() == "HTTP@proxy.corp.example");
  CHECK(first->onResponse(response(200), true, false).kind == Kind::Deliver);
  CHECK(f.count("negotiate", "success") == 1);
  // The next request: up front, each with a token of its own.
  auto second = f.request();
  CHECK(f.prepare(*second).authorization == "Negotiate " + base64Encode("neg:2"));
  // At most one retry: a 407 to the token goes to the app.
  v = second->onResponse(response(407, kAllThree), true, false);
  CHECK(v.kind == Kind::Deliver);
  CHECK(f.count("negotiate", "rejected") == 1);
}

TEST_CASE("Negotiate: a token from a ticket in memory is made at once, on the caller's thread",
          "[auth][proxy_auth]") {
  ProxyAuthFixture f(cluster(config::ProxyAuthentication::Scheme::Negotiate, false));
  auto r = f.request();
  bool got = false;
  f.fake->local = false;
  r->prepare(0, true, false, [&](Prepared) { got = true; });
  CHECK_FALSE(got);  // handed to a token thread; comes back through the event loop
  auto work = asio::make_work_guard(f.io);
  for (int i = 0; i < 500 && !got; ++i) f.io.run_for(std::chrono::milliseconds(10));
  CHECK(got);
  f.fake->local = true;
  auto s = f.request();
  std::string header;
  s->prepare(0, true, false, [&](Prepared p) { header = p.authorization; });
  CHECK(header.rfind("Negotiate ", 0) == 0);  // within the call
}

TEST_CASE("Negotiate: the proxy's mutual-authentication token must verify", "[auth][proxy_auth]") {
  ProxyAuthFixture f(cluster(config::ProxyAuthentication::Scheme::Negotiate, false));
  f.auth->learn(0, Scheme::Negotiate, 0, 0);  // configured: no-op
  auto ok = f.request();
  CHECK(f.prepare(*ok).authorization == "Negotiate " + base64Encode("neg:1"));
  Verdict v = ok->onResponse(
      response(200, {{"Proxy-Authenticate", "Negotiate " + base64Encode("mutual-ok")}}), false,
      false);
  CHECK(v.kind == Kind::Deliver);
  auto bad = f.request();
  f.prepare(*bad);
  v = bad->onResponse(
      response(200, {{"Proxy-Authenticate", "Negotiate " + base64Encode("forged")}}), false, false);
  CHECK(v.kind == Kind::Fail);
  CHECK_THAT(v.reason, Catch::Contains("mutual authentication failed"));
  CHECK(f.count("negotiate", "success") == 1);
  CHECK(f.count("negotiate", "mutual_failed") == 1);
  // No token in the answer (squid sends none): nothing to check.
  auto plain = f.request();
  f.prepare(*plain);
  CHECK(plain->onResponse(response(200), false, false).kind == Kind::Deliver);
  CHECK(f.count("negotiate", "success") == 2);
}

TEST_CASE("Negotiate without a ticket: nothing is sent, the app gets the 407, logged once",
          "[auth][proxy_auth]") {
  ProxyAuthFixture f(cluster(config::ProxyAuthentication::Scheme::Negotiate, false));
  f.fake->negotiate_fails = true;
  for (int i = 0; i < 3; ++i) {
    auto r = f.request();
    CHECK(f.prepare(*r).authorization.empty());
    // No retry: the 407 reaches the app.
    CHECK(r->onResponse(response(407, {{"Proxy-Authenticate", "Negotiate"}}), true, false).kind ==
          Kind::Deliver);
  }
  CHECK(f.count("negotiate", "failed") == 3);

  SECTION("auto falls back to the next scheme the proxy offers") {
    ProxyAuthFixture a(cluster(config::ProxyAuthentication::Scheme::Auto, true));
    a.fake->negotiate_fails = true;
    auto r = a.request();
    a.prepare(*r);
    CHECK(r->onResponse(response(407, {{"Proxy-Authenticate", "Negotiate"},
                                       {"Proxy-Authenticate", "Basic realm=x"}}),
                        true, false)
              .kind == Kind::Retry);
    // Learnt Negotiate; its token fails; this request's one retry is used.
    CHECK(a.prepare(*r).authorization.empty());
    CHECK(r->onResponse(response(407, kAllThree), true, false).kind == Kind::Deliver);
    // The next request: its Negotiate fails, the 407 then picks Basic.
    auto next = a.request();
    CHECK(a.prepare(*next).authorization.empty());
    CHECK(next->onResponse(response(407, {{"Proxy-Authenticate", "Negotiate"},
                                          {"Proxy-Authenticate", "Basic realm=x"}}),
                           true, false)
              .kind == Kind::Retry);
    CHECK(a.prepare(*next).authorization == "Basic " + base64Encode("alice:pw"));
  }
}

TEST_CASE("a retry needs an untouched request; Basic goes up front", "[auth][proxy_auth]") {
  ProxyAuthFixture f(cluster(config::ProxyAuthentication::Scheme::Auto, true));
  auto r = f.request(/*has_body=*/true);
  f.prepare(*r);
  // Part of the body left already: the 407 goes to the app.
  CHECK(r->onResponse(response(407, kAllThree), /*can_retry=*/false, false).kind == Kind::Deliver);

  ProxyAuthFixture basic(cluster(std::nullopt, true));  // proxy_credentials alone: Basic
  auto b = basic.request();
  CHECK(basic.prepare(*b).authorization == "Basic " + base64Encode("alice:pw"));
  CHECK(b->onResponse(response(200), false, false).kind == Kind::Deliver);
  CHECK(basic.count("basic", "success") == 1);
  CHECK(basic.shown(0) == "basic");
}

TEST_CASE("NTLM: three messages on one HTTP/1.1 connection, then it is authenticated",
          "[auth][proxy_auth]") {
  ProxyAuthFixture f(cluster(config::ProxyAuthentication::Scheme::Ntlm, true));
  CHECK(f.auth->http1Only(0));
  auto r = f.request(/*has_body=*/true);
  Prepared p = f.prepare(*r, 0, /*h2=*/false);
  CHECK(p.authorization == "NTLM " + base64Encode("ntlm1"));
  CHECK(p.handshake);  // the body waits for the last leg
  Verdict v = r->onResponse(
      response(407, {{"Proxy-Authenticate", "NTLM " + base64Encode("challenge")}}), true, true);
  REQUIRE(v.kind == Kind::Continue);
  CHECK(v.authorization == "NTLM " + base64Encode("ntlm3:challenge"));
  CHECK_FALSE(v.handshake);
  v = r->onResponse(response(200), true, true);
  CHECK(v.kind == Kind::Deliver);
  CHECK(v.connection_authenticated);
  CHECK(f.count("ntlm", "success") == 1);
  // A request on that connection sends nothing.
  auto again = f.request();
  CHECK(f.prepare(*again, 0, false, /*authenticated=*/true).authorization.empty());

  SECTION("a wrong password: the 407 to the last leg goes to the app, once") {
    auto w = f.request();
    f.prepare(*w, 0, false);
    v = w->onResponse(response(407, {{"Proxy-Authenticate", "NTLM " + base64Encode("c")}}), true,
                      true);
    REQUIRE(v.kind == Kind::Continue);
    v = w->onResponse(response(407, {{"Proxy-Authenticate", "NTLM"}}), true, true);
    CHECK(v.kind == Kind::Deliver);
    CHECK(f.count("ntlm", "rejected") == 1);
  }
  SECTION("a proxy that closes the connection after its challenge") {
    auto w = f.request();
    f.prepare(*w, 0, false);
    v = w->onResponse(response(407, {{"Proxy-Authenticate", "NTLM " + base64Encode("c")}}), true,
                      /*same_connection=*/false);
    CHECK(v.kind == Kind::Deliver);
    CHECK(f.count("ntlm", "failed") == 1);
  }
}

TEST_CASE("auto learns NTLM: over HTTP/2 the proxy is switched to HTTP/1.1", "[auth][proxy_auth]") {
  ProxyAuthFixture f(cluster(config::ProxyAuthentication::Scheme::Auto, true));
  const Headers ntlm_only{{"Proxy-Authenticate", "NTLM"}, {"Proxy-Authenticate", "Basic realm=x"}};
  SECTION("h2: retried over HTTP/1.1") {
    auto r = f.request();
    f.prepare(*r, 1, /*h2=*/true);
    CHECK(r->onResponse(response(407, ntlm_only), true, false).kind == Kind::Retry);
    CHECK(f.http1_required == std::vector<size_t>{1});
    CHECK(f.auth->http1Only(1));
    CHECK_FALSE(f.auth->http1Only(0));
    CHECK(f.shown(1) == "ntlm");
    Prepared p = f.prepare(*r, 1, /*h2=*/false);
    CHECK(p.authorization == "NTLM " + base64Encode("ntlm1"));
  }
  SECTION("HTTP/1.1 keep-alive: the handshake starts on the same connection") {
    auto r = f.request();
    f.prepare(*r, 0, /*h2=*/false);
    Verdict v = r->onResponse(response(407, ntlm_only), true, true);
    CHECK(v.kind == Kind::Continue);
    CHECK(v.handshake);
    CHECK(v.authorization == "NTLM " + base64Encode("ntlm1"));
  }
}

TEST_CASE("base64 both ways", "[auth][proxy_auth]") {
  CHECK(base64Encode("") == "");
  CHECK(base64Encode("a") == "YQ==");
  CHECK(base64Decode("YQ==") == "a");
  CHECK(base64Decode("YWI=") == "ab");
  CHECK(base64Decode("YWJj") == "abc");
  CHECK_FALSE(base64Decode("YQ="));
  CHECK_FALSE(base64Decode("!!!!"));
  CHECK_FALSE(base64Decode(""));
}

namespace {

// Log lines go to a file for the test's length, at info level.
struct LogToFile {
  explicit LogToFile(const std::string& path) : previous(log::level()) {
    std::string error;
    REQUIRE(log::setOutputFile(path, {.max_bytes = 0, .keep = 0}, &error));
    log::setLevel(log::Level::Info);
  }
  ~LogToFile() {
    log::setOutput(nullptr);
    log::setLevel(previous);
  }
  log::Level previous;
};

size_t countOf(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("407s naming a new huge scheme each time: what is logged and kept stays bounded",
          "[auth][proxy_auth]") {
  // Basic sent and rejected (the cause names what the proxy offers), or
  // auto with nothing it can use (the same).
  const bool basic = GENERATE(false, true);
  config::Cluster c = basic ? cluster(std::nullopt, true)
                            : cluster(config::ProxyAuthentication::Scheme::Auto, false);
  c.name = basic ? "hostile-basic" : "hostile-auto";  // causes are kept per cluster name
  ProxyAuthFixture f(std::move(c));
  test::TempDir dir("auth-log");
  const std::string path = dir.file("h2gate.log");
  constexpr int kRequests = 1000;
  constexpr size_t kSchemeBytes = 30 * 1024;
  {
    LogToFile to_file(path);
    for (int i = 0; i < kRequests; ++i) {
      // A token (RFC 9110 tchar), new in its first characters each time.
      const std::string scheme = "S" + std::to_string(i) + "-" + std::string(kSchemeBytes, 'x');
      auto r = f.request();
      CHECK(f.prepare(*r).authorization.empty() == !basic);
      CHECK(r->onResponse(response(407, {{"Proxy-Authenticate", scheme}}), true, false).kind ==
            Kind::Deliver);
    }
  }
  const std::string text = test::readFile(path);
  INFO(text.substr(0, 4000));
  // Without bounds: 1000 warnings of 30 KiB each (30 MB), and as much kept.
  const size_t lines = countOf(text, "\n");
  CHECK(lines == ProxyAuth::kMaxCauses + 1);  // once per cause, then "no more are kept"
  CHECK(text.size() < 32 * 1024);
  const ProxyAuth::Remembered kept = f.auth->remembered();
  CHECK(kept.causes == ProxyAuth::kMaxCauses);
  CHECK(kept.bytes <= ProxyAuth::kMaxCauses * ProxyAuth::kMaxCauseBytes);
  // The lines still say what the proxy asked for, shortened.
  CHECK(countOf(text, "S0-xxxxxxxx") == 1);
  CHECK(countOf(text, "xxx... (" + std::to_string(kSchemeBytes + 3) + " characters)") == 10);
  CHECK(countOf(text, "further new ones are logged at debug level only") == 1);

  // A success forgets them: the same failure is logged again after it.
  if (basic) {
    auto ok = f.request();
    f.prepare(*ok);
    CHECK(ok->onResponse(response(200), false, false).kind == Kind::Deliver);
    CHECK(f.auth->remembered().causes == 0);
  }
}

TEST_CASE("a failure's log line is escaped and shortened", "[auth][proxy_auth]") {
  config::Cluster c = cluster(std::nullopt, true);
  c.name = "escaped-log";
  ProxyAuthFixture f(std::move(c));
  test::TempDir dir("auth-log");
  const std::string path = dir.file("h2gate.log");
  {
    LogToFile to_file(path);
    f.auth->warnOnce("k", 7, 1, "proxy said \x1b]0;title\x07\x1b[2J\r\n  forged line");
    f.auth->warnOnce("long", 7, 1, std::string(100000, 'y'));
  }
  const std::string text = test::readFile(path);
  INFO(text.substr(0, 4000));
  CHECK(countOf(text, "\n") == 2);
  CHECK(countOf(text, "proxy said \\x1b]0;title\\x07\\x1b[2J\\r\\n  forged line") == 1);
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.size() < 4096);
  CHECK(countOf(text, "... (100000 bytes)") == 1);
}
