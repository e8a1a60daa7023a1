#!/usr/bin/env bash
# The Windows cross build in one command:
#  1. deploy/windows/build-deps.sh: the Windows builds of OpenSSL, nghttp2, yaml-cpp
#     and prometheus-cpp from Debian's sources, into a sysroot cached outside the
#     tree (minutes on a new machine, then well under a second);
#  2. the top-level CMakeLists.txt configured with cmake/mingw-w64.cmake and that
#     sysroot; builds the Windows tests (tests/windows/CMakeLists.txt), among
#     them the SSPI backend of proxy authentication;
#  3. runs them under wine with `ctest -L windows`.
#
#   tests/windows/run.sh [BUILD_DIR]   default: build-windows/ at the repo root
#   H2GATE_WINDOWS_BUILD_ONLY=1        steps 1 and 2 only
#   H2GATE_UNITY=OFF                   no unity build (CMakeLists.txt H2GATE_UNITY; ON here)
#
# The wine prefix lives in BUILD_DIR/wineprefix (~700 MB; the first run creates it
# in ~7 s). Needs the mingw-w64 posix compilers, wine64, dpkg-dev and the test peers:
# deploy/install-deps.sh --test.
# Exit status: 0 passed, 1 a test failed, 2 dependencies, configure or build failed,
# 3 mingw-w64, wine, cmake or Catch2 missing.
set -euo pipefail

cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.."
ROOT=$PWD
BUILD=${1:-build-windows}

log() { printf 'windows: %s\n' "$*" >&2; }

missing=()
command -v cmake >/dev/null 2>&1 || missing+=("cmake (Debian: cmake)")
command -v x86_64-w64-mingw32-g++-posix >/dev/null 2>&1 ||
  missing+=("the mingw-w64 cross compiler x86_64-w64-mingw32-g++-posix (Debian: g++-mingw-w64-x86-64-posix)")
# Debian's wine64 without the `wine` package has no command in PATH.
WINE=$(command -v wine64 || command -v wine || true)
[[ -z $WINE && -x /usr/lib/wine/wine64 ]] && WINE=/usr/lib/wine/wine64
[[ -n $WINE ]] || missing+=("wine (Debian: wine64)")
# Catch2: v2's header (Debian 12), or v3 (Debian 13), whose source build-deps.sh
# builds for Windows at the installed version.
if [[ ! -f /usr/include/catch2/catch.hpp && ! -f /usr/include/catch2/catch_all.hpp ]]; then
  missing+=("Catch2 (Debian 12: catch2; Debian 13: libcatch2-dev)")
fi
if ((${#missing[@]})); then
  log "cannot build or run the Windows tests, missing:"
  printf '  %s\n' "${missing[@]}" >&2
  log "install them with: deploy/install-deps.sh --test"
  exit 3
fi

mkdir -p "$BUILD"
BUILD=$(readlink -f "$BUILD")
export WINEPREFIX=$BUILD/wineprefix
export WINEDEBUG=-all
# Where XDG_RUNTIME_DIR is unset (a container, a CI job), wine 10's Wayland
# client writes "error: XDG_RUNTIME_DIR is invalid or not set in the
# environment." into the stderr of every program it starts, which the tests
# read; a private, empty one keeps that stderr the program's own.
if [[ -z ${XDG_RUNTIME_DIR:-} || ! -d $XDG_RUNTIME_DIR ]]; then
  export XDG_RUNTIME_DIR=$BUILD/xdg-runtime
  mkdir -p -m 700 "$XDG_RUNTIME_DIR"
fi
# Our prefix's wineserver lingers a few seconds after the test; stop it so it
# holds no pipe of the caller open.
WINESERVER=$(command -v wineserver || true)
[[ -z $WINESERVER && -x /usr/lib/wine/wineserver ]] && WINESERVER=/usr/lib/wine/wineserver
stop_wineserver() { [[ -z $WINESERVER ]] || "$WINESERVER" -k >/dev/null 2>&1 || true; }
trap stop_wineserver EXIT

log "mingw: $(x86_64-w64-mingw32-g++-posix --version 2>/dev/null | head -n1 || true)"
log "wine: $WINE ($("$WINE" --version 2>/dev/null || echo '?')), WINEPREFIX=$WINEPREFIX"

t0=$SECONDS
rc=0
SYSROOT=$(deploy/windows/build-deps.sh) || rc=$?
case $rc in
  0) log "dependencies: $SYSROOT ($((SECONDS - t0)) s)" ;;
  3)
    log "dependencies cannot be built here (above)"
    exit 3
    ;;
  *)
    log "building the dependencies failed (above)"
    exit 2
    ;;
