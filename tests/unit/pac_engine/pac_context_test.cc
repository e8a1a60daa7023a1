// One PAC file in one heap (gateway/pac_engine/pac_context.h): what a load
// refuses, which entry point answers, what FindProxyForURL may return, and
// the bound on DNS calls per run. The library functions are
// pac_library_test.cc's; the evaluator around contexts is evaluator_test.cc's.
#include "gateway/pac_engine/pac_context.h"

#include <catch2/catch.hpp>

#include "tests/unit/pac_engine/pac_test_util.h"

using namespace h2gate::pac;
using namespace h2gate::pac::test;
using namespace std::chrono_literals;

namespace {

struct Ctx {
  Ctx() {
    env.resolver = resolver;
    resolver->table["a.test"] = {"10.0.0.1"};
  }
  std::shared_ptr<TableResolver> resolver = std::make_shared<TableResolver>();
  PacEnvironment env;
};

}  // namespace

TEST_CASE("pac context: what a load refuses", "[pac][pac_context]") {
  Ctx c;
  {
    PacContext ctx(c.env);
    const PacError e = ctx.load("var x = 1;", "none.pac", in(5000ms));
    CHECK(e.kind == PacError::Kind::NoFunction);
    CHECK(e.message == "the file defines no function FindProxyForURL");
    // Once is all: a context does not load a second file over the first.
    CHECK(ctx.load("function FindProxyForURL(u, h) { return 'DIRECT'; }", "", in(5000ms)).kind ==
          PacError::Kind::Exception);
  }
  {
    PacContext ctx(c.env);
    CHECK(ctx.load("var FindProxyForURL = 'DIRECT';", "str.pac", in(5000ms)).kind ==
          PacError::Kind::NoFunction);
  }
  {
    PacContext ctx(c.env);
    const PacError e = ctx.load("function FindProxyForURL(u, h) {", "broken.pac", in(5000ms));
    CHECK(e.kind == PacError::Kind::Syntax);
  }
  {
    // A global getter that throws when the entry point is looked up.
    PacContext ctx(c.env);
    const PacError e = ctx.load(
        "Object.defineProperty(this, 'FindProxyForURL', {get: function () { throw new "
        "Error('gotcha'); }});",
        "getter.pac", in(5000ms));
    CHECK(e.kind == PacError::Kind::Exception);
    CHECK_THAT(e.message, Catch::Contains("gotcha"));
  }
  {
    PacContext ctx(c.env);
    const RawAnswer a = ctx.findProxy("http://a.test/", "a.test", in(5000ms));
    CHECK(a.error.kind == PacError::Kind::NoScript);
  }
  {
    PacEnvironment tiny = c.env;
    tiny.heap_limit = 1024;
    PacContext ctx(tiny);
    CHECK(ctx.load("function FindProxyForURL(u, h) { return 'DIRECT'; }", "", in(5000ms)).kind ==
          PacError::Kind::Memory);
  }
}

TEST_CASE("pac context: FindProxyForURLEx answers when the file defines it", "[pac][pac_context]") {
  Ctx c;
  PacContext ctx(c.env);
  REQUIRE(ctx.load("function FindProxyForURL(u, h) { return 'PROXY plain:1'; }\n"
                   "function FindProxyForURLEx(u, h) { return 'PROXY ex:1; ' + h; }",
                   "ex.pac", in(5000ms))
              .ok());
  CHECK(ctx.usesEx());
  const RawAnswer a = ctx.findProxy("https://a.test/x", "a.test", in(5000ms));
  CHECK(a.error.ok());
  CHECK(a.text == "PROXY ex:1; a.test");
}

TEST_CASE("pac context: what FindProxyForURL may return", "[pac][pac_context]") {
  Ctx c;
  PacContext ctx(c.env);
  REQUIRE(ctx.load("function FindProxyForURL(u, h) {\n"
                   "  if (h == 'num') return 3;\n"
                   "  if (h == 'arr') return ['DIRECT'];\n"
                   "  if (h == 'none') return;\n"
                   "  if (h == 'huge') return new Array(70000).join('x');\n"
                   "  if (h == 'throws') throw new TypeError('no such thing');\n"
                   "  return 'DIRECT';\n"
                   "}",
                   "ret.pac", in(5000ms))
              .ok());
  CHECK_FALSE(ctx.usesEx());
  auto ask = [&](const char* host) { return ctx.findProxy("http://x/", host, in(5000ms)); };
  RawAnswer a = ask("num");
  CHECK(a.error.kind == PacError::Kind::BadReturn);
  CHECK(a.error.message == "FindProxyForURL returned a number, not a string");
  CHECK(ask("arr").error.message == "FindProxyForURL returned an array, not a string");
  CHECK(ask("none").error.message == "FindProxyForURL returned undefined, not a string");
  a = ask("huge");
  CHECK(a.error.kind == PacError::Kind::BadReturn);
  CHECK(a.error.message == "FindProxyForURL returned 69999 bytes (more than 65536)");
  CHECK(a.text.empty());
  a = ask("throws");
  CHECK(a.error.kind == PacError::Kind::Exception);
  CHECK_THAT(a.error.message, Catch::StartsWith("TypeError: no such thing"));
  a = ask("fine");
  CHECK(a.error.ok());
  CHECK(a.text == "DIRECT");
}

TEST_CASE("pac context: DNS calls per run are bounded and asked once per name",
          "[pac][pac_context]") {
  Ctx c;
  PacContext ctx(c.env);
  REQUIRE(ctx.load("function FindProxyForURL(u, h) {\n"
                   "  var r = dnsResolve('a.test');\n"
                   "  for (var i = 0; i < 100; i++) { dnsResolve('a.test'); "
                   "dnsResolve('n' + i + '.test'); }\n"
                   "  return 'PROXY ' + r + ':1';\n"
                   "}",
                   "loop.pac", in(5000ms))
              .ok());
  RawAnswer a = ctx.findProxy("http://q/", "q", in(5000ms));
  CHECK(a.text == "PROXY 10.0.0.1:1");
  // a.test once, then 31 of the 100 other names; the rest refused unasked.
  CHECK(c.resolver->lookups() == 32);
  CHECK(a.lookups_refused == 69);
  CHECK(ctx.lookupsRefused() == 69);
  CHECK(c.resolver->owners().back() == "q");  // asked on behalf of the query's host
  // The next run starts with a fresh bound and asks again.
  a = ctx.findProxy("http://q/", "q2", in(5000ms));
  CHECK(c.resolver->lookups() == 64);
  CHECK(a.lookups_refused == 69);
}

TEST_CASE("pac context: a run past its deadline is a Timeout", "[pac][pac_context]") {
  Ctx c;
  PacContext ctx(c.env);
  REQUIRE(ctx.load("function FindProxyForURL(u, h) { for (;;) {} }", "spin.pac", in(5000ms)).ok());
  const RawAnswer a = ctx.findProxy("http://x/", "x", in(200ms));
  CHECK(a.error.kind == PacError::Kind::Timeout);
  // The context answers again afterwards (its next run has its own deadline).
  const RawAnswer b = ctx.findProxy("http://x/", "x", in(200ms));
  CHECK(b.error.kind == PacError::Kind::Timeout);
}
