#!/usr/bin/env bash
# The benchmark suite: h2gate against the alternatives and the
# physical floor, on loopback. One command, one table on stdout (progress on
# stderr). Figures, not a pass/fail test: every target is printed with ✓/✗.
#
#   (a) app ──HTTP/1.1──▶ h2gate ══TLS h2, one connection══▶ nghttpx ──▶ squid ──▶ nginx
#   (b) curl 8 ═══TLS h2 (--proxy-http2), one connection per tunnel═══▶ nghttpx ──▶ …
#   (c) app ──HTTP/1.1──▶ squid child ══TLS HTTP/1.1, one per tunnel══▶ nghttpx ──▶ …
#
# Environment: QUICK=1 (1 round, small sizes: proves every workload runs),
# ROUNDS (3), ONLY (sections to run, default "w1 up w2 w3 cold scale floor"),
# H2GATE_BIN (build/h2gate, a Release build), CURL8_DIR, KEEP_WORK=1.
# H2GATE_BIN2: a second h2gate binary (another build to compare with); when set,
# W1 down and up and W3 also run it as workload (m) in the same rounds and print
# the (a)/(m) CPU s/GB and req/s ratios per round. H2GATE_BIN2_LABEL names it in the table.
# H2GATE_NOMETRICS_BIN: the same, for a binary built with -DH2GATE_METRICS=OFF
# (checked), labelled "metrics off": the cost of the metrics.
# H2GATE_WINDOWS_EXE (build-windows/h2gate.exe) and H2GATE_WINE (wine's loader,
# /usr/lib/wine/wine64), both set: W1 down and up also run h2gate.exe under
# wine as workload (w) in the same rounds (CPU: h2gate.exe + its wineserver),
# and print the (w)/(a) ratios per round: what wine costs, not a Windows figure.
# Sizes: W1_TRANSFERS (20), W1_MIB (100), UP_MIB (100), W2_TUNNELS (2000),
# W2_PARALLEL (50), W3_SECS (10), W3_CONNS (50), SCALE_IDLE (5000),
# SCALE_ACTIVE (500), SCALE_MIB (1). See tests/bench/README.md.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_NAME=bench
# shellcheck source=tests/bench/lib.sh
source "$here/lib.sh"
if [[ -n ${H2GATE_NOMETRICS_BIN:-} ]]; then
  "$H2GATE_NOMETRICS_BIN" --version | grep -q 'H2GATE_METRICS=OFF' ||
    die "$H2GATE_NOMETRICS_BIN was not built with -DH2GATE_METRICS=OFF"
  H2GATE_BIN2=$H2GATE_NOMETRICS_BIN
  H2GATE_BIN2_LABEL=${H2GATE_BIN2_LABEL:-metrics off}
fi
if [[ -n ${H2GATE_BIN2:-} ]]; then H2GATE_BIN2=$(readlink -m "$H2GATE_BIN2"); fi
if [[ -n ${H2GATE_WINDOWS_EXE:-} ]]; then H2GATE_WINDOWS_EXE=$(readlink -m "$H2GATE_WINDOWS_EXE"); fi
BIN2_LABEL=${H2GATE_BIN2_LABEL:-$(basename "$(dirname "${H2GATE_BIN2:-x/x}")")}

if [[ -n ${QUICK:-} ]]; then
  ROUNDS=${ROUNDS:-1} W1_MIB=${W1_MIB:-8} UP_MIB=${UP_MIB:-8} W2_TUNNELS=${W2_TUNNELS:-200}
  W3_SECS=${W3_SECS:-3} SCALE_IDLE=${SCALE_IDLE:-500} SCALE_ACTIVE=${SCALE_ACTIVE:-100}
fi
ROUNDS=${ROUNDS:-3}
ONLY=${ONLY:-w1 up w2 w3 cold scale floor}
W1_TRANSFERS=${W1_TRANSFERS:-20}
W1_MIB=${W1_MIB:-100}
UP_MIB=${UP_MIB:-100}
W2_TUNNELS=${W2_TUNNELS:-2000}
W2_PARALLEL=${W2_PARALLEL:-50}
W3_SECS=${W3_SECS:-10}
W3_CONNS=${W3_CONNS:-50}
SCALE_IDLE=${SCALE_IDLE:-5000}
SCALE_ACTIVE=${SCALE_ACTIVE:-500}
SCALE_MIB=${SCALE_MIB:-1}

want() { [[ " $ONLY " == *" $1 "* ]]; }

require_tools nginx nghttpx squid openssl python3 "$CURL7"
require_curl8
want w3 && require_tools wrk h2load
want floor && require_tools iperf3

bench_init
make_certs
start_nginx
start_squid_backend
start_nghttpx
start_h2gate
if [[ -n ${H2GATE_BIN2:-} ]]; then
  [[ -x $H2GATE_BIN2 ]] || die "H2GATE_BIN2=$H2GATE_BIN2 is not executable"
  spawn_h2gate h2gate2 "$H2GATE_BIN2"
  bin2_port=$last_port
  bin2_pid=$last_pid
