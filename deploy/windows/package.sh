#!/usr/bin/env bash
# The Windows release zip in one command: h2gate.exe (static, system DLLs
# only), the default configuration and README-windows.txt, in
# h2gate-<version>-windows-x86_64.zip.
#
#   deploy/windows/package.sh [BUILD_DIR] [OUT_DIR]
#     BUILD_DIR: the cross build (default build-windows/, built by
#                tests/windows/run.sh or `cmake --toolchain cmake/mingw-w64.cmake`)
#     OUT_DIR:   where the zip goes (default BUILD_DIR)
# Prints the zip's path. Needs zip (Debian: zip).
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.."
ROOT=$PWD
BUILD=$(readlink -f "${1:-build-windows}")
OUT=$(readlink -f "${2:-$BUILD}")
EXE=$BUILD/h2gate.exe
[[ -f $EXE ]] || {
  echo "package: $EXE not found: build it with tests/windows/run.sh" >&2
  exit 2
}
command -v zip >/dev/null || {
  echo "package: zip not found (Debian: zip)" >&2
  exit 3
}
VERSION=$(sed -n 's/^project(h2gate VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
NAME=h2gate-$VERSION-windows-x86_64
STAGE=$(mktemp -d "${TMPDIR:-/tmp}/h2gate-package.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/$NAME"
cp "$EXE" "$STAGE/$NAME/h2gate.exe"
# Windows line ends for the text files (Notepad).
sed 's/$/\r/' "$ROOT/config/examples/default.yaml" >"$STAGE/$NAME/h2gate.yaml"
sed 's/$/\r/' "$ROOT/deploy/windows/README-windows.txt" >"$STAGE/$NAME/README-windows.txt"
mkdir -p "$OUT"
rm -f "$OUT/$NAME.zip"
(cd "$STAGE" && zip -q -r -X "$OUT/$NAME.zip" "$NAME")
echo "$OUT/$NAME.zip"
