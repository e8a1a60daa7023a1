#!/usr/bin/env bash
# What running PAC files in worker processes costs, and what it buys
# (gateway/README.md, "PAC evaluation runs in worker processes"): one h2gate
# per build given, with one pac route (a 50-rule file plus a host whose
# evaluation runs Array.prototype.indexOf over an array-like of length
# 2^31 - 1, about four minutes of native code), and for each:
#
#   memory       after the file loaded, idle: RSS of h2gate and of its
#                worker processes, their PSS summed (shared pages counted
#                once) and their private pages (USS) summed, from
#                /proc/PID/smaps_rollup; the PSS sum again after the
#                evaluations
#   evaluation   EVALS uncached evaluations through GET /pac/eval (each a
#                new host): wall time and CPU (user + system of h2gate, its
#                workers and the workers it reaped) per evaluation
#   natives      two requests at once for the native host (timeout 2 s,
#                fallback reject 503): when both are answered, and the CPU
#                the whole tree burns in the 10 s after they were sent
#   SIGTERM      two such calls running again, then SIGTERM: seconds until
#                h2gate exits (drain_timeout 3 s; cut at 20 s)
#
#   tests/bench/pac_isolation.sh                      # build/h2gate
#   H2GATE_BIN2=/tmp/main/h2gate H2GATE_BIN2_LABEL=main tests/bench/pac_isolation.sh
#   EVALS=2000 tests/bench/pac_isolation.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_NAME=pac_isolation
# shellcheck source=tests/bench/lib.sh
source "$here/lib.sh"

EVALS=${EVALS:-3000}
if [[ -n ${H2GATE_BIN2:-} ]]; then
  H2GATE_BIN2=$(readlink -m "$H2GATE_BIN2")
  [[ -x $H2GATE_BIN2 ]] || die "H2GATE_BIN2=$H2GATE_BIN2 is not executable"
fi
require_tools curl python3
bench_init

# The 50 rules of tests/bench/pac_bench.cc's file, and the native trap.
python3 - >"$work/bench.pac" <<'EOF'
print("function FindProxyForURL(url, host) {")
print("  host = host.toLowerCase();")
print("  if (host.indexOf('native') == 0)")
print("    return String(Array.prototype.indexOf.call({length: 2147483647}, 1));")
print("  if (isPlainHostName(host)) return 'DIRECT';")
for i in range(20):
    print(f"  if (dnsDomainIs(host, '.dept{i}.corp.example')) return 'DIRECT';")
for i in range(15):
    print(f"  if (shExpMatch(host, '*.partner{i}.example')) return 'PROXY partner-gw.corp.example:3128';")
for i in range(10):
    print(f"  if (/^\\d+\\.\\d+\\.\\d+\\.\\d+$/.test(host) && isInNet(host, '10.{i}.0.0', '255.255.0.0')) return 'DIRECT';")
for i in range(4):
    print(f"  if (shExpMatch(url, 'http://*.region{i}.example/*')) return 'PROXY region{i}.corp.example:8080';")
print("  return 'PROXY proxy1.corp.example:8080; PROXY proxy2.corp.example:8080; DIRECT';")
print("}")
EOF

write_conf() { # file listen-port admin-port
  cat >"$1" <<EOF
h2gate:
  drain_timeout: 3s
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: $3}}
static_resources:
  listeners:
  - name: bench
    address: {socket_address: {address: 127.0.0.1, port_value: $2}}
    filter_chains:
    - filters:
      - name: h2gate.filters.forward_proxy
        typed_config:
          routes:
          - match: {}
            pac:
              file: $work/bench.pac
              evaluation: {timeout: 2s, cache_entries: 0}
              fallback: {reject: 503}
EOF
}

