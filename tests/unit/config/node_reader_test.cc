#include "config/node_reader.h"

#include <catch2/catch.hpp>

#include "tests/support/config_util.h"

using namespace h2gate::config;
using h2gate::testing::allProblems;
using h2gate::testing::hasProblem;
using h2gate::testing::ScopedEnv;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

TEST_CASE("parseDuration accepts Envoy's forms", "[config][duration]") {
  CHECK(parseDuration("5s") == seconds(5));
  CHECK(parseDuration("0.25s") == milliseconds(250));
  CHECK(parseDuration("100ms") == milliseconds(100));
  CHECK(parseDuration("250us") == std::chrono::microseconds(250));
  CHECK(parseDuration("7ns") == nanoseconds(7));
  CHECK(parseDuration("2m") == seconds(120));
  CHECK(parseDuration("1h") == seconds(3600));
  CHECK(parseDuration("1.5h") == seconds(5400));
  CHECK(parseDuration("0s") == seconds(0));
  CHECK(parseDuration("0.000000001s") == nanoseconds(1));
}

TEST_CASE("parseDuration rejects malformed and negative text", "[config][duration]") {
  for (const char* bad : {"", "5", "s", "-5s", "5 s", " 5s", "5S", "5sec", ".5s", "5.s", "1d",
                          "5s5", "1e3s", "99999999999999999999s", "9999999999999h"}) {
    INFO(bad);
    CHECK_FALSE(parseDuration(bad).has_value());
  }
}

TEST_CASE("expandEnv replaces ${NAME}", "[config][env]") {
  ScopedEnv a("H2GATE_TEST_A", "alpha");
  ScopedEnv gone("H2GATE_TEST_GONE", std::nullopt);
  std::string missing;
  CHECK(expandEnv("x-${H2GATE_TEST_A}-y", &missing) == "x-alpha-y");
  CHECK(expandEnv("${H2GATE_TEST_A}${H2GATE_TEST_A}", &missing) == "alphaalpha");
  CHECK(expandEnv("no vars, $HOME, $${x, ${} ${1X} ${a b} ${unclosed", &missing) ==
        "no vars, $HOME, $${x, ${} ${1X} ${a b} ${unclosed");
  CHECK_FALSE(expandEnv("p=${H2GATE_TEST_GONE}", &missing).has_value());
  CHECK(missing == "H2GATE_TEST_GONE");
}

namespace {

struct NodeReaderFixture {
  explicit NodeReaderFixture(const char* yaml) : diag("t.yaml"), root(YAML::Load(yaml), "", diag) {}
  Diagnostics diag;
  NodeReader root;
};

}  // namespace

TEST_CASE("NodeReader reads typed values and reports positions", "[config][reader]") {
  NodeReaderFixture f(
      "name: hello\n"
      "count: 42\n"
      "flag: true\n"
      "timeout: 1.5s\n"
      "proto: {seconds: 3, nanos: 5}\n"
      "list: [a, b]\n"
      "nested:\n"
      "  deeper: x\n");
  CHECK(f.root.string("name") == "hello");
  CHECK(f.root.uint("count", 0, 100) == 42u);
  CHECK(f.root.boolean("flag") == true);
  CHECK(f.root.duration("timeout") == milliseconds(1500));
  CHECK(f.root.duration("proto") == seconds(3) + nanoseconds(5));
  CHECK(f.root.stringList("list") == std::vector<std::string>{"a", "b"});
  CHECK(f.root.child("nested").string("deeper") == "x");
  CHECK_FALSE(f.root.string("absent").has_value());
  f.root.allowOnly({"name", "count", "flag", "timeout", "proto", "list", "nested"});
  CHECK(f.diag.ok());
}

TEST_CASE("NodeReader records wrong types with file:line:column and path", "[config][reader]") {
  NodeReaderFixture f(
      "name: [1]\n"
      "count: many\n"
      "big: 300\n"
      "flag: yes\n"
      "timeout: 5\n"
      "list: abc\n"
      "nested:\n"
      "  deeper: 1\n"
      "  deeper: 2\n"
      "bogus: 1\n");
  f.root.string("name");
  f.root.uint("count", 0, 100);
  f.root.uint("big", 1, 255);
  f.root.boolean("flag");
  f.root.duration("timeout");
  f.root.stringList("list");
  f.root.string("required", true);
  NodeReader nested = f.root.child("nested");
  nested.allowOnly({"deeper"});
  f.root.allowOnly({"name", "count", "big", "flag", "timeout", "list", "nested"});
  const auto& p = f.diag.problems();
  INFO(allProblems(p));
  CHECK(hasProblem(p, "t.yaml:1:7: name: expected a string"));
  CHECK(hasProblem(p, "t.yaml:2:8: count: expected an integer in 0..100"));
  CHECK(hasProblem(p, "t.yaml:3:6: big: must be in 1..255, got 300"));
  CHECK(hasProblem(p, "t.yaml:4:7: flag: expected true or false"));
  CHECK(hasProblem(p, "t.yaml:5:10: timeout: expected a duration like 5s"));
  CHECK(hasProblem(p, "t.yaml:6:7: list: expected a list of strings"));
  CHECK(hasProblem(p, "t.yaml:1:1: required: missing required field"));
  CHECK(hasProblem(p, "t.yaml:9:3: nested.deeper: duplicate field"));
  CHECK(hasProblem(p,
                   "t.yaml:10:1: bogus: unknown field (expected one of: name, count, big, flag, "
                   "timeout, list, nested)"));
  CHECK(p.size() == 9);
}

