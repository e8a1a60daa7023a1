# CMake toolchain: cross-compile h2gate for 64-bit Windows with Debian's mingw-w64
# (posix threads) and run what it builds under wine (wine64), so ctest can run the
# Windows .exe tests on Linux. The same top-level CMakeLists.txt as the Linux build:
#
#   deploy/windows/build-deps.sh        # OpenSSL, nghttp2, yaml-cpp, prometheus-cpp
#   cmake -S . -B build-windows -G Ninja --toolchain cmake/mingw-w64.cmake
#
# Its find_package(OpenSSL / yaml-cpp / prometheus-cpp) and pkg_check_modules(libnghttp2)
# find the static libraries build-deps.sh built, in its sysroot: the one given as
# -DH2GATE_WIN_SYSROOT=DIR (or $H2GATE_WIN_SYSROOT), else the one build-deps.sh
# --print-sysroot names for this tree's script and the installed Linux versions.
# The sysroot also links to Debian's Asio headers. llhttp's C sources: on Debian 12
# those of node-llhttp, as on Linux; on Debian 13, which has llhttp only as a library,
# the sysroot's copy of Debian 12's (deploy/windows/build-deps.sh says why).
# tests/windows/run.sh does all of this.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(H2GATE_MINGW_TRIPLE x86_64-w64-mingw32)

# The posix thread model: with it std::thread and std::mutex work (GCC 12's win32
# model lacks them); Debian's unsuffixed names point to the win32 model.
find_program(CMAKE_C_COMPILER NAMES ${H2GATE_MINGW_TRIPLE}-gcc-posix REQUIRED)
find_program(CMAKE_CXX_COMPILER NAMES ${H2GATE_MINGW_TRIPLE}-g++-posix REQUIRED)
find_program(CMAKE_RC_COMPILER NAMES ${H2GATE_MINGW_TRIPLE}-windres)

if(NOT H2GATE_WIN_SYSROOT AND DEFINED ENV{H2GATE_WIN_SYSROOT})
  set(H2GATE_WIN_SYSROOT "$ENV{H2GATE_WIN_SYSROOT}")
endif()
if(NOT H2GATE_WIN_SYSROOT)
  # Not cached: a new script or new library versions name another sysroot.
  execute_process(
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/../deploy/windows/build-deps.sh --print-sysroot
    OUTPUT_VARIABLE H2GATE_WIN_SYSROOT ERROR_VARIABLE _h2gate_err
    RESULT_VARIABLE _h2gate_rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _h2gate_rc EQUAL 0)
    message(FATAL_ERROR "The Windows libraries are not built: ${_h2gate_err}"
      "Build them with deploy/windows/build-deps.sh (minutes, once), or pass "
      "-DH2GATE_WIN_SYSROOT=DIR.")
  endif()
endif()
if(NOT EXISTS "${H2GATE_WIN_SYSROOT}/MANIFEST")
  message(FATAL_ERROR "H2GATE_WIN_SYSROOT=${H2GATE_WIN_SYSROOT} is not a sysroot of "
    "deploy/windows/build-deps.sh (no MANIFEST)")
endif()
# try_compile projects read this file again: hand them the sysroot.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES H2GATE_WIN_SYSROOT)
# llhttp's C sources in the sysroot (Debian 13): the top-level CMakeLists.txt builds them.
if(EXISTS "${H2GATE_WIN_SYSROOT}/src/llhttp/llhttp.c")
  set(LLHTTP_SOURCE_DIR "${H2GATE_WIN_SYSROOT}/src/llhttp" CACHE PATH "llhttp C sources" FORCE)
  set(LLHTTP_INCLUDE_DIR "${H2GATE_WIN_SYSROOT}/include/llhttp" CACHE PATH "llhttp header" FORCE)
endif()

# Headers and libraries from the mingw runtime and the sysroot only, never the
# host's /usr/include (its libc headers would shadow mingw's).
set(CMAKE_FIND_ROOT_PATH /usr/${H2GATE_MINGW_TRIPLE} ${H2GATE_WIN_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config reads the sysroot's .pc files only (they locate themselves with
# ${pcfiledir}); FindOpenSSL takes the static libraries and adds ws2_32, crypt32.
set(ENV{PKG_CONFIG_LIBDIR} "${H2GATE_WIN_SYSROOT}/lib/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
unset(ENV{PKG_CONFIG_SYSROOT_DIR})
set(OPENSSL_USE_STATIC_LIBS TRUE)

# Link libgcc, libstdc++ and winpthread statically: the .exe then needs only
# system DLLs (kernel32, ws2_32, ...) and runs under wine without DLL hunting.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")

# ctest (and add_custom_command on targets) run .exe files through wine.
# Debian's wine64 package alone (no `wine` wrapper) has only /usr/lib/wine/wine64.
find_program(H2GATE_WINE NAMES wine64 wine PATHS /usr/lib/wine /usr/lib64/wine)
if(H2GATE_WINE)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${H2GATE_WINE})
endif()
