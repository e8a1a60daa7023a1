#!/usr/bin/env bash
# Checks the Debian package (cmake/packaging.cmake) and its systemd units.
#
#   check_package.sh static BUILD_DIR    seconds (CTest package_static, -L deploy):
#     - cpack -G DEB in BUILD_DIR (a Release build): h2gate_VERSION~debNNuB_ARCH.deb
#     - its control data: the version suffix of this machine's Debian release
#       (cmake/packaging.cmake), Depends computed by dpkg-shlibdeps (the package of
#       every library h2gate links: libssl3 or libssl3t64, libnghttp2-14, ...),
#       /etc/h2gate/h2gate.yaml a conffile, the files in place (the system unit in
#       /lib/systemd/system on Debian 12, /usr/lib/systemd/system from 13), the
#       config valid
#     - lintian (this machine's): no error or warning
#     - systemd-analyze verify on both units; systemd-analyze security --offline on the
#       system unit: prints the exposure score and fails above 2.0
#   check_package.sh install BUILD_DIR|DEB [RELEASE]
#     needs podman + runc, minutes (CTest package_install, -L container): the package
#     (cpack -G DEB in BUILD_DIR, or the .deb DEB, e.g. one built on another release by
#     tests/deploy/check_debian.sh) in the pristine debian:RELEASE image (default: this
#     machine's release; tests/deploy/check_container.sh base RELEASE makes it) with
#     systemd as PID 1 and the host's network:
#     - the package's ~debNN suffix is the container's release (VERSION_ID)
#     - apt-get install ./h2gate_*.deb (dependencies from the archive)
#     - systemctl start h2gate (ports moved to free ones in the conffile): a dynamic
#       user, not root, in mount, user and UTS namespaces of its own with a read-only
#       / and a private /tmp (the unit's sandbox applied, not skipped; the container
#       gets CAP_SYS_ADMIN and CAP_SYS_PTRACE for systemd 257, see install_test);
#       curl fetches 1 MiB through it from a loopback origin
#     - systemctl reload h2gate: the listener moves to the port the edited file names
#     - systemctl stop h2gate with a slow download running: it waits, and the download
#       finishes intact (drain)
#     - the user unit under a real user manager (user@UID.service, started by
#       loginctl enable-linger for a new user): systemctl --user start h2gate copies
#       the conffile to ~/.config/h2gate, h2gate runs as that user, curl fetches 1 MiB
#       through it, systemctl --user stop h2gate
#     - dpkg -r leaves /etc/h2gate/h2gate.yaml, dpkg -P removes it
#     Exit 77 (skipped) with the reason where podman cannot run containers.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ -x /usr/bin/python3 ]]; then PYTHON=${PYTHON:-/usr/bin/python3}; else PYTHON=${PYTHON:-python3}; fi
# systemd-analyze security: the highest exposure score that passes.
MAX_EXPOSURE=${H2GATE_MAX_EXPOSURE:-2.0}

CHECK_NAME=check_package
# log, fail, skip; $TMP and CLEANUP, cleaned at exit
# shellcheck source=tests/deploy/lib.sh
source "$ROOT/tests/deploy/lib.sh"


run() {
  local label=$1
  shift
  if ! "$@" >"$TMP/out" 2>&1; then
    sed 's/^/    /' "$TMP/out" >&2
    fail "$label"
  fi
  log "ok: $label"
}

make_deb() {
  if [[ -f $1 && $1 == *.deb ]]; then
    DEB=$(readlink -f "$1")
    log "ok: the package $(basename "$DEB"), $(stat -c %s "$DEB") bytes"
    return
  fi
  local build
  build=$(cd "$1" && pwd)
  [[ -x $build/h2gate ]] || fail "no $build/h2gate: build first"
  rm -f "$build"/h2gate_*.deb
  (cd "$build" && cpack -G DEB >"$TMP/cpack.log" 2>&1) || {
    cat "$TMP/cpack.log" >&2
    fail "cpack -G DEB in $build"
  }
  DEB=$(ls "$build"/h2gate_*.deb)
  log "ok: cpack -G DEB: $(basename "$DEB"), $(stat -c %s "$DEB") bytes"
}