fi
if [[ -n ${H2GATE_WINDOWS_EXE:-} || -n ${H2GATE_WINE:-} ]]; then
  [[ -n ${H2GATE_WINDOWS_EXE:-} && -n ${H2GATE_WINE:-} ]] ||
    die "h2gate.exe under wine needs both H2GATE_WINDOWS_EXE and H2GATE_WINE"
  if want w1 || want up; then start_h2gate_wine "$H2GATE_WINDOWS_EXE" "$H2GATE_WINE"; fi
fi
start_squid_child
head -c 1024 /dev/urandom >"$work/www/1k"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
log "rounds: $ROUNDS, work dir $work, load average $load0"

declare -A R # "<key>" -> space-separated values, one per round
add() { R[$1]+="$2 "; }
# shellcheck disable=SC2086 # word splitting wanted
cell() { summary "$2" ${R[$1]:-}; }
# shellcheck disable=SC2086
med() { median ${R[$1]:-}; }
div() { awk -v a="$1" -v b="$2" -v f="${3:-%.3f}" 'BEGIN {if (b == 0) print "nan"; else printf f, a / b}'; }
# ✓ when "median op threshold" holds, ✗ otherwise (also when there is no figure).
judge() { # key op threshold
  local m
  m=$(med "$1")
  [[ -n $m && $m != nan ]] || {
    echo "✗"
    return
  }
  awk -v m="$m" -v op="$2" -v t="$3" 'BEGIN {
    ok = (op == "<=") ? m <= t : (op == ">=") ? m >= t : (op == "==") ? m == t : 0
    print ok ? "✓" : "✗"}'
}
# Rotates the workloads so that each goes first in some round.
rotate() { # round workloads...
  local r=$1
  shift
  local n=$# i
  for ((i = 0; i < n; i++)); do
    local k=$((((r + i) % n) + 1))
    echo "${!k}"
  done
}
curl8="env LD_LIBRARY_PATH=$CURL8_LIB $CURL8"
curl_for() { # workload [app curl] -> the app command line (proxy settings included)
  local app=${2:-$CURL7}
  case $1 in
    a) echo "$app -p -x http://127.0.0.1:$h2gate_port" ;;
    b) echo "$curl8 -p --proxy https://127.0.0.1:$nghttpx_port --proxy-cacert $work/ca.pem --proxy-http2" ;;
    c) echo "$app -p -x http://127.0.0.1:$child_port" ;;
    m) echo "$app -p -x http://127.0.0.1:$bin2_port" ;;
    w) echo "$app -p -x http://127.0.0.1:$wine_port" ;;
  esac
}
sidecar_pid() { # workload -> pid of the sidecar process, empty for (b)
  case $1 in
    a) echo "$h2gate_pid" ;;
    c) echo "$child_pid" ;;
    m) echo "$bin2_pid" ;;
    w) echo "$wine_pid" ;;
  esac
}
# CPU ticks of workload $1's processes: the sidecar, and for (w) wine's
# wineserver too (every system call of a wine process that waits, or touches
# a handle, is a request to it).
workload_ticks() { # workload pid
  local t
  t=$(cpu_ticks "$2")
  if [[ $1 == w ]]; then t=$((t + $(cpu_ticks "$wineserver_pid"))); fi
  echo "$t"
}
wait_log_lines() { # before count: nghttpx logs a tunnel when it closes
  for _ in $(seq 100); do
    if (($(log_lines) - $1 >= $2)); then return 0; fi
    sleep 0.1
  done
}