esac

# A build tree of another source directory (tests/windows/ was a project of its own
# before): start it again, keeping the wine prefix.
if [[ -f $BUILD/CMakeCache.txt ]] && ! grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$ROOT" "$BUILD/CMakeCache.txt"; then
  log "$BUILD was configured for another source directory: reconfiguring from scratch"
  rm -rf "$BUILD/CMakeCache.txt" "$BUILD/CMakeFiles"
fi

generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
TARGETS=(h2gate h2gate_unit_tests h2gate_windows_tests h2gate_windows_netmon_tests h2gate_windows_pac_tests
  h2gate_windows_auth_tests h2gate_windows_deps_test)
t0=$SECONDS
if ! cmake -S "$ROOT" -B "$BUILD" "${generator[@]}" --toolchain "$ROOT/cmake/mingw-w64.cmake" \
  -DH2GATE_WIN_SYSROOT="$SYSROOT" -DCMAKE_BUILD_TYPE=Release -DH2GATE_WERROR=ON -DH2GATE_TESTS=ON \
  -DH2GATE_UNITY="${H2GATE_UNITY:-ON}" -DH2GATE_WINEPREFIX="$WINEPREFIX" ||
  ! cmake --build "$BUILD" --target "${TARGETS[@]}"; then
  log "configure or build failed"
  exit 2
fi
log "configured and built in $((SECONDS - t0)) s"
# tests/run.sh builds ahead, in the background, and runs the tests later.
if [[ ${H2GATE_WINDOWS_BUILD_ONLY:-} == 1 ]]; then
  log "built; no tests run (H2GATE_WINDOWS_BUILD_ONLY=1)"
  exit 0
fi

# One wine session for all the tests, started here with no pipe of ctest's: a
# persistent wineserver and the session's own processes (services.exe,
# explorer.exe, ...; wineboot starts them). Started by the first test instead,
# they inherit that test's output pipe, and anything that keeps the session
# alive after the test (a stray process of its own) keeps ctest waiting on the
# pipe until the test's timeout. stop_wineserver ends it all at exit.
# wineserver refuses a prefix directory that does not exist yet ("chdir to
# ...: No such file or directory"): on a brand-new machine the session was
# then wineboot's own server, which ends 3 s after its last client, and a
# test that started just then died at once ("wine client error:0: recvmsg:
# Connection reset by peer"). The directory first; wineboot fills it.
if [[ -n $WINESERVER ]]; then
  mkdir -p "$WINEPREFIX"
  # Its output to a file: the server it leaves running would hold a pipe open.
  ws_rc=0
  "$WINESERVER" -p </dev/null >"$BUILD/wineserver.log" 2>&1 || ws_rc=$?
  ((ws_rc == 0)) ||
    log "warning: no persistent wineserver for $WINEPREFIX (exit code $ws_rc): $(cat "$BUILD/wineserver.log")"
  "$WINE" wineboot </dev/null >/dev/null 2>&1 || true
fi
# -V: Catch2's summary (assertions, test cases) and deps_test.sh's checks show even
# when everything passes.
if ! ctest --test-dir "$BUILD" -L windows --no-tests=error --output-on-failure -V; then
  log "FAILED under wine"
  exit 1
fi
# h2gate.exe against the real Linux peers: a test of the Linux build's
# integration suite (tests/integration/windows_exe_test.cc; its fixtures
# start nghttpx, squid and nginx), run when that build exists (tests/run.sh's
# release stage makes build/ before this stage).
LINUX_BUILD=${H2GATE_LINUX_BUILD:-$ROOT/build}
if [[ -x $LINUX_BUILD/tests/h2gate_integration_tests ]]; then
  if ! H2GATE_WINDOWS_EXE=$BUILD/h2gate.exe H2GATE_WINE=$WINE \
    "$LINUX_BUILD/tests/h2gate_integration_tests" "[windows-exe]"; then
    log "FAILED: h2gate.exe under wine against the real peers (windows_exe)"
    exit 1
  fi
else
  log "windows_exe skipped: no Linux build at $LINUX_BUILD (tests/integration/windows_exe_test.cc)"
fi
log "passed under wine"
