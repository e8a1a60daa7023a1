#!/usr/bin/env bash
# Download benchmark on loopback: many CONNECT tunnels to one HTTPS origin
# through an HTTP/2 upstream proxy, h2gate (one multiplexed connection) versus
# curl 8 speaking h2 to the proxy itself (one connection per tunnel).
#
#   app ──HTTP/1.1 CONNECT──▶ h2gate ══TLS h2══▶ nghttpx ──▶ squid ──▶ nginx  (a)
#   curl 8 ═════════════TLS h2 (--proxy-http2)══▶ nghttpx ──▶ squid ──▶ nginx  (b)
#
# Prints figures; it is not a pass/fail test. See tests/bench/README.md.
# Environment: H2GATE_BIN (default build/h2gate, a Release build), ROUNDS (5),
# TRANSFERS (20), FILE_MIB (100), CURL8_DIR (/opt/h2gate-test/curl8),
# KEEP_WORK=1 keeps the scratch folder (configs, logs) for a look afterwards.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_NAME=bench_h2
# shellcheck source=tests/bench/lib.sh
source "$here/lib.sh"
ROUNDS=${ROUNDS:-5}
TRANSFERS=${TRANSFERS:-20}
FILE_MIB=${FILE_MIB:-100}

require_tools nginx nghttpx squid openssl python3 "$CURL7"
require_curl8
bench_init
make_certs
start_nginx
head -c "$((FILE_MIB << 20))" /dev/urandom >"$work/www/file.bin"
file_bytes=$((FILE_MIB << 20))
start_squid_backend
start_nghttpx
start_h2gate

urls=()
for i in $(seq "$TRANSFERS"); do
  urls+=(-o /dev/null "https://127.0.0.1:$origin_port/file.bin?t=$i")
done
# Inner connection: HTTP/1.1 to the origin, so every transfer is a tunnel of
# its own (curl would otherwise multiplex the downloads inside one tunnel).
common=(-q -s -S --fail --cacert "$work/ca.pem" --http1.1 --parallel --parallel-max "$TRANSFERS"
  --parallel-immediate --max-time 120 -w '%{size_download}\n')
declare -A results # "<workload> <metric>" -> space-separated values, one per round

run_round() { # workload
  local w=$1 before_lines t0 t1 cpu0 cpu1 out got conns
  check_alive "$h2gate_pid" h2gate
  before_lines=$(log_lines)
  reset_hwm "$h2gate_pid"
  cpu0=$(cpu_ticks "$h2gate_pid")
  t0=$EPOCHREALTIME
  if [[ $w == a ]]; then
    out=$("${no_proxy_env[@]}" "$CURL7" "${common[@]}" -p -x "http://127.0.0.1:$h2gate_port" \
      "${urls[@]}" 2>"$work/curl-$w.err") || log "round $w: curl failed: $(tail -3 "$work/curl-$w.err")"
  else
    out=$("${no_proxy_env[@]}" LD_LIBRARY_PATH="$CURL8_LIB" "$CURL8" "${common[@]}" -p \
      --proxy "https://127.0.0.1:$nghttpx_port" --proxy-cacert "$work/ca.pem" --proxy-http2 \
      "${urls[@]}" 2>"$work/curl-$w.err") || log "round $w: curl failed: $(tail -3 "$work/curl-$w.err")"
  fi
  t1=$EPOCHREALTIME
  cpu1=$(cpu_ticks "$h2gate_pid")
  got=$(awk '{s += $1} END {printf "%d", s}' <<<"$out")
  ((got == TRANSFERS * file_bytes)) || log "workload $w: got $got bytes, expected $((TRANSFERS * file_bytes))"
  # nghttpx logs a tunnel when it closes: give it a moment.
  for _ in $(seq 50); do
    if (($(log_lines) - before_lines >= TRANSFERS)); then break; fi
    sleep 0.1
  done
  conns=$(tls_conns_since "$before_lines")
  local secs mbps
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
  mbps=$(awk -v n="$got" -v s="$secs" 'BEGIN {printf "%.0f", n / 1e6 / s}')
  results["$w mbps"]+="$mbps "
  results["$w conns"]+="$conns "
  if [[ $w == a ]]; then
    results["$w cpu"]+="$(awk -v t=$((cpu1 - cpu0)) -v hz="$clk_tck" -v n="$got" \
      'BEGIN {printf "%.2f", (n > 0 ? t / hz / (n / 1e9) : 0)}') "
    results["$w rss"]+="$(awk -v k="$(vm_hwm_kib "$h2gate_pid")" 'BEGIN {printf "%.1f", k / 1024}') "
  fi
  log "round $w: $got bytes in ${secs}s = $mbps MB/s, $conns TLS connection(s) to nghttpx"
}

log "$TRANSFERS x $FILE_MIB MiB per round, $ROUNDS rounds, work dir $work"
for r in $(seq "$ROUNDS"); do # interleaved; the order alternates between rounds
  if ((r % 2)); then order=(a b); else order=(b a); fi
  for w in "${order[@]}"; do run_round "$w"; done
done

cell() { # workload metric printf-format
  # shellcheck disable=SC2086 # word splitting wanted
  summary "$3" ${results["$1 $2"]:-}
}

echo
echo "$TRANSFERS parallel CONNECT downloads of $FILE_MIB MiB (inner TLS to nginx), $ROUNDS rounds:"
echo "median (min-max)"
fmt='%-36s | %-18s | %-20s | %-22s | %-15s\n'
# shellcheck disable=SC2059 # the format is ours
row() { printf "$fmt" "$@"; }
row "workload" "MB/s" "h2gate CPU s/GB" "h2gate peak RSS MiB" "TLS conns"
row "(a) curl 7.88 -> h2gate -> nghttpx" "$(cell a mbps %.0f)" "$(cell a cpu %.2f)" \
  "$(cell a rss %.1f)" "$(cell a conns %.0f)"
row "(b) curl 8 --proxy-http2 -> nghttpx" "$(cell b mbps %.0f)" "-" "-" "$(cell b conns %.0f)"