# --- W1: bulk download and upload ----------------------------------------------
# One round of workload $2 in direction $1 (down|up): W1_TRANSFERS parallel
# tunnels, inner TLS (HTTP/1.1) to nginx, one transfer per tunnel.
w1_round() { # dir workload
  local dir=$1 w=$2 pid before t0 t1 cpu0 cpu1 out got expect secs mbps conns cmd others0 others1 ws0 ws1
  local -a args=() others=()
  pid=$(sidecar_pid "$w")
  check_alive "$h2gate_pid" h2gate
  check_alive "$child_pid" "squid child"
  if [[ $w == w ]]; then
    check_alive "$wine_pid" "h2gate.exe under wine"
    check_alive "$wineserver_pid" wineserver
  fi
  local mib=$W1_MIB
  if [[ $dir == up ]]; then mib=$UP_MIB; fi
  expect=$((W1_TRANSFERS * (mib << 20)))
  for i in $(seq "$W1_TRANSFERS"); do
    if [[ $dir == down ]]; then
      args+=(-o /dev/null "https://127.0.0.1:$origin_port/w1.bin?t=$i")
    else
      args+=(-o /dev/null -T "$work/up.bin" "https://127.0.0.1:$origin_port/upload?t=$i")
    fi
  done
  before=$(log_lines)
  if [[ -n $pid ]]; then
    reset_hwm "$pid"
    if [[ $w == w ]]; then
      reset_hwm "$wineserver_pid"
      ws0=$(cpu_ticks "$wineserver_pid")
      mapfile -t others < <(wine_session_pids)
      others0=$(sum_ticks "${others[@]}")
    fi
    cpu0=$(workload_ticks "$w" "$pid")
  fi
  read -r -a cmd <<<"$(curl_for "$w")"
  t0=$EPOCHREALTIME
  out=$("${no_proxy_env[@]}" "${cmd[@]}" -q -s -S --fail --cacert "$work/ca.pem" --http1.1 \
    -H 'Expect:' --parallel --parallel-max "$W1_TRANSFERS" --parallel-immediate --max-time 300 \
    -w '%{size_download} %{size_upload}\n' "${args[@]}" 2>"$work/curl-$dir-$w.err") ||
    log "$dir $w: curl failed: $(tail -3 "$work/curl-$dir-$w.err")"
  t1=$EPOCHREALTIME
  if [[ -n $pid ]]; then cpu1=$(workload_ticks "$w" "$pid"); fi
  if [[ $w == w ]]; then
    ws1=$(cpu_ticks "$wineserver_pid")
    others1=$(sum_ticks "${others[@]}")
  fi
  if [[ $dir == down ]]; then
    got=$(awk '{s += $1} END {printf "%d", s}' <<<"$out")
  else
    got=$(awk '{s += $2} END {printf "%d", s}' <<<"$out")
  fi
  ((got == expect)) || log "$dir $w: moved $got bytes, expected $expect: figures not comparable"
  wait_log_lines "$before" "$W1_TRANSFERS"
  conns=$(tls_conns_since "$before")
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
  mbps=$(awk -v n="$got" -v s="$secs" 'BEGIN {printf "%.1f", n / 1e6 / s}')
  add "$dir $w mbps" "$mbps"
  add "$dir $w conns" "$conns"
  if [[ -n $pid ]]; then
    add "$dir $w cpu" "$(awk -v t=$((cpu1 - cpu0)) -v hz="$clk_tck" -v n="$got" \
      'BEGIN {printf "%.3f", (n > 0 ? t / hz / (n / 1e9) : 0)}')"
    add "$dir $w rss" "$(awk -v k="$(vm_hwm_kib "$pid")" 'BEGIN {printf "%.1f", k / 1024}')"
    if [[ $w == w ]]; then
      add "$dir ws rss" "$(awk -v k="$(vm_hwm_kib "$wineserver_pid")" 'BEGIN {printf "%.1f", k / 1024}')"
      add "$dir wsc cpu" "$(awk -v t=$((ws1 - ws0)) -v hz="$clk_tck" -v n="$got" \
        'BEGIN {printf "%.3f", (n > 0 ? t / hz / (n / 1e9) : 0)}')"
      add "$dir wo cpu" "$(awk -v t=$((others1 - others0)) -v hz="$clk_tck" -v n="$got" \
        'BEGIN {printf "%.3f", (n > 0 ? t / hz / (n / 1e9) : 0)}')"
    fi
  fi
  log "$dir $w: $got bytes in ${secs}s = $mbps MB/s, $conns TLS connection(s) to nghttpx"
  if [[ $w == w ]]; then
    log "$dir w: CPU ticks h2gate.exe $((cpu1 - cpu0 - ws1 + ws0)), wineserver $((ws1 - ws0)), the ${#others[@]} other processes of the wine session $((others1 - others0))"
  fi
  last_mbps=$mbps
}
w1() { # dir
  local dir=$1 r w a c wm
  local -a ws=(a b c)
  if [[ -n ${bin2_pid:-} ]]; then ws+=(m); fi
  if [[ -n ${wine_pid:-} ]]; then ws+=(w); fi
  for r in $(seq "$ROUNDS"); do
    for w in $(rotate "$r" "${ws[@]}"); do
      w1_round "$dir" "$w"
      case $w in a) a=$last_mbps ;; c) c=$last_mbps ;; w) wm=$last_mbps ;; esac
    done
    add "$dir ratio a/c" "$(div "$a" "$c")"
    if [[ -n ${wine_pid:-} ]]; then
      add "$dir ratio mbps w/a" "$(div "$wm" "$a")"
      add "$dir ratio cpu w/a" "$(div "$(last_of "$dir w cpu")" "$(last_of "$dir a cpu")")"
    fi
    if [[ -n ${bin2_pid:-} ]]; then
      add "$dir ratio cpu a/m" "$(div "$(last_of "$dir a cpu")" "$(last_of "$dir m cpu")")"
    fi
  done
}
# The figure of the latest round.
# shellcheck disable=SC2206 # word splitting wanted
last_of() { local v=(${R[$1]:-}); echo "${v[-1]:-}"; } # key

