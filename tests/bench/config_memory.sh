#!/usr/bin/env bash
# What a big configuration costs h2gate: an acl of ACL_HOSTS (100,000) host names
# in direct mode. Prints one table on stdout (progress on stderr):
#   - bytes per acl name while running (VmRSS after start, less an acl of 1 name)
#     and at the peak of loading (VmHWM);
#   - a POST /reload of the same file: how long it took, and the slowest of the
#     /healthz requests sent every 100 ms meanwhile (the liveness probe must not
#     time out);
#   - VmRSS after RELOADS (200) reloads of a small config, per reload.
#
# Environment: H2GATE_BIN (build/h2gate), ACL_HOSTS (100000), RELOADS (200),
# KEEP_WORK=1. A file above 8 MiB needs --max-config-size: ACL_HOSTS above about
# 190,000 passes --max-config-size 1G.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_NAME=config_memory
# shellcheck source=tests/bench/lib.sh
source "$here/lib.sh"
ACL_HOSTS=${ACL_HOSTS:-100000}
RELOADS=${RELOADS:-200}
require_tools curl python3 awk
bench_init

# acl_yaml HOSTS: direct mode, admin and listener on free ports, one acl deny list.
acl_yaml() {
  cat <<EOF
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: $admin_port}}
static_resources:
  listeners:
  - name: local_proxy
    address: {socket_address: {address: 127.0.0.1, port_value: $proxy_port}}
    filter_chains:
    - filters:
      - name: h2gate.filters.acl
        typed_config:
          deny:
          - reason: blocklist
            match:
              hosts:
EOF
  awk -v n="$1" 'BEGIN {for (i = 0; i < n; i++) printf "              - host%07d.blocked.example\n", i}'
  echo "      - name: h2gate.filters.forward_proxy"
}

extra=()
if ((ACL_HOSTS > 190000)); then extra=(--max-config-size 1G); fi
# run_gate CONFIG: starts h2gate, waits for /healthz; $gate_pid.
run_gate() {
  "$H2GATE_BIN" -c "$1" "${extra[@]}" --log-level warn >"$work/h2gate.log" 2>&1 &
  gate_pid=$!
  pids+=("$gate_pid")
  local deadline=$((SECONDS + 600))
  until curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$admin_port/healthz" 2>/dev/null; do
    kill -0 "$gate_pid" 2>/dev/null || die "h2gate exited: $(tail -5 "$work/h2gate.log")"
    ((SECONDS < deadline)) || die "h2gate did not answer /healthz in 600 s"
    sleep 0.2
  done
  sleep 1.5 # what start() freed goes back to the system (malloc_trim) first
}
reload() { curl -fsS -o /dev/null -w '%{http_code} %{time_total}' -X POST -H 'X-H2gate-Admin: 1' \
  --max-time 600 "http://127.0.0.1:$admin_port/reload"; }

admin_port=$(free_port)
proxy_port=$(free_port)
acl_yaml 1 >"$work/small.yaml"
acl_yaml "$ACL_HOSTS" >"$work/big.yaml"
log "acl of $ACL_HOSTS names: $(stat -c %s "$work/big.yaml") bytes of YAML"

run_gate "$work/small.yaml"
base_rss=$(vm_rss_kib "$gate_pid")
stop_pid "$gate_pid"

run_gate "$work/big.yaml"
big_rss=$(vm_rss_kib "$gate_pid")
big_hwm=$(vm_hwm_kib "$gate_pid")
log "start: VmRSS $big_rss KiB, VmHWM $big_hwm KiB (1 name: $base_rss KiB)"

# Reload the big file while /healthz is asked every 100 ms.
reload >"$work/reload.out" &
reload_pid=$!
slowest=0
probes=0
while kill -0 "$reload_pid" 2>/dev/null; do
  t=$(curl -sS -o /dev/null -w '%{time_total}' --max-time 30 "http://127.0.0.1:$admin_port/healthz" || echo 30)
  slowest=$(awk -v a="$slowest" -v b="$t" 'BEGIN {print (b > a ? b : a)}')
  probes=$((probes + 1))
  sleep 0.1
done
wait "$reload_pid" || true
read -r reload_status reload_secs <"$work/reload.out" || true
log "reload: ${reload_status:-?} in ${reload_secs:-?} s; /healthz $probes times, slowest $slowest s"
reload_hwm=$(vm_hwm_kib "$gate_pid")
stop_pid "$gate_pid"

run_gate "$work/small.yaml"
reset_hwm "$gate_pid"
reload >/dev/null
sleep 2.5
r0=$(vm_rss_kib "$gate_pid")
for _ in $(seq "$RELOADS"); do reload >/dev/null; done
sleep 2.5 # replaced configurations are freed within a second or two
r1=$(vm_rss_kib "$gate_pid")
stop_pid "$gate_pid"

per() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN {printf "%.0f", (a - b) * 1024 / n}'; }
echo
echo "h2gate config memory: $(date -u '+%Y-%m-%d %H:%M UTC'), $("$H2GATE_BIN" --version | head -n1), load average $(cut -d' ' -f1-3 /proc/loadavg)"
fmt='%-52s | %s\n'
# shellcheck disable=SC2059 # the format is ours
{
  printf "$fmt" "figure" "value"
  printf "$fmt" "acl names" "$ACL_HOSTS ($(stat -c %s "$work/big.yaml") bytes of YAML)"
  printf "$fmt" "running: bytes per acl name (VmRSS - 1 name)" "$(per "$big_rss" "$base_rss" "$ACL_HOSTS")"
  printf "$fmt" "loading at start: bytes per acl name (VmHWM)" "$(per "$big_hwm" "$base_rss" "$ACL_HOSTS")"
  printf "$fmt" "running: VmRSS MiB" "$(awk -v k="$big_rss" 'BEGIN {printf "%.1f", k / 1024}')"
  printf "$fmt" "reload of the same file: status, seconds" "${reload_status:-?}, ${reload_secs:-?}"
  printf "$fmt" "reload: peak VmHWM MiB (old and new config)" "$(awk -v k="$reload_hwm" 'BEGIN {printf "%.1f", k / 1024}')"
  printf "$fmt" "slowest /healthz during the reload, s (of $probes)" "$slowest"
  printf "$fmt" "$RELOADS reloads of the 1-name config: VmRSS KiB" "$r0 -> $r1 ($(awk -v a="$r0" -v b="$r1" -v n="$RELOADS" 'BEGIN {printf "%.2f", (b - a) / n}') KiB per reload)"
}
