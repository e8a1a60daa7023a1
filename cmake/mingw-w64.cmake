# CMake toolchain: cross-compile for 64-bit Windows with Debian's mingw-w64
# (g++-mingw-w64-x86-64) and run what it builds under wine (wine64), so ctest
# can run Windows .exe tests on Linux. Used by tests/windows/ (run.sh).
#
#   cmake -S tests/windows -B build-windows -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64.cmake
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(H2GATE_MINGW_TRIPLE x86_64-w64-mingw32)

# The posix thread model first: with it std::thread and std::mutex work (GCC 12's
# win32 model lacks them), and Debian's plain names point to the win32 model.
find_program(CMAKE_C_COMPILER NAMES ${H2GATE_MINGW_TRIPLE}-gcc-posix ${H2GATE_MINGW_TRIPLE}-gcc
  REQUIRED)
find_program(CMAKE_CXX_COMPILER NAMES ${H2GATE_MINGW_TRIPLE}-g++-posix ${H2GATE_MINGW_TRIPLE}-g++
  REQUIRED)
find_program(CMAKE_RC_COMPILER NAMES ${H2GATE_MINGW_TRIPLE}-windres)

# Headers and libraries from the mingw sysroot only, never the host's /usr/include.
set(CMAKE_FIND_ROOT_PATH /usr/${H2GATE_MINGW_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Link libgcc, libstdc++ and winpthread statically: the .exe then needs only
# system DLLs (kernel32, ws2_32, ...) and runs under wine without DLL hunting.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")

# ctest (and add_custom_command on targets) run .exe files through wine.
# Debian's wine64 package alone (no `wine` wrapper) has only /usr/lib/wine/wine64.
find_program(H2GATE_WINE NAMES wine64 wine PATHS /usr/lib/wine /usr/lib64/wine)
if(H2GATE_WINE)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${H2GATE_WINE})
endif()