if want w1; then
  head -c "$((W1_MIB << 20))" /dev/urandom >"$work/www/w1.bin"
  log "W1 download: $W1_TRANSFERS x $W1_MIB MiB"
  w1 down
  rm -f "$work/www/w1.bin"
fi

if want up; then
  head -c "$((UP_MIB << 20))" /dev/urandom >"$work/up.bin"
  log "W1 upload: $W1_TRANSFERS x $UP_MIB MiB (nginx reads and discards)"
  w1 up
  rm -f "$work/up.bin"
fi

# --- W2: tunnel setup --------------------------------------------------------------
# W2_TUNNELS tunnels, W2_PARALLEL at a time, each one plain-HTTP GET of 1 KiB
# (Connection: close, so curl cannot reuse a tunnel). Latency: curl's
# time_total of each transfer (CONNECT, request, response). The app is curl 8.
w2_round() { # workload
  local w=$1 pid before t0 t1 cpu0 cpu1 secs n cmd p50 p99
  pid=$(sidecar_pid "$w")
  before=$(log_lines)
  cpu0=$(cpu_ticks "$pid")
  # curl 8 as the app: curl 7.88's --parallel leaves about 32 of its first 50
  # transfers unfinished (first byte at once, done only when all others are),
  # which made p99 the run's wall time whatever the proxy.
  read -r -a cmd <<<"$(curl_for "$w" "$curl8")"
  t0=$EPOCHREALTIME
  "${no_proxy_env[@]}" "${cmd[@]}" -q -s -S --fail --parallel --parallel-max "$W2_PARALLEL" \
    --max-time 60 -H 'Connection: close' -w '%{http_code} %{size_download} %{time_total}\n' \
    -K "$work/w2.urls" >"$work/w2-$w.out" 2>"$work/w2-$w.err" ||
    log "w2 $w: curl failed: $(tail -3 "$work/w2-$w.err")"
  t1=$EPOCHREALTIME
  cpu1=$(cpu_ticks "$pid")
  n=$(awk '$1 == 200 && $2 == 1024' "$work/w2-$w.out" | wc -l)
  ((n == W2_TUNNELS)) || log "w2 $w: $n of $W2_TUNNELS requests answered 200 with 1 KiB"
  wait_log_lines "$before" "$W2_TUNNELS"
  log "w2 $w: $(tail -n +"$((before + 1))" "$nghttpx_log" | grep -cF '"CONNECT ') tunnels seen by nghttpx"
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
  add "w2 $w rps" "$(div "$n" "$secs" %.0f)"
  add "w2 $w cpu" "$(awk -v t=$((cpu1 - cpu0)) -v hz="$clk_tck" -v n="$W2_TUNNELS" \
    'BEGIN {printf "%.4f", t / hz * 1000 / n}')"
  # p50 and p99 (nearest rank) of time_total, in ms
  read -r p50 p99 < <(awk '{print $3 * 1000}' "$work/w2-$w.out" | sort -g |
    awk '{v[NR] = $1} END {i = int(NR * 0.5 + 0.999); j = int(NR * 0.99 + 0.999)
      printf "%.2f %.2f\n", v[i < 1 ? 1 : i], v[j < 1 ? 1 : j]}')
  add "w2 $w p50" "$p50"
  add "w2 $w p99" "$p99"
  log "w2 $w: $n tunnels in ${secs}s, p50 $p50 ms, p99 $p99 ms"
  last_p99=$p99
}
if want w2; then
  for i in $(seq "$W2_TUNNELS"); do
    printf 'url = "http://127.0.0.1:%s/1k?t=%s"\noutput = "/dev/null"\n' "$plain_port" "$i"
  done >"$work/w2.urls"
  log "W2 tunnel setup: $W2_TUNNELS tunnels, $W2_PARALLEL in parallel"
  for r in $(seq "$ROUNDS"); do
    for w in $(rotate "$r" a c); do
      w2_round "$w"
      case $w in a) pa=$last_p99 ;; c) pc=$last_p99 ;; esac
    done
    add "w2 ratio p99 a/c" "$(div "$pa" "$pc")"
  done
fi