static_checks() {
  local build=${1:?usage: $0 static BUILD_DIR}
  make_deb "$build"
  # Control data.
  local version version_id depends conffiles
  version=$(dpkg-deb -f "$DEB" Version)
  # shellcheck disable=SC1091 # the machine's
  version_id=$(. /etc/os-release && echo "${VERSION_ID:-}")
  [[ $version == *"~deb${version_id}u"[0-9]* ]] ||
    fail "version $version lacks the suffix ~deb${version_id}uN of this machine's Debian $version_id (cmake/packaging.cmake)"
  log "ok: version $version (Debian $version_id)"
  depends=$(dpkg-deb -f "$DEB" Depends)
  log "Depends: $depends"
  # The package of each library h2gate links (its NEEDED entries, found where the
  # dynamic loader finds them) must be a dependency.
  local lib path pkg needed=0 multiarch
  multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
  mkdir -p "$TMP/root"
  dpkg-deb -x "$DEB" "$TMP/root"
  while read -r lib; do
    pkg=$(dpkg -S "*/$multiarch/$lib" 2>/dev/null | head -n1 | cut -d: -f1)
    [[ -n $pkg ]] || fail "no installed package has $lib, which h2gate links"
    [[ ",$(tr -d ' ' <<<"$depends" | sed 's/([^)]*)//g')," == *",$pkg,"* ]] ||
      fail "Depends lacks $pkg (it has $lib; CPACK_DEBIAN_PACKAGE_SHLIBDEPS): $depends"
    needed=$((needed + 1))
  done < <(objdump -p "$TMP/root/usr/bin/h2gate" | awk '$1 == "NEEDED" { print $2 }')
  ((needed >= 5)) || fail "h2gate links only $needed libraries?"
  conffiles=$(dpkg-deb --ctrl-tarfile "$DEB" | tar -xOf - ./conffiles)
  [[ $conffiles == "/etc/h2gate/h2gate.yaml" ]] || fail "conffiles is '$conffiles'"
  log "ok: Depends computed by dpkg-shlibdeps names the package of each of the $needed libraries h2gate links; conffiles: $conffiles"
  # Debian 12 keeps units in /lib/systemd (cmake/packaging.cmake).
  UNIT=usr/lib/systemd/system/h2gate.service
  ((version_id >= 13)) || UNIT=lib/systemd/system/h2gate.service
  local f
  for f in usr/bin/h2gate etc/h2gate/h2gate.yaml "$UNIT" \
    usr/lib/systemd/user/h2gate.service usr/share/man/man1/h2gate.1.gz \
    usr/share/man/man5/h2gate.yaml.5.gz usr/share/doc/h2gate/copyright; do
    [[ -f $TMP/root/$f ]] || fail "the package has no /$f"
  done
  log "ok: /usr/bin/h2gate, the conffile, both units, both man pages, copyright"
  # The examples the README points at, each valid for the packaged binary
  # (every ${VAR} they read set, as a user would).
  local example n=0 vars=()
  mapfile -t vars < <(grep -oh '\${[A-Za-z_][A-Za-z0-9_]*}' "$ROOT"/config/examples/*.yaml |
    tr -d '${}' | sort -u | sed 's/$/=example/')
  for example in "$ROOT"/config/examples/*.yaml; do
    f=usr/share/doc/h2gate/examples/$(basename "$example")
    [[ -f $TMP/root/$f ]] || fail "the package has no /$f"
    run "/$f is valid" env "${vars[@]}" "$TMP/root/usr/bin/h2gate" --validate -c "$TMP/root/$f"
    n=$((n + 1))
  done
  log "ok: the $n examples in /usr/share/doc/h2gate/examples, each valid"
  run "the packaged config is valid and listens on loopback only" \
    "$TMP/root/usr/bin/h2gate" --validate -c "$TMP/root/etc/h2gate/h2gate.yaml"
  if grep -E 'address: *"?(0\.0\.0\.0|::)"?[,}]' "$TMP/root/etc/h2gate/h2gate.yaml"; then
    fail "the packaged config listens on a wildcard address"
  fi

  # lintian.
  command -v lintian >/dev/null || fail "lintian not installed (deploy/install-deps.sh --test)"
  lintian --fail-on error,warning --display-info "$DEB" >"$TMP/lintian" 2>&1 || {
    cat "$TMP/lintian" >&2
    fail "lintian reports errors or warnings"
  }
  log "ok: lintian $(lintian --version | awk '{print $2}'): no error or warning${TMP:+ ($(grep -c '^[IP]:' "$TMP/lintian" || true) info/pedantic tags)}"
  sed 's/^/    /' "$TMP/lintian"

  # systemd-analyze: the units as installed, with ExecStart's binary where the
  # package put it here.
  command -v systemd-analyze >/dev/null || fail "systemd-analyze not installed (package systemd)"
  local unit
  for unit in "$UNIT" usr/lib/systemd/user/h2gate.service; do
    mkdir -p "$TMP/verify/$(dirname "$unit")"
    sed "s#/usr/bin/h2gate#$TMP/root/usr/bin/h2gate#g" "$TMP/root/$unit" >"$TMP/verify/$unit.tmp"
    mv "$TMP/verify/$unit.tmp" "$TMP/verify/$unit"
    local mode=--system
    [[ $unit == *user* ]] && mode=--user
    # --user needs a runtime directory of its own (none exists for root here).
    mkdir -p "$TMP/xdg"
    chmod 700 "$TMP/xdg"
    if ! XDG_RUNTIME_DIR=$TMP/xdg SYSTEMD_LOG_LEVEL=warning systemd-analyze $mode verify --man=no "$TMP/verify/$unit" \
      >"$TMP/out" 2>&1 || [[ -s $TMP/out ]]; then
      cat "$TMP/out" >&2
      fail "systemd-analyze $mode verify /$unit"
    fi
    log "ok: systemd-analyze $mode verify /$unit: no warning"
  done
  systemd-analyze security --offline=true --no-pager "$TMP/verify/$UNIT" \
    >"$TMP/security" 2>&1 || true
  local score
  score=$(sed -n 's/.*Overall exposure level for h2gate.service: \([0-9.]*\).*/\1/p' "$TMP/security")
  [[ -n $score ]] || {
    cat "$TMP/security" >&2
    fail "systemd-analyze security printed no score"
  }
  grep -E '^✗' "$TMP/security" | sed 's/^/    /' || true
  awk -v s="$score" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(s <= m) }' ||
    fail "exposure score $score is above $MAX_EXPOSURE"
  log "ok: systemd-analyze security h2gate.service: exposure $score ($(grep -o 'Overall exposure.*' "$TMP/security" | sed 's/.*[0-9] //')), at most $MAX_EXPOSURE"
  log "static checks passed"
}

