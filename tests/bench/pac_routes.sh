#!/usr/bin/env bash
# What routing by a PAC file costs against the same rules as native routes:
# two h2gates side by side, (n) with 50 forward_proxy routes and
# the nghttpx cluster as the default, (p) with one pac route whose 50-rule
# PAC file (file source, answer cache on) answers "HTTPS 127.0.0.1:NGHTTPX"
# for the benchmark's destination, after falling through every rule, as the
# native routes do. W3 (wrk, absolute-form GET /1k) and W2 (curl 8, one
# tunnel per request) run for both in the same rounds, the order rotating.
# Prints req/s, tunnels/s, p99, h2gate's CPU per request and tunnel, and
# the per-round ratios p/n (target: p at most 5 % slower: req/s p/n >= 0.95
# and CPU per request p/n <= 1.05).
#
#   tests/bench/pac_routes.sh          # ROUNDS=3 W3_SECS=10 W2_TUNNELS=1000
#   QUICK=1 tests/bench/pac_routes.sh  # 1 round, 3 s, 200 tunnels
#   H2GATE_BIN2=old/h2gate tests/bench/pac_routes.sh
#     # also (n2) and (p2), the same two configs run by a second build, in
#     # the same rotated rounds (H2GATE_BIN2_LABEL names it)
#   CALLGRIND=1 tests/bench/pac_routes.sh
#     # instead of the rounds: each h2gate under valgrind's callgrind,
#     # CG_REQUESTS (2000) absolute-form requests each, 50 at a time; prints
#     # h2gate's instructions (user space) per request: a count, not a
#     # time, so it does not swing with the machine's load
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_NAME=pac_routes
# shellcheck source=tests/bench/lib.sh
source "$here/lib.sh"

if [[ -n ${CALLGRIND:-} ]]; then
  # Start-up under valgrind takes seconds: wait longer for the listeners.
  wait_port() { # port what
    for _ in $(seq 1200); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
      sleep 0.05
    done
    die "$2 did not start listening on port $1 (logs in $work)"
  }
fi
if [[ -n ${QUICK:-} ]]; then
  ROUNDS=${ROUNDS:-1} W3_SECS=${W3_SECS:-3} W2_TUNNELS=${W2_TUNNELS:-200}
fi
ROUNDS=${ROUNDS:-3}
W3_SECS=${W3_SECS:-10}
W3_CONNS=${W3_CONNS:-50}
W2_TUNNELS=${W2_TUNNELS:-1000}
W2_PARALLEL=${W2_PARALLEL:-50}

if [[ -n ${H2GATE_BIN2:-} ]]; then
  H2GATE_BIN2=$(readlink -m "$H2GATE_BIN2")
  [[ -x $H2GATE_BIN2 ]] || die "H2GATE_BIN2=$H2GATE_BIN2 is not executable"
fi
BIN2_LABEL=${H2GATE_BIN2_LABEL:-${H2GATE_BIN2:-}}

require_tools nginx nghttpx squid openssl wrk
require_curl8
bench_init
make_certs
start_nginx
start_squid_backend
start_nghttpx
head -c 1024 /dev/urandom >"$work/www/1k"

# The 50 rules, as YAML routes and as PAC lines: 20 internal domains and 10
# address ranges DIRECT, 20 partner patterns through the cluster. The
# benchmark's destination (127.0.0.1) matches none of them.
routes=""
pac_rules=""
for i in $(seq 1 20); do
  routes+="          - match: {host_suffixes: [dept$i.corp.example]}
            direct: true
"
  pac_rules+="  if (dnsDomainIs(host, \".dept$i.corp.example\") || host == \"dept$i.corp.example\") return \"DIRECT\";
"
done
for i in $(seq 1 20); do
  routes+="          - match: {hosts: [\"*.partner$i.example\"]}
            cluster: nghttpx