# --- W3: absolute-form requests ----------------------------------------------------
# wrk, one thread, W3_CONNS connections, GET http://origin/1k in absolute form
# (a Lua script sets the path) for W3_SECS. Baseline: h2load straight to
# nghttpx, one connection with W3_CONNS streams.
w3_wrk() { # workload port
  local w=$1 port=$2 pid cpu0 cpu1 out rps p99 errs n
  pid=$(sidecar_pid "$w")
  cpu0=$(cpu_ticks "$pid")
  out=$(wrk -t 1 -c "$W3_CONNS" -d "${W3_SECS}s" --timeout 10s --latency -s "$work/abs.lua" \
    "http://127.0.0.1:$port/" 2>&1) || log "w3 $w: wrk failed: $out"
  cpu1=$(cpu_ticks "$pid")
  echo "$out" >"$work/w3-$w.out"
  rps=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' <<<"$out")
  n=$(awk '/requests in/ {print $1}' <<<"$out")
  p99=$(awk '$1 == "99%" {v = $2; u = v; sub(/[a-z]+$/, "", v); sub(/^[0-9.]+/, "", u)
    printf "%.2f", v * (u == "us" ? 0.001 : u == "s" ? 1000 : 1)}' <<<"$out")
  errs=$(awk '/Socket errors:/ {gsub(/,/, ""); s += $4 + $6 + $8 + $10}
    /Non-2xx or 3xx responses:/ {s += $5} END {print s + 0}' <<<"$out")
  add "w3 $w rps" "${rps:-0}"
  add "w3 $w p99" "${p99:-nan}"
  add "w3 $w errs" "$errs"
  add "w3 $w cpu" "$(awk -v t=$((cpu1 - cpu0)) -v hz="$clk_tck" -v n="${n:-0}" \
    'BEGIN {printf "%.1f", (n > 0 ? t / hz * 1e6 / n : 0)}')"
  log "w3 $w: ${rps:-?} req/s, p99 ${p99:-?} ms, $errs errors"
  last_rps=${rps:-0}
}
w3_h2load() {
  local out rps
  out=$(h2load -t 1 -c 1 -m "$W3_CONNS" -D "$W3_SECS" -H ":scheme: http" \
    -H ":authority: 127.0.0.1:$plain_port" "https://127.0.0.1:$nghttpx_port/1k" 2>&1) ||
    log "w3 h2load failed: $(tail -3 <<<"$out")"
  echo "$out" >"$work/w3-h2load.out"
  rps=$(awk '/^finished in/ {gsub(/,/, ""); printf "%.0f", $4}' <<<"$out")
  add "w3 h rps" "${rps:-0}"
  add "w3 h failed" "$(awk '/^requests:/ {print $10 + $12 + $14}' <<<"$out")"
  log "w3 h2load: ${rps:-?} req/s"
  last_rps=${rps:-0}
}
if want w3; then
  printf 'wrk.path = "http://127.0.0.1:%s/1k"\nwrk.headers["Host"] = "127.0.0.1:%s"\n' \
    "$plain_port" "$plain_port" >"$work/abs.lua"
  log "W3 absolute-form: $W3_CONNS connections, ${W3_SECS}s each"
  for r in $(seq "$ROUNDS"); do
    ws3=(a c h)
    if [[ -n ${bin2_pid:-} ]]; then ws3+=(m); fi
    for w in $(rotate "$r" "${ws3[@]}"); do
      case $w in
        a) w3_wrk a "$h2gate_port" && ra=$last_rps ;;
        c) w3_wrk c "$child_port" && rc=$last_rps ;;
        h) w3_h2load && rh=$last_rps ;;
        m) w3_wrk m "$bin2_port" && rm=$last_rps ;;
      esac
    done
    add "w3 ratio a/c" "$(div "$ra" "$rc")"
    add "w3 ratio a/h" "$(div "$ra" "$rh")"
    if [[ -n ${bin2_pid:-} ]]; then add "w3 ratio a/m" "$(div "$ra" "$rm")"; fi
  done
fi

# --- cold start ----------------------------------------------------------------------
# A fresh h2gate per round; the first request is sent as soon as its listener
# accepts, then nine more, one after another (a new app connection and tunnel
# each, plain HTTP inside). TTFB: curl's time_starttransfer.
if want cold; then
  log "cold start: TTFB of request 1 vs request 10 after h2gate starts"
  for r in $(seq "$ROUNDS"); do
    spawn_h2gate "cold$r"
    ttfb=()
    for i in $(seq 10); do
      ttfb+=("$("${no_proxy_env[@]}" "$CURL7" -q -s -S --fail -o /dev/null -p \
        -x "http://127.0.0.1:$last_port" -w '%{time_starttransfer}' \
        "http://127.0.0.1:$plain_port/1k?cold=$i" 2>>"$work/cold.err" || echo nan)")
    done
    stop_pid "$last_pid"
    first=$(awk -v s="${ttfb[0]}" 'BEGIN {printf "%.3f", s * 1000}')
    tenth=$(awk -v s="${ttfb[9]}" 'BEGIN {printf "%.3f", s * 1000}')
    add "cold first" "$first"
    add "cold tenth" "$tenth"
    add "cold ratio" "$(div "$first" "$tenth" %.2f)"
    log "cold round $r: first ${first} ms, 10th ${tenth} ms"
  done
fi

