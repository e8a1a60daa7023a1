#!/usr/bin/env bash
# The Windows cross build in one command: configures tests/windows/ with the
# mingw-w64 toolchain (cmake/mingw-w64.cmake), builds the send-buffer tuner, its
# WinSock backend and their Catch2 tests into one .exe, the network monitor and
# its iphlpapi watcher into another, the SSPI backend of proxy authentication
# into a third, and runs them under wine with `ctest -L windows`.
#
#   tests/windows/run.sh [BUILD_DIR]   default: build-windows/ at the repo root
#
# The wine prefix lives in BUILD_DIR/wineprefix (~700 MB; the first run creates it
# in ~7 s). Needs g++-mingw-w64-x86-64 and wine64: deploy/install-deps.sh --test.
# Exit status: 0 passed, 1 a test failed, 2 configure or build failed,
# 3 mingw-w64, wine, cmake or Catch2 missing.
set -euo pipefail

cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.."
ROOT=$PWD
BUILD=${1:-build-windows}

log() { printf 'windows: %s\n' "$*" >&2; }

missing=()
command -v cmake >/dev/null 2>&1 || missing+=("cmake (Debian: cmake)")
if ! command -v x86_64-w64-mingw32-g++-posix >/dev/null 2>&1 &&
  ! command -v x86_64-w64-mingw32-g++ >/dev/null 2>&1; then
  missing+=("the mingw-w64 cross compiler x86_64-w64-mingw32-g++ (Debian: g++-mingw-w64-x86-64)")
fi
# Debian's wine64 without the `wine` package has no command in PATH.
WINE=$(command -v wine64 || command -v wine || true)
[[ -z $WINE && -x /usr/lib/wine/wine64 ]] && WINE=/usr/lib/wine/wine64
[[ -n $WINE ]] || missing+=("wine (Debian: wine64)")
[[ -f /usr/include/catch2/catch.hpp ]] || missing+=("the Catch2 v2 header (Debian: catch2)")
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
# Our prefix's wineserver lingers a few seconds after the test; stop it so it
# holds no pipe of the caller open.
WINESERVER=$(command -v wineserver || true)
[[ -z $WINESERVER && -x /usr/lib/wine/wineserver ]] && WINESERVER=/usr/lib/wine/wineserver
stop_wineserver() { [[ -z $WINESERVER ]] || "$WINESERVER" -k >/dev/null 2>&1 || true; }
trap stop_wineserver EXIT

generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
log "mingw: $(x86_64-w64-mingw32-g++-posix --version 2>/dev/null | head -n1 || true)"
log "wine: $WINE ($("$WINE" --version 2>/dev/null || echo '?')), WINEPREFIX=$WINEPREFIX"

if ! cmake -S "$ROOT/tests/windows" -B "$BUILD" "${generator[@]}" \
  -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/mingw-w64.cmake" -DH2GATE_WINEPREFIX="$WINEPREFIX" ||
  ! cmake --build "$BUILD"; then
  log "configure or build failed"
  exit 2
fi

# -V: Catch2's summary (assertions, test cases) shows even when everything passes.
if ! ctest --test-dir "$BUILD" -L windows --no-tests=error --output-on-failure -V; then
  log "FAILED under wine"
  exit 1
fi
log "passed under wine"
