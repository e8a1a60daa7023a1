# shellcheck shell=bash disable=SC2034  # the variables are for the sourcing script
# Sourced by package.sh (the zip) and msi.sh (the MSI): what both ship and
# how they find it. Expects TOOL (the script's name for messages), and
# BUILD_DIR / OUT_DIR as the scripts' $1 and $2. Sets ROOT, BUILD, OUT, EXE
# and VERSION (the CMake project version), and defines stage_release_files.
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." || exit 2
ROOT=$PWD
BUILD=$(readlink -f "${BUILD_DIR:-build-windows}")
OUT=$(readlink -f "${OUT_DIR:-$BUILD}")
EXE=$BUILD/h2gate.exe
[[ -f $EXE ]] || {
  echo "$TOOL: $EXE not found: build it with tests/windows/run.sh" >&2
  exit 2
}
VERSION=$(sed -n 's/^project(h2gate VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")

# stage_release_files DIR: h2gate.exe, h2gate.yaml (the default
# configuration) and README-windows.txt into DIR, the text files with
# Windows line ends (Notepad).
stage_release_files() {
  cp "$EXE" "$1/h2gate.exe"
  sed 's/$/\r/' "$ROOT/config/examples/default.yaml" >"$1/h2gate.yaml"
  sed 's/$/\r/' "$ROOT/deploy/windows/README-windows.txt" >"$1/README-windows.txt"
}