workers_of() { # pid: the --pac-worker processes it started
  local p
  for p in $(pgrep -P "$1" 2>/dev/null || true); do
    if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- '--pac-worker'; then echo "$p"; fi
  done
}
rollup_kib() { # pid field (Rss, Pss, Private_Clean, Private_Dirty)
  awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0
}
tree_ticks() { # pid: utime + stime of it, its reaped children, and its live workers
  local stat f total w
  stat=$(<"/proc/$1/stat")
  stat=${stat##*) }
  read -r -a f <<<"$stat"
  total=$((f[11] + f[12] + f[13] + f[14]))
  for w in $(workers_of "$1"); do total=$((total + $(cpu_ticks "$w" 2>/dev/null || echo 0))); done
  echo "$total"
}

results=()
measure() { # label binary
  local label=$1 bin=$2 port admin pid log start end t0 t1 w n rss wrss pss uss codes
  port=$(free_port)
  admin=$(free_port)
  log="$work/$label.log"
  write_conf "$work/$label.yaml" "$port" "$admin"
  "$bin" -c "$work/$label.yaml" --log-level info >"$work/$label.out" 2>"$log" &
  pid=$!
  pids+=("$pid")
  wait_port "$port" "h2gate ($label)"
  for _ in $(seq 200); do grep -q "using the PAC file" "$log" && break; sleep 0.05; done
  grep -q "using the PAC file" "$log" || die "$label: the PAC file did not load (log $log)"
  sleep 1

  # Memory, idle.
  rss=$(vm_rss_kib "$pid")
  pss=$(rollup_kib "$pid" Pss)
  uss=$(($(rollup_kib "$pid" Private_Clean) + $(rollup_kib "$pid" Private_Dirty)))
  wrss=0
  n=0
  for w in $(workers_of "$pid"); do
    n=$((n + 1))
    wrss=$((wrss + $(vm_rss_kib "$w")))
    pss=$((pss + $(rollup_kib "$w" Pss)))
    uss=$((uss + $(rollup_kib "$w" Private_Clean) + $(rollup_kib "$w" Private_Dirty)))
  done

  # Uncached evaluations through /pac/eval, one connection.
  local urls=()
  for i in $(seq "$EVALS"); do
    urls+=("http://127.0.0.1:$admin/pac/eval?url=http%3A%2F%2Fh$i.region$((i % 5)).example%2Fp")
  done
  t0=$(tree_ticks "$pid")
  start=$(date +%s.%N)
  curl -s "${urls[@]}" >/dev/null
  end=$(date +%s.%N)
  t1=$(tree_ticks "$pid")
  local wall_us cpu_us
  wall_us=$(awk -v a="$start" -v b="$end" -v n="$EVALS" 'BEGIN {printf "%.0f", (b - a) * 1e6 / n}')
  cpu_us=$(awk -v t="$((t1 - t0))" -v hz="$clk_tck" -v n="$EVALS" 'BEGIN {printf "%.0f", t * 1e6 / hz / n}')
  local pss_after
  pss_after=$(rollup_kib "$pid" Pss)
  for w in $(workers_of "$pid"); do pss_after=$((pss_after + $(rollup_kib "$w" Pss))); done

  # Two native calls at once.
  t0=$(tree_ticks "$pid")
  start=$(date +%s.%N)
  codes=$(
    for i in 0 1; do
      curl -s -o /dev/null -w '%{http_code} ' --max-time 60 -x "http://127.0.0.1:$port" "http://native$i.test/" &
    done
    wait
  )
  end=$(date +%s.%N)
  local answered burn
  answered=$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}')
  python3 -c "import time; time.sleep(max(0.0, $start + 10 - time.time()))"
  t1=$(tree_ticks "$pid")
  burn=$(awk -v t="$((t1 - t0))" -v hz="$clk_tck" 'BEGIN {printf "%.1f", t / hz}')

  # SIGTERM while two run (after 0.7 s).
  for i in 2 3; do
    curl -s -o /dev/null --max-time 60 -x "http://127.0.0.1:$port" "http://native$i.test/" &
  done
  sleep 0.7
  start=$(date +%s.%N)
  kill -TERM "$pid"
  local exited="no (killed at 20 s)"
  for _ in $(seq 400); do
    if ! kill -0 "$pid" 2>/dev/null; then
      exited=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f s", b - a}')
      break
    fi
    sleep 0.05
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  wait 2>/dev/null || true

  results+=("$(printf '%-10s | %6d | %2d x %6d | %6d | %6d | %7d | %6d us | %6d us | %-9s %4s s | %4s s | %s' \
    "$label" "$rss" "$n" "$((n > 0 ? wrss / n : 0))" "$pss" "$uss" "$pss_after" "$wall_us" "$cpu_us" \
    "$codes" "$answered" "$burn" "$exited")")
}

measure "build" "$H2GATE_BIN"
if [[ -n ${H2GATE_BIN2:-} ]]; then measure "${H2GATE_BIN2_LABEL:-bin2}" "$H2GATE_BIN2"; fi

echo
echo "pac_isolation: one pac route (50 rules), $EVALS uncached evaluations; memory in KiB"
echo "build      | h2gate | workers RSS | PSS all | USS all | PSS all | eval wall | eval CPU  | natives: codes, answered | CPU in 10 s | SIGTERM exit"
echo "           | RSS    | (n x each)  | (idle)  | (idle)  | (after) | per eval  | per eval  | after s                  | after start |"
for r in "${results[@]}"; do echo "$r"; done