TEST_CASE("NodeReader expands environment variables in strings", "[config][reader][env]") {
  ScopedEnv set("H2GATE_TEST_SECRET", "s3cr3t");
  ScopedEnv unset("H2GATE_TEST_UNSET", std::nullopt);
  NodeReaderFixture f(
      "a: ${H2GATE_TEST_SECRET}\n"
      "b: \"${H2GATE_TEST_SECRET}:${H2GATE_TEST_UNSET}\"\n"
      "c: [x, \"${H2GATE_TEST_UNSET}\"]\n");
  CHECK(f.root.string("a") == "s3cr3t");
  CHECK_FALSE(f.root.string("b").has_value());
  CHECK_FALSE(f.root.stringList("c").has_value());
  const auto& p = f.diag.problems();
  INFO(allProblems(p));
  CHECK(hasProblem(p, "t.yaml:2:4: b: environment variable H2GATE_TEST_UNSET is not set"));
  CHECK(hasProblem(p, "t.yaml:3:8: c[1]: environment variable H2GATE_TEST_UNSET is not set"));
  CHECK(allProblems(p).find("s3cr3t") == std::string::npos);
}

TEST_CASE("NodeReader checks @type and enums", "[config][reader]") {
  NodeReaderFixture f(
      "typed: {\"@type\": type.googleapis.com/wrong.Type}\n"
      "right: {\"@type\": type.googleapis.com/right.Type}\n"
      "mode: MAYBE\n");
  f.root.child("typed").expectType("type.googleapis.com/right.Type");
  f.root.child("right").expectType("type.googleapis.com/right.Type");
  CHECK(f.root.choice("mode", {"ON", "OFF"}) == std::nullopt);
  const auto& p = f.diag.problems();
  INFO(allProblems(p));
  CHECK(hasProblem(p,
                   "t.yaml:1:18: typed.@type: expected type.googleapis.com/right.Type, got "
                   "'type.googleapis.com/wrong.Type'"));
  CHECK(hasProblem(p, "t.yaml:3:7: mode: expected one of ON, OFF, got 'MAYBE'"));
  CHECK(p.size() == 2);
}

TEST_CASE("NodeReader expands enums but quotes them unexpanded", "[config][reader][env]") {
  ScopedEnv mode("H2GATE_TEST_MODE", "ON");
  ScopedEnv secret("H2GATE_TEST_SECRET", "s3cr3t");
  NodeReaderFixture f(
      "a: ${H2GATE_TEST_MODE}\n"
      "b: ${H2GATE_TEST_SECRET}\n");
  CHECK(f.root.choice("a", {"ON", "OFF"}) == "ON");
  CHECK_FALSE(f.root.choice("b", {"ON", "OFF"}).has_value());
  CHECK(allProblems(f.diag.problems()) ==
        "t.yaml:2:4: b: expected one of ON, OFF, got '${H2GATE_TEST_SECRET}'\n");
}

TEST_CASE("NodeReader points null values at their key", "[config][reader]") {
  NodeReaderFixture f(
      "outer:\n"
      "  inner:\n"
      "other: 1\n");
  NodeReader inner = f.root.child("outer").child("inner");
  inner.string("x", true);
  f.root.child("absent").string("y", true);
  const auto& p = f.diag.problems();
  INFO(allProblems(p));
  CHECK(hasProblem(p, "t.yaml:2:3: outer.inner.x: missing required field"));
  CHECK(hasProblem(p, "t.yaml:1:1: absent.y: missing required field"));
}

TEST_CASE("Problem::str omits what is unknown", "[config]") {
  CHECK(Problem{Mark{"f.yaml", 3, 4}, "a.b", "bad"}.str() == "f.yaml:3:4: a.b: bad");
  CHECK(Problem{Mark{"f.yaml", 0, 0}, "a.b", "bad"}.str() == "f.yaml: a.b: bad");
  CHECK(Problem{Mark{"", 0, 0}, "", "bad"}.str() == "bad");
  CHECK(Problem{Mark{"", 0, 0}, "a", "bad"}.str() == "a: bad");
}

TEST_CASE("escapeControls: safe to print, UTF-8 text kept", "[config][reader]") {
  CHECK(escapeControls("plain text: ok") == "plain text: ok");
  CHECK(escapeControls("tab\there\nline\rret") == "tab\\there\\nline\\rret");
  CHECK(escapeControls(std::string("nul\0byte", 8)) == "nul\\x00byte");
  CHECK(escapeControls("\x1b[31mred\x7f") == "\\x1b[31mred\\x7f");
  CHECK(escapeControls("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") ==
        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  CHECK(escapeControls("csi\xc2\x9b"
                       "2J") == "csi\\u009b2J");            // C1 control U+009B
  CHECK(escapeControls("\xc2\xa0nbsp") == "\xc2\xa0nbsp");  // U+00A0 is text
  CHECK(escapeControls("bad \xff\xfe \xc3") == "bad \\xff\\xfe \\xc3");
  CHECK(escapeControls("overlong \xc0\xaf \xe0\x80\xaf") == "overlong \\xc0\\xaf \\xe0\\x80\\xaf");
  CHECK(escapeControls("surrogate \xed\xa0\x80") == "surrogate \\xed\\xa0\\x80");
}