free_port() {
  "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_for() {
  local what=$1 seconds=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  while ((SECONDS < deadline)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.3
  done
  fail "$what: not within ${seconds}s"
}

install_test() {
  local build=${1:?usage: $0 install BUILD_DIR|DEB [RELEASE]} release=${2:-}
  # shellcheck disable=SC1091 # the machine's
  [[ -n $release ]] || release=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  "$ROOT/tests/deploy/check_container.sh" base "$release" >"$TMP/base.log" 2>&1 || {
    local rc=$?
    cat "$TMP/base.log"
    ((rc == 77)) && skip "$(sed -n 's/^check_container: SKIP: //p' "$TMP/base.log" | tail -n1)"
    fail "the debian:$release base image"
  }
  sed 's/^/  /' "$TMP/base.log"
  make_deb "$build"
  local RUN_OPTS=(--runtime runc --ulimit nofile=1024:20000 --ulimit nproc=1024:1024)
  local image=localhost/h2gate-pkg:$$ name=h2gate-pkg-$$
  CLEANUP+=("podman rm -f -t 0 $name" "podman rmi -f $image")
  # The pristine image plus systemd (to be PID 1), curl and passwd (useradd, for the
# user unit's user; Debian 13's apt variant lacks it): nothing of h2gate's.
  mkdir -p "$TMP/ctx"
  cat >"$TMP/ctx/Containerfile" <<EOF
FROM debian:$release
RUN apt-get update && apt-get install -y --no-install-recommends systemd systemd-sysv curl dbus libpam-systemd passwd
CMD ["/lib/systemd/systemd"]
EOF
  log "podman build: debian:$release + systemd, curl, passwd"
  podman build --runtime runc --pull=never -t "$image" "$TMP/ctx" >"$TMP/build.log" 2>&1 || {
    tail -n 30 "$TMP/build.log" >&2
    fail "podman build of the systemd image"
  }
  # CAP_SYS_ADMIN and CAP_SYS_PTRACE, which podman leaves out by default and which
  # systemd as PID 1 of a machine has: without them systemd 257 (Debian 13) cannot
  # start the unit as shipped. It sets up the service's mount namespace before its
  # user namespace (PrivateUsers=): the mounts need CAP_SYS_ADMIN in the container
  # ("Failed to set up mount namespacing: Operation not supported", 226/NAMESPACE,
  # without it), and its helper that writes the new namespace's uid_map then opens
  # /proc/PID/gid_map of the service under ProtectProc=invisible's /proc, which a
  # process no longer dumpable (it just entered a user namespace) shows only to a
  # holder of CAP_SYS_PTRACE ("Failed to set up user namespacing: No such file or
  # directory" without it). systemd 252 (Debian 12) sets up the user namespace first
  # and needs neither; it runs with them all the same. The checks after the start
  # prove the namespaces were made rather than skipped as "prohibited (container
  # manager?)".
  podman run -d --name "$name" "${RUN_OPTS[@]}" --network host --systemd=always \
    --cap-add SYS_ADMIN --cap-add SYS_PTRACE \
    -v "$DEB:/root/$(basename "$DEB"):ro" "$image" >/dev/null || fail "podman run systemd"
  # shellcheck disable=SC2317
  booted() { podman exec "$name" systemctl is-system-running 2>/dev/null | grep -Eq 'running|degraded'; }
  wait_for "systemd as PID 1 in the container" 60 booted
  log "ok: systemd $(podman exec "$name" systemctl --version | head -n1 | awk '{print $2}') is PID 1 in the container"
  local version version_id
  version=$(dpkg-deb -f "$DEB" Version)
  version_id=$(podman exec "$name" sh -c '. /etc/os-release && echo "$VERSION_ID"')
  [[ $version == *"~deb${version_id}u"[0-9]* ]] ||
    fail "$(basename "$DEB") (version $version) is not built for Debian $version_id ($release): build it there"

  # apt-get install ./h2gate_*.deb: the dependencies come from the archive.
  podman exec "$name" sh -c "cd /root && apt-get install -y ./$(basename "$DEB")" >"$TMP/apt.log" 2>&1 || {
    tail -n 30 "$TMP/apt.log" >&2
    fail "apt-get install ./$(basename "$DEB")"
  }
  log "ok: apt-get install ./$(basename "$DEB"): $(grep -Eo '[0-9]+ newly installed' "$TMP/apt.log")"
  podman exec "$name" test -f /etc/h2gate/h2gate.yaml || fail "no /etc/h2gate/h2gate.yaml"

  # Free ports in the conffile (the host may run an h2gate on 3128/9901).
  local proxy_port admin_port proxy_port2 origin_port
  proxy_port=$(free_port)
  admin_port=$(free_port)
  proxy_port2=$(free_port)
  origin_port=$(free_port)
  podman exec "$name" sed -i "s/port_value: 3128/port_value: $proxy_port/; s/port_value: 9901/port_value: $admin_port/" \
    /etc/h2gate/h2gate.yaml
  podman exec "$name" grep -q "port_value: $proxy_port" /etc/h2gate/h2gate.yaml || fail "could not edit the conffile"
  mkdir -p "$TMP/www"
  head -c 1048576 /dev/urandom >"$TMP/www/1m.bin"
  "$PYTHON" -m http.server --bind 127.0.0.1 --directory "$TMP/www" "$origin_port" >"$TMP/origin.log" 2>&1 &
  CLEANUP+=("kill $!")
  wait_for "the origin (python3 http.server)" 10 curl -fsS -o /dev/null "http://127.0.0.1:$origin_port/1m.bin"

  podman exec "$name" systemctl start h2gate || {
    podman exec "$name" journalctl -u h2gate --no-pager | tail -n 30 >&2
    fail "systemctl start h2gate"
  }
  wait_for "h2gate /ready" 20 curl -fsS -o /dev/null "http://127.0.0.1:$admin_port/ready"
  local pid uid user
  pid=$(podman exec "$name" systemctl show -p MainPID --value h2gate)
  uid=$(podman exec "$name" awk '/^Uid:/{print $2}' "/proc/$pid/status")
  user=$(podman exec "$name" ps -o user= -p "$pid" 2>/dev/null || echo "uid $uid")
  [[ $uid != 0 ]] || fail "h2gate runs as root"
  log "ok: systemctl start h2gate: PID $pid, user $user (DynamicUser), ready on 127.0.0.1:$admin_port"
  # The sandbox as shipped, applied: the service has a mount, user and UTS
  # namespace of its own (ProtectSystem=/PrivateTmp=, PrivateUsers=,
  # ProtectHostname=), its root is read-only, its /tmp is not the container's, and
  # systemd logged no namespace setup it skipped.
  local ns
  for ns in mnt user uts; do
    [[ $(podman exec "$name" readlink "/proc/$pid/ns/$ns") != "$(podman exec "$name" readlink "/proc/1/ns/$ns")" ]] ||
      fail "h2gate runs in PID 1's $ns namespace: the unit's sandbox was not applied"
  done
  # The last mount on a path in mountinfo is the one the process sees.
  [[ $(podman exec "$name" awk '$5 == "/" { o = $6 } END { print o }' "/proc/$pid/mountinfo") =~ ^ro(,|$) ]] ||
    fail "h2gate's / is writable (ProtectSystem=strict not applied)"
  # /tmp's device and root: a tmpfs of its own (systemd 257) or a directory of the
  # container's /tmp (252) both differ from PID 1's.
  local tmp_of='$5 == "/tmp" { t = $3 " " $4 } END { print t }'
  [[ $(podman exec "$name" awk "$tmp_of" "/proc/$pid/mountinfo") != \
    "$(podman exec "$name" awk "$tmp_of" /proc/1/mountinfo)" ]] ||
    fail "h2gate's /tmp is the container's (PrivateTmp= not applied)"
  if podman exec "$name" journalctl --no-pager -u h2gate | grep -iE 'ignoring namespace|namespac.*(prohibited|not supported)'; then
    fail "systemd skipped part of h2gate's namespace setup"
  fi
  log "ok: the unit's sandbox applied: mount, user and UTS namespaces of its own (uid_map: $(podman exec "$name" awk '{ printf "%s%s %s %s", sep, $1, $2, $3; sep = ", " }' "/proc/$pid/uid_map")), read-only /, private /tmp"
  podman exec "$name" systemd-analyze security --no-pager h2gate.service >"$TMP/security" 2>&1 || true
  log "ok: systemd-analyze security in the container: $(grep -o 'Overall exposure.*' "$TMP/security")"

  local want got
  want=$(sha256sum <"$TMP/www/1m.bin" | cut -d' ' -f1)
  got=$(curl -fsS --max-time 30 -x "http://127.0.0.1:$proxy_port" "http://127.0.0.1:$origin_port/1m.bin" | sha256sum | cut -d' ' -f1)
  [[ $got == "$want" ]] || fail "curl through h2gate: 1 MiB differs"
  log "ok: curl -x http://127.0.0.1:$proxy_port fetched 1 MiB intact"

  # Reload: the listener moves to the port the edited file names.
  podman exec "$name" sed -i "s/port_value: $proxy_port/port_value: $proxy_port2/" /etc/h2gate/h2gate.yaml
  podman exec "$name" systemctl reload h2gate || fail "systemctl reload h2gate"
  wait_for "the reloaded listener on $proxy_port2" 20 \
    curl -fsS --max-time 5 -o /dev/null -x "http://127.0.0.1:$proxy_port2" "http://127.0.0.1:$origin_port/1m.bin"
  local pid2
  pid2=$(podman exec "$name" systemctl show -p MainPID --value h2gate)
  [[ $pid2 == "$pid" ]] || fail "reload restarted h2gate (PID $pid -> $pid2)"
  if curl -fsS --max-time 5 -o /dev/null -x "http://127.0.0.1:$proxy_port" "http://127.0.0.1:$origin_port/1m.bin" 2>/dev/null; then
    fail "after the reload the old port $proxy_port still proxies"
  fi
  curl -fsS "http://127.0.0.1:$admin_port/metrics" | grep -q 'h2gate_config_reloads_total{result="success"} 1' ||
    fail "h2gate_config_reloads_total{result=\"success\"} is not 1 after systemctl reload"
  log "ok: systemctl reload h2gate: same PID $pid, listener moved to $proxy_port2, reloads_total{success} 1"

  # Stop drains: a 48 MiB download at 4 MiB/s (12 s) started before the
  # stop ends intact, and the stop waits for it. Loopback socket buffers
  # (curl's autotuned receive buffer, h2gate's tuned send buffer, the
  # origin's) held up to about 10 MiB in one run: a 16 MiB download at
  # 2 MiB/s was then all handed to the kernel 2 s after the stop, and the
  # stop returned rightly early. 44 MiB left at the stop keep h2gate
  # relaying for at least 7 s.
  head -c 50331648 /dev/urandom >"$TMP/www/48m.bin"
  local want48
  want48=$(sha256sum <"$TMP/www/48m.bin" | cut -d' ' -f1)
  curl -fsS --max-time 60 --limit-rate 4m -x "http://127.0.0.1:$proxy_port2" \
    -o "$TMP/slow.bin" "http://127.0.0.1:$origin_port/48m.bin" 2>"$TMP/slow.err" &
  local curl_pid=$! t0 took
  sleep 1
  t0=$SECONDS
  podman exec "$name" systemctl stop h2gate || fail "systemctl stop h2gate"
  took=$((SECONDS - t0))
  wait "$curl_pid" || fail "the download running during systemctl stop failed: $(cat "$TMP/slow.err")"
  [[ $(sha256sum <"$TMP/slow.bin" | cut -d' ' -f1) == "$want48" ]] || fail "the drained download differs"
  ((took >= 3)) || fail "systemctl stop returned after ${took}s, before the download (about 11 s more) ended"
  local result
  result=$(podman exec "$name" systemctl show -p Result --value h2gate)
  [[ $result == success ]] || fail "h2gate's stop result is '$result'"
  log "ok: systemctl stop h2gate took ${took}s: it drained the running 48 MiB download, intact; result $result"

  # The user unit under a user manager: lingering starts user@UID.service (it
  # needs pam_systemd, from libpam-systemd, for its XDG_RUNTIME_DIR); systemctl
  # --user reaches it through $XDG_RUNTIME_DIR/systemd/private (-M user@ needs
  # systemd-machined, which the container lacks). The first start copies the
  # conffile, whose ports are free now that the system service is stopped.
  podman exec "$name" useradd -m h2gate-desk || fail "useradd h2gate-desk"
  local duid
  duid=$(podman exec "$name" id -u h2gate-desk)
  podman exec "$name" loginctl enable-linger h2gate-desk || fail "loginctl enable-linger"
  # shellcheck disable=SC2317
  user_manager() { [[ $(podman exec "$name" systemctl is-active "user@$duid.service") == active ]]; }
  wait_for "user@$duid.service (the user manager)" 20 user_manager
  as_user() { podman exec "$name" runuser -u h2gate-desk -- env "XDG_RUNTIME_DIR=/run/user/$duid" "$@"; }
  as_user systemctl --user start h2gate || {
    as_user journalctl --user -u h2gate --no-pager | tail -n 30 >&2
    fail "systemctl --user start h2gate"
  }
  as_user test -f "/home/h2gate-desk/.config/h2gate/h2gate.yaml" ||
    fail "the user unit did not copy the conffile to ~/.config/h2gate"
  local upid uuid
  upid=$(as_user systemctl --user show -p MainPID --value h2gate)
  [[ $upid != 0 ]] || {
    podman exec "$name" journalctl --no-pager "_UID=$duid" | tail -n 20 >&2
    fail "the user unit's h2gate is not running after systemctl --user start"
  }
  uuid=$(podman exec "$name" awk '/^Uid:/{print $2}' "/proc/$upid/status")
  [[ $uuid == "$duid" ]] || fail "the user unit's h2gate runs as uid $uuid, not $duid"
  wait_for "the user unit's listener on 127.0.0.1:$proxy_port2" 10 \
    curl -fsS -o /dev/null -x "http://127.0.0.1:$proxy_port2" "http://127.0.0.1:$origin_port/1m.bin"
  curl -fsS -x "http://127.0.0.1:$proxy_port2" -o "$TMP/user.bin" "http://127.0.0.1:$origin_port/1m.bin" ||
    fail "curl through the user unit's h2gate"
  cmp -s "$TMP/user.bin" "$TMP/www/1m.bin" || fail "1 MiB through the user unit differs"
  as_user systemctl --user stop h2gate || fail "systemctl --user stop h2gate"
  [[ $(as_user systemctl --user show -p Result --value h2gate) == success ]] ||
    fail "the user unit's stop result is not success"
  podman exec "$name" loginctl disable-linger h2gate-desk || true
  log "ok: the user unit under user@$duid.service: ~/.config/h2gate/h2gate.yaml made on first start, PID $upid as uid $duid, 1 MiB intact through it, stopped (success)"

  # Remove, then purge.
  podman exec "$name" dpkg -r h2gate >/dev/null 2>&1 || fail "dpkg -r h2gate"
  podman exec "$name" test ! -e /usr/bin/h2gate || fail "dpkg -r left /usr/bin/h2gate"
  podman exec "$name" test -f /etc/h2gate/h2gate.yaml || fail "dpkg -r removed the conffile"
  podman exec "$name" dpkg -P h2gate >/dev/null 2>&1 || fail "dpkg -P h2gate"
  podman exec "$name" test ! -e /etc/h2gate/h2gate.yaml || fail "dpkg -P left /etc/h2gate/h2gate.yaml"
  log "ok: dpkg -r kept /etc/h2gate/h2gate.yaml, dpkg -P removed it"
  log "install test passed"
}

case ${1:-} in
  static)
    shift
    static_checks "$@"
    ;;
  install)
    shift
    install_test "$@"
    ;;
  *)
    sed -n '2,/^set -euo/{/^set -euo/d; s/^# \{0,1\}//p;}' "$0"
    exit 2
    ;;
esac
