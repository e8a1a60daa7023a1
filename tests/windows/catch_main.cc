// Catch2's main for the Windows test .exe (tests/windows/CMakeLists.txt).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
