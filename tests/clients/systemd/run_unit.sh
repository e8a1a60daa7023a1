#!/usr/bin/env bash
# Runs one service unit in a real systemd service manager of its own, on a
# machine where systemd is not PID 1 (so `systemctl start` on the system
# manager is impossible): a private user manager (`systemd --user`) as the
# unprivileged user nobody, in a cgroup delegated to it and a mount namespace
# where /run/systemd/system exists (systemd's "booted with systemd" check).
# systemd itself then parses the unit and starts it with the environment its
# Environment= lines give, as it would on a systemd machine.
# Used by tests/integration/system_proxy_test.cc ([systemd]).
#
#   run_unit.sh UNIT_FILE WORK_DIR
#   run_unit.sh --can-run          only the checks: exit 0 or 77 (with the reason)
#
# UNIT_FILE is a *.service file (Type=oneshot, so `systemctl start` returns
# when it has run); WORK_DIR is handed to the service user (chown) for the
# files the unit reads and writes. The manager sees only UNIT_FILE's unit
# (SYSTEMD_UNIT_PATH) and an empty default target, and gets an environment of
# its own (env -i): nothing of the caller's reaches the service.
# Prints systemctl's view (Result=, ExecMainStatus=). Exit status: 0 the unit
# ran and succeeded, 1 it failed, 2 usage or setup error, 77 no private
# manager can run here (not root, no cgroup v2, no systemd).
set -euo pipefail

log() { printf 'run_unit: %s\n' "$*" >&2; }
skip() {
  log "SKIP: $*"
  exit 77
}

((EUID == 0)) || skip "needs root (a delegated cgroup and a mount namespace)"
SYSTEMD=/lib/systemd/systemd
[[ -x $SYSTEMD ]] || skip "$SYSTEMD missing (Debian: systemd)"
id nobody >/dev/null 2>&1 || skip "no user nobody to run the manager as"
for tool in systemctl unshare setpriv findmnt; do
  command -v "$tool" >/dev/null 2>&1 || skip "$tool missing (Debian: systemd, util-linux)"
done
cg2=$(findmnt -n -t cgroup2 -o TARGET | head -n1)
[[ -n $cg2 && -w $cg2 ]] || skip "no writable cgroup v2 hierarchy"
# A hybrid layout also has systemd's v1 hierarchy; the manager lives in both.
cg1=$(findmnt -n -t cgroup -o TARGET,OPTIONS | awk '$2 ~ /(^|,)name=systemd(,|$)/ {print $1; exit}')
if [[ ${1:-} == --can-run && $# == 1 ]]; then
  log "a private systemd user manager can run here"
  exit 0
fi

if (($# != 2)) || [[ $1 != *.service || ! -f $1 || ! -d $2 ]]; then
  log "usage: run_unit.sh UNIT_FILE.service WORK_DIR | --can-run"
  exit 2
fi
unit_file=$(readlink -f "$1")
unit=$(basename "$unit_file")
work=$(readlink -f "$2")

uid=$(id -u nobody)
gid=$(id -g nobody)
run=$(mktemp -d /tmp/h2gate-systemd-XXXXXX)
cgroups=("$cg2/h2gate-test-${run##*-}")
[[ -n $cg1 ]] && cgroups+=("$cg1/h2gate-test-${run##*-}")
manager=""

cleanup() {
  set +e
  local cg i
  if [[ -n $manager ]] && kill -0 "$manager" 2>/dev/null; then
    # SIGRTMIN+24: a user manager exits at once (SIGTERM would start
    # exit.target, which it cannot see). The oneshot unit has finished.
    kill -s RTMIN+24 "$manager"
    for i in $(seq 50); do
      kill -0 "$manager" 2>/dev/null || break
      sleep 0.1
    done
    ((i < 50)) || log "the manager did not exit within 5 s; killing it"
  fi
  # Whatever is left in the delegated cgroup (cgroup.kill: Linux 5.14).
  [[ -e ${cgroups[0]}/cgroup.kill ]] && echo 1 >"${cgroups[0]}/cgroup.kill"
  [[ -n $manager ]] && wait "$manager" 2>/dev/null
  # A cgroup whose last process just exited may still be busy for a moment.
  for i in $(seq 50); do
    for cg in "${cgroups[@]}"; do
      [[ -d $cg ]] && find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
    done
    [[ -d ${cgroups[0]} || -d ${cgroups[-1]} ]] || break
    sleep 0.1
  done
  for cg in "${cgroups[@]}"; do
    [[ -d $cg ]] && log "could not remove the cgroup $cg"
  done
  [[ -n ${H2GATE_KEEP_TEST_DIRS:-} ]] && log "H2GATE_KEEP_TEST_DIRS: kept $run" || rm -rf "$run"
}
trap cleanup EXIT
# A signal (ctest's timeout) still runs the cleanup.
trap 'exit 143' TERM INT HUP

# The manager's runtime directory, its unit directory, and the default target.
mkdir -p "$run/units"
cp "$unit_file" "$run/units/$unit"
printf '[Unit]\nDescription=run_unit.sh default target\n' >"$run/units/h2gate-test.target"
chown -R "$uid:$gid" "$run" "$work"
chmod 700 "$run"
for cg in "${cgroups[@]}"; do
  mkdir "$cg"
  chown -R "$uid:$gid" "$cg"
done

as_nobody=(setpriv --reuid="$uid" --regid="$gid" --clear-groups
  env -i HOME="$run" XDG_RUNTIME_DIR="$run" PATH=/usr/local/bin:/usr/bin:/bin)

# In a mount namespace of its own: /run/systemd (or /run) is a fresh tmpfs
# there with system/ in it; the machine's /run is untouched. The shell moves
# itself into the delegated cgroups, then becomes the manager.
# shellcheck disable=SC2016 # expanded by the inner sh
CGROUPS="${cgroups[*]}" unshare --mount --propagation private sh -c '
  if [ -d /run/systemd ]; then mount -t tmpfs tmpfs /run/systemd; else mount -t tmpfs tmpfs /run; fi &&
  mkdir -p /run/systemd/system || exit 1
  for cg in $CGROUPS; do echo $$ >"$cg/cgroup.procs" || exit 1; done
  exec "$@"' sh "${as_nobody[@]}" SYSTEMD_UNIT_PATH="$run/units" \
  "$SYSTEMD" --user --unit=h2gate-test.target 2>"$run/manager.log" &
manager=$!

systemctl=("${as_nobody[@]}" systemctl --user --no-pager)
ready=0
for _ in $(seq 100); do
  if "${systemctl[@]}" show -p Version >/dev/null 2>&1; then
    ready=1
    break
  fi
  kill -0 "$manager" 2>/dev/null || break
  sleep 0.1
done
if ((!ready)); then
  log "the user manager did not start:"
  cat "$run/manager.log" >&2
  exit 2
fi

rc=0
"${systemctl[@]}" start "$unit" || rc=$?
"${systemctl[@]}" show -p Result -p ExecMainCode -p ExecMainStatus "$unit"
if ((rc)); then
  log "systemctl start $unit failed (exit $rc):"
  "${systemctl[@]}" status "$unit" >&2 || true
  exit 1
fi
log "$unit ran and succeeded in a private systemd $("$SYSTEMD" --version | awk 'NR == 1 {print $2}') user manager"
