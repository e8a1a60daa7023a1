#!/usr/bin/env bash
# Tests of check_container.sh's own logic that need no container (CTest
# container_script, -L deploy; seconds):
#   - the Debian mirror it picks (debian_mirror, via `check_container.sh mirror`)
#     from deb822 .sources files, from one-line sources.list entries (with
#     [options], comments, other suites; of Debian 12 or 13), and with neither
#     (deb.debian.org);
#   - `check_container.sh image` where podman cannot store an image or cannot run a
#     container (a fake podman first in PATH, answering as podman does inside a
#     container whose root is overlayfs): exit 77 with podman's reason, before
#     mmdebstrap runs.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SCRIPT=$HERE/check_container.sh
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0

ok() { printf 'check_container_test: ok: %s\n' "$*"; }
bad() {
  printf 'check_container_test: FAIL: %s\n' "$*" >&2
  failures=$((failures + 1))
}

# mirror_is NAME EXPECTED: with the apt dir $TMP/NAME.
mirror_is() {
  local got rc=0
  got=$(env -u H2GATE_DEBIAN_MIRROR H2GATE_APT_DIR="$TMP/$1" bash "$SCRIPT" mirror 2>&1) || rc=$?
  if ((rc == 0)) && [[ $got == "$2" ]]; then
    ok "mirror ($1): $got"
  else
    bad "mirror ($1): expected '$2', got '$got' (exit $rc)"
  fi
}

# --- debian_mirror ---------------------------------------------------------------
mkdir -p "$TMP/classic/sources.list.d"
cat >"$TMP/classic/sources.list" <<'EOF'
# the shape of a pristine mmdebstrap or debootstrap system
deb-src http://source.example/debian bookworm main
deb http://security.example/debian-security bookworm-security main
deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://mirror.example/debian bookworm main contrib # trailing comment
deb http://later.example/debian bookworm main
EOF
mirror_is classic http://mirror.example/debian

mkdir -p "$TMP/classic-d/sources.list.d"
echo 'deb http://listd.example/debian bookworm main' >"$TMP/classic-d/sources.list.d/debian.list"
mirror_is classic-d http://listd.example/debian

mkdir -p "$TMP/deb822/sources.list.d"
cat >"$TMP/deb822/sources.list.d/debian.sources" <<'EOF'
Types: deb
URIs: http://security.example/debian-security
Suites: bookworm-security
Components: main

Types: deb
URIs: http://deb822.example/debian
Suites: bookworm bookworm-updates
Components: main
EOF
echo 'deb http://ignored.example/debian bookworm main' >"$TMP/deb822/sources.list"
mirror_is deb822 http://deb822.example/debian

mkdir -p "$TMP/none"
mirror_is none http://deb.debian.org/debian
mkdir -p "$TMP/trixie"
printf 'deb http://security.example/debian-security trixie-security main\ndeb http://trixie.example/debian trixie main\n' \
  >"$TMP/trixie/sources.list"
mirror_is trixie http://trixie.example/debian
mkdir -p "$TMP/other-suite"
echo 'deb http://sid.example/debian sid main' >"$TMP/other-suite/sources.list"
mirror_is other-suite http://deb.debian.org/debian

# --- podman that cannot store images or run containers ------------------------------
# fake_podman DIR IMPORT_EXIT RUN_EXIT: podman, runc and mmdebstrap stand-ins; podman
# answers import/run like podman on overlayfs does; mmdebstrap leaves a mark.
fake_podman() {
  local dir=$1
  mkdir -p "$dir"
  cat >"$dir/podman" <<EOF
#!/usr/bin/env bash
case \$1 in
  info) echo "host: {arch: amd64}" ;;
  import)
    if (($2)); then
      echo "Error: 'overlay' is not supported over overlayfs, a mount_program is required: backing file system is unsupported for this graph driver" >&2
      exit $2
    fi
    echo sha256:0 ;;
  run)
    if (($3)); then
      echo "Error: runc: runc create failed: unable to start container process: no cgroup mount found" >&2
      exit $3
    fi ;;
esac
exit 0
EOF
  printf '#!/bin/sh\nexit 0\n' >"$dir/runc"
  printf '#!/bin/sh\ntouch "%s/mmdebstrap-ran"\nexit 1\n' "$dir" >"$dir/mmdebstrap"
  chmod +x "$dir/podman" "$dir/runc" "$dir/mmdebstrap"
}

# skips_with DIR REASON
skips_with() {
  local dir=$1 reason=$2 out rc=0
  out=$(PATH="$dir:$PATH" bash "$SCRIPT" image 2>&1) || rc=$?
  if ((rc == 77)) && grep -qxF "check_container: SKIP: $reason" <<<"$out" &&
    [[ ! -e $dir/mmdebstrap-ran ]]; then
    ok "image: skipped (77): $reason"
  else
    bad "image with $(basename "$dir"): expected exit 77 and 'SKIP: $reason' before mmdebstrap, got exit $rc:"
    sed 's/^/    /' <<<"$out" >&2
  fi
}

if [[ $(id -u) -ne 0 ]]; then
  ok "image: not root, so check_container.sh skips before podman (the podman probe is not reached)"
elif ! command -v curl >/dev/null 2>&1; then
  ok "image: no curl, so check_container.sh skips before podman"
else
  fake_podman "$TMP/no-storage" 125 0
  skips_with "$TMP/no-storage" "podman cannot store an image here: Error: 'overlay' is not supported over overlayfs, a mount_program is required: backing file system is unsupported for this graph driver"
  fake_podman "$TMP/no-run" 0 126
  skips_with "$TMP/no-run" "podman cannot run a container here: Error: runc: runc create failed: unable to start container process: no cgroup mount found"
fi

if ((failures)); then
  echo "check_container_test: $failures failure(s)" >&2
  exit 1
fi
echo "check_container_test: all passed"
