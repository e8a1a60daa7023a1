#include "config/yaml_guard.h"

#include <string>

#include <catch2/catch.hpp>

using h2gate::config::checkFlowNesting;

TEST_CASE("checkFlowNesting: the bracket that went too deep", "[config][yaml_guard]") {
  auto at = [](const std::string& yaml, int max) -> std::string {
    const auto e = checkFlowNesting(yaml, max);
    if (!e) return "none";
    return std::to_string(e->depth) + "@" + std::to_string(e->line) + ":" +
           std::to_string(e->column);
  };
  CHECK(at("[[[[", 3) == "4@1:4");
  CHECK(at("[[[]]]", 3) == "none");
  CHECK(at("[[[]]][[[]]]", 3) == "none");  // depth goes back down
  CHECK(at("a: {b: [c, {d: [e]}]}", 4) == "none");
  CHECK(at("a: {b: [c, {d: [e]}]}", 3) == "4@1:16");
  CHECK(at("a:\n  b: [[\n     [[x]]]]\n", 3) == "4@3:7");
  CHECK(at("- [[[x]]]\n", 2) == "3@1:5");
  CHECK(at("--- [[[x]]]\n", 2) == "3@1:7");
  CHECK(at("k: &anchor [[[x]]]\n", 2) == "3@1:14");
  CHECK(at("k: !!seq [[[x]]]\n", 2) == "3@1:12");
}

TEST_CASE("checkFlowNesting: brackets that are text do not count", "[config][yaml_guard]") {
  const std::string many(100, '[');
  for (const std::string& yaml : {
           "k: \"" + many + "\"\n",                         // double-quoted
           "k: '" + many + "'\n",                           // single-quoted
           "k: 'it''s " + many + "'\n",                     // '' inside single quotes
           "k: \"a\\\"" + many + "\"\n",                    // \" inside double quotes
           "# " + many + "\n",                              // a comment
           "k: v # " + many + "\n",                         // a trailing comment
           "k: a" + many + "\n",                            // inside a plain scalar
           "k: a " + many + "\n",                           // after a blank in a plain scalar
           "k: |\n  " + many + "\n  " + many + "\nj: 1\n",  // a literal block scalar
           "k: >-\n  " + many + "\n\n  " + many + "\n",     // folded, with a blank line
           "- [a, \"" + many + "\"]\n",                     // quoted inside a flow sequence
           "- {a: '" + many + "'}  # " + many + "\n",
       }) {
    INFO(yaml);
    CHECK_FALSE(checkFlowNesting(yaml, 10));
  }
  // After a block scalar the lexer is back in step.
  CHECK(checkFlowNesting("k: |\n  [[[[\nj: [[[[x]]]]\n", 3)->line == 3);
}
