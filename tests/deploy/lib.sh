# shellcheck shell=bash
# What tests/deploy/check_{debian,container,package}.sh share: their messages
# and a temporary directory removed at exit with whatever each check
# registered in CLEANUP (commands, run in order, their failures ignored).
# The caller sets CHECK_NAME (the prefix of its messages) and sources this file.

log() { printf '%s: %s\n' "$CHECK_NAME" "$*"; }
fail() {
  printf '%s: FAIL: %s\n' "$CHECK_NAME" "$*" >&2
  exit 1
}
# exit 77: tests/run.sh reports the stage as skipped, with the reason.
skip() {
  printf '%s: SKIP: %s\n' "$CHECK_NAME" "$*"
  exit 77
}

TMP=$(mktemp -d)
CLEANUP=()
cleanup() {
  local c
  for c in "${CLEANUP[@]}"; do eval "$c" >/dev/null 2>&1 || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT
