// <catch2/catch.hpp>, Catch2 v2's single header, for a build against Catch2 v3
// (Debian 13's libcatch2-dev). tests/CMakeLists.txt puts this directory on the
// include path only when it finds Catch2 v3, so the tests stay one copy written
// against v2: the v3 headers of what they use, and the v2 names v3 renamed or
// moved. With Catch2 v2 (Debian 12) the real single header is used instead.
#pragma once

#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators_all.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <string>

namespace Catch {

// v2 made the string matchers visible in Catch (using namespace Matchers).
using Matchers::EndsWith;
using Matchers::StartsWith;

// v2's Contains(string) is v3's ContainsSubstring (v3's Contains is for ranges).
inline Matchers::StringContainsMatcher Contains(const std::string& text,
                                                CaseSensitive sensitivity = CaseSensitive::Yes) {
  return Matchers::ContainsSubstring(text, sensitivity);
}

}  // namespace Catch

// v2 declared Approx in the global namespace.
using Catch::Approx;
