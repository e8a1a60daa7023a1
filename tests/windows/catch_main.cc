// Catch2's main for the Windows test .exe (tests/windows/CMakeLists.txt): v3's
// session (Debian 13: the sysroot's library), or the one v2's single header
// defines on request (Debian 12).
#if __has_include(<catch2/catch_session.hpp>)
#include <catch2/catch_session.hpp>

int main(int argc, char* argv[]) {
  return Catch::Session().run(argc, argv);
}
#else
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#endif
