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
TOOL=package BUILD_DIR=${1:-} OUT_DIR=${2:-}
# shellcheck source=deploy/windows/release_files.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/release_files.sh"
command -v zip >/dev/null || {
  echo "package: zip not found (Debian: zip)" >&2
  exit 3
}
NAME=h2gate-$VERSION-windows-x86_64
STAGE=$(mktemp -d "${TMPDIR:-/tmp}/h2gate-package.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/$NAME"
stage_release_files "$STAGE/$NAME"
mkdir -p "$OUT"
rm -f "$OUT/$NAME.zip"
(cd "$STAGE" && zip -q -r -X "$OUT/$NAME.zip" "$NAME")
echo "$OUT/$NAME.zip"