"
  pac_rules+="  if (shExpMatch(host, \"*.partner$i.example\")) return \"HTTPS 127.0.0.1:$nghttpx_port\";
"
done
for i in $(seq 1 10); do
  routes+="          - match: {cidrs: [10.$i.0.0/16]}
            direct: true
"
  pac_rules+="  if (isInNet(host, \"10.$i.0.0\", \"255.255.0.0\")) return \"DIRECT\";
"
done
cat >"$work/rules.pac" <<EOF
function FindProxyForURL(url, host) {
$pac_rules  return "HTTPS 127.0.0.1:$nghttpx_port";
}
EOF

declare -A PORT PID ADMIN
spawn() { # workload binary routing-yaml
  local port admin
  port=$(free_port)
  admin=$(free_port)
  # lib.sh's config with this routing and h2gate's default stream limit.
  conf_route=$3 conf_streams= write_h2gate_conf "$work/$1.yaml" "$port" "$admin"
  if [[ -n ${CALLGRIND:-} ]]; then
    valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.$1" \
      "$2" -c "$work/$1.yaml" --log-level warn >>"$work/$1.log" 2>&1 &
  else
    "$2" -c "$work/$1.yaml" --log-level warn >>"$work/$1.log" 2>&1 &
  fi
  PID[$1]=$!
  PORT[$1]=$port
  ADMIN[$1]=$admin
  pids+=("${PID[$1]}")
  wait_port "$port" "h2gate $1"
}
native_yaml="          routes:
$routes          cluster: nghttpx"
pac_yaml="          routes:
          - match: {}
            pac:
              file: $work/rules.pac
              fallback: {cluster: nghttpx}
              proxies: {trusted_ca: $work/ca.pem}"
# (n) and (p) run H2GATE_BIN; (n2) and (p2) the same configs with H2GATE_BIN2.
workloads=(n p)
spawn n "$H2GATE_BIN" "$native_yaml"
spawn p "$H2GATE_BIN" "$pac_yaml"
if [[ -n ${H2GATE_BIN2:-} ]]; then
  workloads+=(n2 p2)
  spawn n2 "$H2GATE_BIN2" "$native_yaml"
  spawn p2 "$H2GATE_BIN2" "$pac_yaml"
fi
# The PAC file loads on its own threads (under valgrind, slowly).
if [[ -n ${CALLGRIND:-} ]]; then sleep 8; else sleep 1; fi
load0=$(cut -d' ' -f1-3 /proc/loadavg)
log "rounds: $ROUNDS, work dir $work, load average $load0"

declare -A R
add() { R[$1]+="$2 "; }
# shellcheck disable=SC2086
cell() { summary "$2" ${R[$1]:-}; }
div() { awk -v a="$1" -v b="$2" 'BEGIN {if (b == 0) print "nan"; else printf "%.3f", a / b}'; }
port_of() { echo "${PORT[$1]}"; }
pid_of() { echo "${PID[$1]}"; }

printf 'wrk.path = "http://127.0.0.1:%s/1k"\nwrk.headers["Host"] = "127.0.0.1:%s"\n' \
  "$plain_port" "$plain_port" >"$work/abs.lua"
for i in $(seq "$W2_TUNNELS"); do
  printf 'url = "http://127.0.0.1:%s/1k?t=%s"\noutput = "/dev/null"\n' "$plain_port" "$i"
done >"$work/w2.urls"

