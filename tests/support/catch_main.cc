// main() of the test programs: Catch2 v3 (Debian 13) has the session in a header of
// its own; Catch2 v2 (Debian 12) defines main() in its single header on request.
#if __has_include(<catch2/catch_session.hpp>)
#include <catch2/catch_session.hpp>

int main(int argc, char* argv[]) {
  return Catch::Session().run(argc, argv);
}
#else
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#endif