# --- scale -----------------------------------------------------------------------------
# A fresh h2gate per round, warmed by one tunnel (its upstream connection is
# up). Then SCALE_IDLE idle tunnels (CONNECT answered, nothing sent) stay open
# while SCALE_ACTIVE tunnels at once each GET a SCALE_MIB MiB file whose
# SHA-256 is checked. RSS per idle tunnel: VmRSS growth / idle tunnels.
if want scale; then
  head -c "$((SCALE_MIB << 20))" /dev/urandom >"$work/www/scale.bin"
  sha=$(sha256sum "$work/www/scale.bin" | cut -d' ' -f1)
  log "scale: $SCALE_IDLE idle tunnels, then $SCALE_ACTIVE active ones of $SCALE_MIB MiB"
  for r in $(seq "$ROUNDS"); do
    spawn_h2gate "scale$r"
    "${no_proxy_env[@]}" "$CURL7" -q -s -o /dev/null -p -x "http://127.0.0.1:$last_port" \
      "http://127.0.0.1:$plain_port/1k" || log "scale: warm-up request failed"
    out=$(python3 "$here/tunnels.py" --proxy-port "$last_port" --pid "$last_pid" \
      --target "127.0.0.1:$plain_port" --idle "$SCALE_IDLE" --active "$SCALE_ACTIVE" \
      --path /scale.bin --sha256 "$sha" 2>"$work/scale$r.err") ||
      log "scale: tunnels.py failed: $(tail -3 "$work/scale$r.err")"
    stop_pid "$last_pid"
    declare -A kv=()
    while IFS='=' read -r k v; do
      if [[ -n $k ]]; then kv[$k]=$v; fi
    done <<<"$out"
    idle_ok=${kv[idle_ok]:-0}
    add "scale idle ok" "$idle_ok"
    add "scale idle kib" "$(awk -v a="${kv[rss_before_kib]:-0}" -v b="${kv[rss_idle_kib]:-0}" \
      -v n="$idle_ok" 'BEGIN {printf "%.2f", (n > 0 ? (b - a) / n : 0)}')"
    add "scale rss mib" "$(awk -v b="${kv[rss_idle_kib]:-0}" 'BEGIN {printf "%.1f", b / 1024}')"
    add "scale active ok" "${kv[active_ok]:-0}"
    add "scale active secs" "${kv[active_secs]:-nan}"
    add "scale still open" "${kv[idle_still_open]:-0}"
    log "scale round $r: $(tr '\n' ' ' <<<"$out")$(head -2 "$work/scale$r.err" | tr '\n' ' ')"
    unset kv
  done
fi

# --- floor ------------------------------------------------------------------------------
if want floor; then
  log "floor: openssl speed aes-128-gcm, iperf3 loopback"
  for r in $(seq "$ROUNDS"); do
    # 1000s of bytes per second for 16 KiB blocks (one TLS record)
    k=$(openssl speed -seconds 1 -bytes 16384 -evp aes-128-gcm 2>/dev/null |
      awk '/^AES-128-GCM/ {sub(/k$/, "", $2); print $2}')
    add "floor aes gbps" "$(awk -v k="${k:-0}" 'BEGIN {printf "%.2f", k * 1000 / 1e9}')"
    add "floor aes spgb" "$(awk -v k="${k:-0}" 'BEGIN {printf "%.3f", (k > 0 ? 1e9 / (k * 1000) : 0)}')"
    port=$(free_port)
    iperf3 -s -1 -B 127.0.0.1 -p "$port" >"$work/iperf3-server.log" 2>&1 &
    pids+=($!)
    # not wait_port: a probe connection would be iperf3's one test (-1)
    for _ in $(seq 100); do
      if [[ -n $(ss -Hltn "sport = :$port") ]]; then break; fi
      sleep 0.05
    done
    bps=$(iperf3 -c 127.0.0.1 -p "$port" -t "${IPERF_SECS:-3}" -J 2>/dev/null |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])' ||
      echo 0)
    add "floor iperf gbps" "$(awk -v b="$bps" 'BEGIN {printf "%.2f", b / 8 / 1e9}')"
  done
fi

