#!/usr/bin/env bash
# The release zip (deploy/windows/package.sh): built, unpacked into a fresh
# directory, and the unpacked h2gate.exe runs under wine: `--version`, and
# `--validate -c h2gate.yaml` accepts the shipped configuration.
#   ctest: windows_package (label windows)
#
#   tests/windows/package_test.sh BUILD_DIR
set -euo pipefail
ROOT=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../..
BUILD=$1
WINE=${H2GATE_WINE:-$(command -v wine64 || command -v wine || echo /usr/lib/wine/wine64)}
export WINEDEBUG=-all
fail() {
  echo "FAIL: $*"
  exit 1
}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/h2gate-package-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
zip=$("$ROOT/deploy/windows/package.sh" "$BUILD" "$TMP") || fail "package.sh failed"
# The listing is read once: `unzip | grep -q` under pipefail fails when
# grep stops reading early and unzip gets SIGPIPE.
listing=$(unzip -Z1 "$zip")
echo "ok: $(basename "$zip"): $(tr '\n' ' ' <<<"$listing")"
for f in h2gate.exe h2gate.yaml README-windows.txt; do
  grep -q "/$f\$" <<<"$listing" || fail "the zip lacks $f"
done
mkdir "$TMP/unpacked"
unzip -q "$zip" -d "$TMP/unpacked"
dir=$(echo "$TMP"/unpacked/h2gate-*-windows-x86_64)
cd "$dir"
out=$("$WINE" h2gate.exe --version 2>&1 | tr -d '\r')
[[ $out == "h2gate "* ]] || fail "the unpacked h2gate.exe --version printed: $out"
echo "ok: unpacked h2gate.exe --version: $out"
out=$("$WINE" h2gate.exe --validate -c h2gate.yaml 2>&1 | tr -d '\r') || fail "--validate of the shipped h2gate.yaml: $out"
[[ $out == *"h2gate.yaml: OK"* ]] || fail "--validate printed: $out"
echo "ok: the shipped h2gate.yaml validates: $out"