w3() { # workload
  local w=$1 out rps errs n cpu0 cpu1
  cpu0=$(cpu_ticks "$(pid_of "$w")")
  out=$(wrk -t 1 -c "$W3_CONNS" -d "${W3_SECS}s" --timeout 10s --latency -s "$work/abs.lua" \
    "http://127.0.0.1:$(port_of "$w")/" 2>&1) || log "w3 $w: wrk failed: $out"
  cpu1=$(cpu_ticks "$(pid_of "$w")")
  echo "$out" >"$work/w3-$w.out"
  n=$(awk '/requests in/ {print $1}' <<<"$out")
  last_cpu=$(awk -v t=$((cpu1 - cpu0)) -v hz="$clk_tck" -v n="${n:-0}" \
    'BEGIN {printf "%.2f", (n > 0 ? t / hz * 1e6 / n : 0)}')
  add "w3 $w cpu" "$last_cpu"
  rps=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' <<<"$out")
  errs=$(awk '/Socket errors:/ {gsub(/,/, ""); s += $4 + $6 + $8 + $10}
    /Non-2xx or 3xx responses:/ {s += $5} END {print s + 0}' <<<"$out")
  add "w3 $w rps" "${rps:-0}"
  add "w3 $w errs" "$errs"
  log "w3 $w: ${rps:-?} req/s, $errs errors, $last_cpu µs CPU per request"
  last=${rps:-0}
}
w2() { # workload
  local w=$1 t0 t1 n secs p99 cpu0 cpu1
  cpu0=$(cpu_ticks "$(pid_of "$w")")
  t0=$EPOCHREALTIME
  env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u no_proxy -u NO_PROXY \
    LD_LIBRARY_PATH="$CURL8_LIB" "$CURL8" -q -s -S -p -x "http://127.0.0.1:$(port_of "$w")" \
    --parallel --parallel-max "$W2_PARALLEL" --max-time 60 -H 'Connection: close' \
    -w '%{http_code} %{size_download} %{time_total}\n' -K "$work/w2.urls" \
    >"$work/w2-$w.out" 2>"$work/w2-$w.err" || log "w2 $w: curl failed: $(tail -3 "$work/w2-$w.err")"
  t1=$EPOCHREALTIME
  cpu1=$(cpu_ticks "$(pid_of "$w")")
  n=$(awk '$1 == 200 && $2 == 1024' "$work/w2-$w.out" | wc -l)
  last_cpu=$(awk -v t=$((cpu1 - cpu0)) -v hz="$clk_tck" -v n="$W2_TUNNELS" \
    'BEGIN {printf "%.4f", t / hz * 1000 / n}')
  add "w2 $w cpu" "$last_cpu"
  ((n == W2_TUNNELS)) || log "w2 $w: $n of $W2_TUNNELS tunnels answered 200 with 1 KiB"
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
  p99=$(awk '{print $3 * 1000}' "$work/w2-$w.out" | sort -g |
    awk '{v[NR] = $1} END {j = int(NR * 0.99 + 0.999); printf "%.2f", v[j < 1 ? 1 : j]}')
  add "w2 $w tps" "$(awk -v n="$n" -v s="$secs" 'BEGIN {printf "%.0f", n / s}')"
  add "w2 $w p99" "$p99"
  log "w2 $w: $n tunnels in ${secs}s, p99 $p99 ms, $last_cpu ms CPU per tunnel"
  last=$(awk -v n="$n" -v s="$secs" 'BEGIN {printf "%.0f", n / s}')
}

if [[ -n ${CALLGRIND:-} ]]; then
  # Instructions per request: each h2gate warmed by two requests (its
  # upstream connection and the PAC's cached answer made), its counters
  # zeroed, CG_REQUESTS requests, its counters dumped.
  require_tools valgrind callgrind_control
  CG_REQUESTS=${CG_REQUESTS:-2000}
  for i in $(seq "$CG_REQUESTS"); do
    printf 'url = "http://127.0.0.1:%s/1k?c=%s"\noutput = "/dev/null"\n' "$plain_port" "$i"
  done >"$work/cg.urls"
  cg_curl() { # workload curl-args...
    local w=$1
    shift
    "${no_proxy_env[@]}" LD_LIBRARY_PATH="$CURL8_LIB" "$CURL8" -q -s -S \
      -x "http://127.0.0.1:$(port_of "$w")" "$@"
  }
  declare -A IR
  for w in "${workloads[@]}"; do
    cg_curl "$w" -o /dev/null "http://127.0.0.1:$plain_port/1k?warm1"
    cg_curl "$w" -o /dev/null "http://127.0.0.1:$plain_port/1k?warm2"
    callgrind_control -z "$(pid_of "$w")" >/dev/null
    ok=$(cg_curl "$w" --parallel --parallel-max 50 --max-time 600 -w '%{http_code}\n' \
      -K "$work/cg.urls" | grep -c '^200$' || true)
    callgrind_control -d "requests" "$(pid_of "$w")" >/dev/null
    ((ok == CG_REQUESTS)) || log "$w: $ok of $CG_REQUESTS requests answered 200"
    sleep 1
    ir=$(awk '/^summary:/ {print $2; exit}' "$work/callgrind.$w".*)
    IR[$w]=$(awk -v a="$ir" -v n="$CG_REQUESTS" 'BEGIN {printf "%.0f", a / n}')
    log "$w: ${IR[$w]} instructions per request"
  done
  cat <<EOF

PAC routing vs the same 50 rules as native routes: h2gate's instructions per
request (user space, valgrind --tool=callgrind), $CG_REQUESTS absolute-form requests, 50 at a time
(n), (p): $H2GATE_BIN${H2GATE_BIN2:+
(n2), (p2): $H2GATE_BIN2 ($BIN2_LABEL)}
| build | (n) native routes | (p) PAC file | p / n |
|---|---|---|---|
| (n), (p) | ${IR[n]} | ${IR[p]} | $(div "${IR[p]}" "${IR[n]}") |
EOF
  if [[ -n ${H2GATE_BIN2:-} ]]; then
    echo "| (n2), (p2) $BIN2_LABEL | ${IR[n2]} | ${IR[p2]} | $(div "${IR[p2]}" "${IR[n2]}") |"
  fi
  echo
  echo "target: p / n <= 1.05: $(div "${IR[p]}" "${IR[n]}") $(awk -v a="${IR[p]}" -v b="${IR[n]}" 'BEGIN {print (a / b <= 1.05 ? "✓" : "✗")}')"
  exit 0
fi

# Per round: every workload's W3, then every workload's W2, the order
# rotating so that each goes first in turn; the ratios p/n (and p2/n2) are
# taken within the round.
declare -A LAST LAST_CPU
ratios() { # section pac-workload native-workload suffix
  add "$1 ratio$4" "$(div "${LAST["$1 $2"]}" "${LAST["$1 $3"]}")"
  add "$1 cpu ratio$4" "$(div "${LAST_CPU["$1 $2"]}" "${LAST_CPU["$1 $3"]}")"
}
for r in $(seq "$ROUNDS"); do
  k=$(((r - 1) % ${#workloads[@]}))
  order=("${workloads[@]:k}" "${workloads[@]:0:k}")
  for section in w3 w2; do
    for w in "${order[@]}"; do
      check_alive "$(pid_of "$w")" "h2gate $w"
      "$section" "$w"
      LAST["$section $w"]=$last
      LAST_CPU["$section $w"]=$last_cpu
    done
    ratios "$section" p n ""
    [[ -z ${H2GATE_BIN2:-} ]] || ratios "$section" p2 n2 2
  done
done

pac_metrics() { # workload
  "${no_proxy_env[@]}" curl -s --max-time 10 --retry 2 "http://127.0.0.1:${ADMIN[$1]}/metrics" |
    grep -E '^h2gate_pac_(evaluations|cache_hits|fallbacks)_total' | tr '\n' ' ' || true
}
# The median of the per-round ratios against the target, with ✓ or ✗.
verdict() { # key op target
  local m
  # shellcheck disable=SC2086
  m=$(median ${R[$1]:-})
  awk -v m="$m" -v op="$2" -v t="$3" 'BEGIN {
    if (m == "" || m == "nan") { printf "? %s %s", op, t; exit }
    ok = (op == ">=") ? m + 0 >= t + 0 : m + 0 <= t + 0
    printf "%.3f %s %s %s", m, op, t, (ok ? "✓" : "✗") }'
}

cat <<EOF

PAC routing vs the same 50 rules as native routes ($ROUNDS rounds; load average at start $load0)
(n), (p): $H2GATE_BIN${H2GATE_BIN2:+
(n2), (p2): $H2GATE_BIN2 ($BIN2_LABEL)}
| figure | (n) native routes | (p) PAC file | p / n (per round) |
|---|---|---|---|
| W3 absolute-form req/s ($W3_CONNS conns, ${W3_SECS}s) | $(cell "w3 n rps" %.0f) | $(cell "w3 p rps" %.0f) | $(cell "w3 ratio" %.3f) |
| W3 errors | $(cell "w3 n errs" %.0f) | $(cell "w3 p errs" %.0f) | |
| W3 h2gate CPU µs per request | $(cell "w3 n cpu" %.2f) | $(cell "w3 p cpu" %.2f) | $(cell "w3 cpu ratio" %.3f) |
| W2 tunnels/s ($W2_TUNNELS, $W2_PARALLEL at a time) | $(cell "w2 n tps" %.0f) | $(cell "w2 p tps" %.0f) | $(cell "w2 ratio" %.3f) |
| W2 p99 ms | $(cell "w2 n p99" %.2f) | $(cell "w2 p p99" %.2f) | |
| W2 h2gate CPU ms per tunnel | $(cell "w2 n cpu" %.3f) | $(cell "w2 p cpu" %.3f) | $(cell "w2 cpu ratio" %.3f) |
EOF
if [[ -n ${H2GATE_BIN2:-} ]]; then
  cat <<EOF
| (n2) / (p2) W3 req/s | $(cell "w3 n2 rps" %.0f) | $(cell "w3 p2 rps" %.0f) | $(cell "w3 ratio2" %.3f) |
| (n2) / (p2) W3 errors | $(cell "w3 n2 errs" %.0f) | $(cell "w3 p2 errs" %.0f) | |
| (n2) / (p2) W3 h2gate CPU µs per request | $(cell "w3 n2 cpu" %.2f) | $(cell "w3 p2 cpu" %.2f) | $(cell "w3 cpu ratio2" %.3f) |
| (n2) / (p2) W2 tunnels/s | $(cell "w2 n2 tps" %.0f) | $(cell "w2 p2 tps" %.0f) | $(cell "w2 ratio2" %.3f) |
| (n2) / (p2) W2 h2gate CPU ms per tunnel | $(cell "w2 n2 cpu" %.3f) | $(cell "w2 p2 cpu" %.3f) | $(cell "w2 cpu ratio2" %.3f) |
EOF
fi
cat <<EOF

target: with the answer cache, PAC at most 5 % slower than native routes
(median of the per-round ratios; CPU per request is the steady figure, req/s swing with the load)
  W3 CPU per request p / n: $(verdict "w3 cpu ratio" "<=" 1.05)
  W2 CPU per tunnel p / n:  $(verdict "w2 cpu ratio" "<=" 1.05)
  W3 req/s p / n:           $(verdict "w3 ratio" ">=" 0.95)
  W2 tunnels/s p / n:       $(verdict "w2 ratio" ">=" 0.95)
EOF
if [[ -n ${H2GATE_BIN2:-} ]]; then
  cat <<EOF
  (${BIN2_LABEL}) W3 CPU per request p2 / n2: $(verdict "w3 cpu ratio2" "<=" 1.05)
  (${BIN2_LABEL}) W2 CPU per tunnel p2 / n2:  $(verdict "w2 cpu ratio2" "<=" 1.05)
EOF
fi
echo "(p) metrics at the end: $(pac_metrics p)"
[[ -z ${H2GATE_BIN2:-} ]] || echo "(p2) metrics at the end: $(pac_metrics p2)"