# --- the table ---------------------------------------------------------------------
rows=()
row() { rows+=("$1|$2|$3|$4|$5"); } # section figure value target mark
bin2_rows() { # dir: (m), the second h2gate, when it ran
  [[ -n ${bin2_pid:-} ]] || return 0
  row "$s" "(m) h2gate, $BIN2_LABEL: MB/s" "$(cell "$1 m mbps" %.0f)" "" ""
  row "$s" "(m) h2gate, $BIN2_LABEL: CPU s/GB" "$(cell "$1 m cpu" %.2f)" "" ""
  row "$s" "CPU s/GB (a) / (m) (per round)" "$(cell "$1 ratio cpu a/m" %.3f)" "" ""
}
wine_rows() { # dir: (w), h2gate.exe under wine, when it ran. Not Windows' own figures.
  [[ -n ${wine_pid:-} ]] || return 0
  row "$s" "(w) h2gate.exe under wine: MB/s" "$(cell "$1 w mbps" %.0f)" "" ""
  row "$s" "(w) under wine: CPU s/GB, .exe + wineserver" "$(cell "$1 w cpu" %.2f)" "" ""
  row "$s" "(w) under wine: peak RSS MiB, .exe / wineserver" \
    "$(cell "$1 w rss" %.1f) / $(cell "$1 ws rss" %.1f)" "" ""
  row "$s" "(w) under wine: of which wineserver CPU s/GB" "$(cell "$1 wsc cpu" %.2f)" "" ""
  row "$s" "(w) under wine: other wine processes CPU s/GB" "$(cell "$1 wo cpu" %.3f)" "" ""
  row "$s" "(w) under wine: upstream TLS connections" "$(cell "$1 w conns" %.0f)" "" ""
  row "$s" "(w)/(a) MB/s, wine / Linux (per round)" "$(cell "$1 ratio mbps w/a" %.2f)" "" ""
  row "$s" "(w)/(a) CPU s/GB, wine / Linux (per round)" "$(cell "$1 ratio cpu w/a" %.2f)" "" ""
}
if want w1; then
  s="W1 down"
  row "$s" "(a) h2gate MB/s" "$(cell 'down a mbps' %.0f)" "" ""
  row "$s" "(b) curl 8 --proxy-http2 MB/s" "$(cell 'down b mbps' %.0f)" "" ""
  row "$s" "(c) squid child MB/s" "$(cell 'down c mbps' %.0f)" "" ""
  row "$s" "h2gate MB/s / squid child MB/s (per round)" "$(cell 'down ratio a/c' %.2f)" ">= 1" \
    "$(judge 'down ratio a/c' '>=' 1)"
  row "$s" "h2gate CPU s/GB" "$(cell 'down a cpu' %.2f)" "<= 0.7" "$(judge 'down a cpu' '<=' 0.7)"
  bin2_rows down
  wine_rows down
  row "$s" "squid child CPU s/GB" "$(cell 'down c cpu' %.2f)" "" ""
  row "$s" "h2gate peak RSS MiB" "$(cell 'down a rss' %.1f)" "<= 16" "$(judge 'down a rss' '<=' 16)"
  row "$s" "squid child peak RSS MiB" "$(cell 'down c rss' %.1f)" "" ""
  row "$s" "h2gate upstream TLS connections" "$(cell 'down a conns' %.0f)" "1" "$(judge 'down a conns' '==' 1)"
  row "$s" "curl 8 / squid child TLS connections" "$(cell 'down b conns' %.0f) / $(cell 'down c conns' %.0f)" "" ""
fi
if want up; then
  s="W1 up"
  row "$s" "(a) h2gate MB/s" "$(cell 'up a mbps' %.0f)" "" ""
  row "$s" "(b) curl 8 --proxy-http2 MB/s" "$(cell 'up b mbps' %.0f)" "" ""
  row "$s" "(c) squid child MB/s" "$(cell 'up c mbps' %.0f)" "" ""
  row "$s" "h2gate MB/s / squid child MB/s (per round)" "$(cell 'up ratio a/c' %.2f)" "" ""
  row "$s" "h2gate CPU s/GB" "$(cell 'up a cpu' %.2f)" "<= 0.8" "$(judge 'up a cpu' '<=' 0.8)"
  bin2_rows up
  wine_rows up
  row "$s" "squid child CPU s/GB" "$(cell 'up c cpu' %.2f)" "" ""
  row "$s" "h2gate peak RSS MiB" "$(cell 'up a rss' %.1f)" "<= 16" "$(judge 'up a rss' '<=' 16)"
  row "$s" "squid child peak RSS MiB" "$(cell 'up c rss' %.1f)" "" ""
  row "$s" "h2gate upstream TLS connections" "$(cell 'up a conns' %.0f)" "" ""
fi
if want w2; then
  s="W2 setup"
  row "$s" "(a) h2gate tunnels/s" "$(cell 'w2 a rps' %.0f)" "" ""
  row "$s" "(c) squid child tunnels/s" "$(cell 'w2 c rps' %.0f)" "" ""
  row "$s" "(a) h2gate p50 / p99 ms" "$(cell 'w2 a p50' %.1f) / $(cell 'w2 a p99' %.1f)" "" ""
  row "$s" "(c) squid child p50 / p99 ms" "$(cell 'w2 c p50' %.1f) / $(cell 'w2 c p99' %.1f)" "" ""
  row "$s" "h2gate p99 / squid child p99 (per round)" "$(cell 'w2 ratio p99 a/c' %.2f)" "<= 1" \
    "$(judge 'w2 ratio p99 a/c' '<=' 1)"
  row "$s" "h2gate CPU ms per tunnel" "$(cell 'w2 a cpu' %.3f)" "<= 0.15" "$(judge 'w2 a cpu' '<=' 0.15)"
  row "$s" "squid child CPU ms per tunnel" "$(cell 'w2 c cpu' %.3f)" "" ""
fi
if want w3; then
  s="W3 abs"
  row "$s" "(a) h2gate req/s" "$(cell 'w3 a rps' %.0f)" "" ""
  row "$s" "(c) squid child req/s" "$(cell 'w3 c rps' %.0f)" "" ""
  row "$s" "h2load -> nghttpx (baseline) req/s" "$(cell 'w3 h rps' %.0f)" "" ""
  row "$s" "h2gate / squid child req/s (per round)" "$(cell 'w3 ratio a/c' %.2f)" ">= 2" \
    "$(judge 'w3 ratio a/c' '>=' 2)"
  row "$s" "h2gate / h2load baseline req/s (per round)" "$(cell 'w3 ratio a/h' %.2f)" ">= 0.7" \
    "$(judge 'w3 ratio a/h' '>=' 0.7)"
  row "$s" "h2gate errors (socket + non-2xx)" "$(cell 'w3 a errs' %.0f)" "0" "$(judge 'w3 a errs' '==' 0)"
  row "$s" "squid child errors / h2load failed" "$(cell 'w3 c errs' %.0f) / $(cell 'w3 h failed' %.0f)" "" ""
  row "$s" "h2gate / squid child p99 ms" "$(cell 'w3 a p99' %.1f) / $(cell 'w3 c p99' %.1f)" "" ""
  row "$s" "h2gate / squid child CPU us per request" "$(cell 'w3 a cpu' %.0f) / $(cell 'w3 c cpu' %.0f)" "" ""
  if [[ -n ${bin2_pid:-} ]]; then
    row "$s" "(m) h2gate, $BIN2_LABEL: req/s" "$(cell 'w3 m rps' %.0f)" "" ""
    row "$s" "(m) h2gate, $BIN2_LABEL: CPU us per request" "$(cell 'w3 m cpu' %.0f)" "" ""
    row "$s" "req/s (a) / (m) (per round)" "$(cell 'w3 ratio a/m' %.3f)" "" ""
  fi
fi
if want cold; then
  s="cold"
  row "$s" "first request TTFB ms" "$(cell 'cold first' %.2f)" "" ""
  row "$s" "10th request TTFB ms" "$(cell 'cold tenth' %.2f)" "" ""
  row "$s" "first / 10th (per round)" "$(cell 'cold ratio' %.2f)" "<= 1.5" "$(judge 'cold ratio' '<=' 1.5)"
fi
if want scale; then
  s="scale"
  row "$s" "idle tunnels open (of $SCALE_IDLE)" "$(cell 'scale idle ok' %.0f)" "$SCALE_IDLE" \
    "$(judge 'scale idle ok' '==' "$SCALE_IDLE")"
  row "$s" "h2gate RSS KiB per idle tunnel" "$(cell 'scale idle kib' %.2f)" "<= 10" "$(judge 'scale idle kib' '<=' 10)"
  row "$s" "h2gate RSS MiB with the idle tunnels" "$(cell 'scale rss mib' %.1f)" "" ""
  row "$s" "active tunnels byte-identical (of $SCALE_ACTIVE)" "$(cell 'scale active ok' %.0f)" "$SCALE_ACTIVE" \
    "$(judge 'scale active ok' '==' "$SCALE_ACTIVE")"
  row "$s" "seconds for the active tunnels" "$(cell 'scale active secs' %.2f)" "" ""
  row "$s" "idle tunnels still open afterwards" "$(cell 'scale still open' %.0f)" "" ""
fi
if want floor; then
  s="floor"
  row "$s" "openssl AES-128-GCM GB/s (16 KiB, 1 core)" "$(cell 'floor aes gbps' %.2f)" "" ""
  row "$s" "= CPU s/GB to decrypt once" "$(cell 'floor aes spgb' %.3f)" "" ""
  row "$s" "iperf3 loopback GB/s (1 stream)" "$(cell 'floor iperf gbps' %.2f)" "" ""
  for dir in down up; do
    if [[ -n ${R["$dir a cpu"]:-} ]]; then
      row "$s" "W1 $dir h2gate CPU s/GB / the AES floor" \
        "$(div "$(med "$dir a cpu")" "$(med 'floor aes spgb')" %.1f)x (medians)" "" ""
    fi
  done
fi

echo
echo "h2gate benchmark suite: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), Linux $(uname -r)"
echo "load average (1, 5, 15 min) at start: $load0; at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$ROUNDS round(s)${QUICK:+ (QUICK)}; every figure: median (min-max) over the rounds; ratios taken within a round"
fmt='%-9s | %-44s | %-36s | %-8s | %s\n'
{
  # shellcheck disable=SC2059 # the format is ours
  printf "$fmt" "section" "figure" "median (min-max)" "target" ""
  for line in "${rows[@]}"; do
    IFS='|' read -r a b c d e <<<"$line"
    # shellcheck disable=SC2059
    printf "$fmt" "$a" "$b" "$c" "$d" "$e"
  done
} | sed 's/ *$//'
