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
repo=$(cd "$here/../.." && pwd)
H2GATE_BIN=${H2GATE_BIN:-$repo/build/h2gate}
ROUNDS=${ROUNDS:-5}
TRANSFERS=${TRANSFERS:-20}
FILE_MIB=${FILE_MIB:-100}
CURL8_DIR=${CURL8_DIR:-/opt/h2gate-test/curl8}
CURL7=${CURL7:-curl}
CURL8=$CURL8_DIR/usr/bin/curl
CURL8_LIB=$CURL8_DIR/usr/lib/x86_64-linux-gnu

die() {
  echo "bench_h2: $*" >&2
  exit 1
}
log() { echo "bench_h2: $*" >&2; }

[[ -x $H2GATE_BIN ]] || die "no h2gate at $H2GATE_BIN: cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C build h2gate (or set H2GATE_BIN)"
[[ -x $CURL8 ]] || die "no curl 8 in $CURL8_DIR: run deploy/install-deps.sh --test"
for tool in nginx nghttpx squid openssl python3 "$CURL7"; do
  command -v "$tool" >/dev/null || die "$tool not found: run deploy/install-deps.sh --test"
done

# --- scratch space and cleanup ------------------------------------------------
base=/tmp
[[ -d /dev/shm && -w /dev/shm ]] && base=/dev/shm # tmpfs: the origin file is not read from disk
work=$(mktemp -d "$base/h2gate-bench.XXXXXX")
cd "$work"
squid_name=h2gbench$$
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [[ -n ${KEEP_WORK:-} ]]; then log "kept $work"; else rm -rf "$work"; fi
  rm -f /dev/shm/"$squid_name"-*.shm
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_port() { # port what
  for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  die "$2 did not start listening on port $1 (logs in $work)"
}

# --- certificates ---------------------------------------------------------------
(
  cd "$work"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -keyout ca.key -out ca.pem -subj /CN=h2gate-bench-ca \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout server.key -out server.csr -subj /CN=localhost
  printf '%s\n' 'subjectAltName=IP:127.0.0.1,DNS:localhost' 'basicConstraints=CA:FALSE' \
    'extendedKeyUsage=serverAuth' >ext.cnf
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
    -extfile ext.cnf -out server.pem
  chmod 644 server.key # squid's user may need it later; the directory is private
) >"$work/openssl.log" 2>&1 || die "openssl failed: $(cat "$work/openssl.log")"

# --- origin: nginx over HTTPS, one process --------------------------------------
mkdir -p "$work/www" "$work/nginx"
head -c "$((FILE_MIB << 20))" /dev/urandom >"$work/www/file.bin"
file_bytes=$((FILE_MIB << 20))
origin_port=$(free_port)
cat >"$work/nginx/nginx.conf" <<EOF
daemon off;
master_process off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work/nginx/body;
  proxy_temp_path $work/nginx/proxy;
  fastcgi_temp_path $work/nginx/fastcgi;
  uwsgi_temp_path $work/nginx/uwsgi;
  scgi_temp_path $work/nginx/scgi;
  keepalive_requests 100000;
  server {
    listen 127.0.0.1:$origin_port ssl;
    ssl_certificate $work/server.pem;
    ssl_certificate_key $work/server.key;
    root $work/www;
  }
}
EOF
nginx -p "$work/nginx" -e "$work/nginx/error.log" -c "$work/nginx/nginx.conf" \
  >"$work/nginx/stdout.log" 2>&1 &
pids+=($!)
wait_port "$origin_port" nginx

# --- squid: plain HTTP proxy, nghttpx's backend ---------------------------------
mkdir -p "$work/squid"
squid_port=$(free_port)
cat >"$work/squid/squid.conf" <<EOF
http_port 127.0.0.1:$squid_port
visible_hostname h2gate-bench-squid
acl localnet src 127.0.0.0/8
http_access allow localnet
http_access deny all
cache deny all
cache_mem 8 MB
pinger_enable off
shutdown_lifetime 1 seconds
access_log none
cache_log $work/squid/cache.log
pid_filename $work/squid/squid.pid
netdb_filename none
coredump_dir $work/squid
EOF
if [[ $(id -u) == 0 ]] && id proxy >/dev/null 2>&1; then
  chmod 755 "$work" # squid drops to user proxy: it must reach its own folder
  chown -R proxy: "$work/squid"
fi
squid -N -f "$work/squid/squid.conf" -n "$squid_name" >"$work/squid/stdout.log" 2>&1 &
pids+=($!)
wait_port "$squid_port" squid

# --- nghttpx: the HTTP/2 upstream proxy (TLS) ------------------------------------
mkdir -p "$work/nghttpx"
nghttpx_port=$(free_port)
nghttpx_log=$work/nghttpx/access.log
cat >"$work/nghttpx/nghttpx.conf" <<EOF
frontend=127.0.0.1,$nghttpx_port
backend=127.0.0.1,$squid_port
http2-proxy=yes
workers=1
no-ocsp=yes
backend-connections-per-host=1024
private-key-file=$work/server.key
certificate-file=$work/server.pem
accesslog-file=$nghttpx_log
accesslog-format=\$remote_addr:\$remote_port \$alpn "\$request" \$status
errorlog-file=$work/nghttpx/error.log
EOF
nghttpx --conf="$work/nghttpx/nghttpx.conf" >"$work/nghttpx/stdout.log" 2>&1 &
pids+=($!)
wait_port "$nghttpx_port" nghttpx

# --- h2gate ----------------------------------------------------------------------
h2gate_port=$(free_port)
admin_port=$(free_port)
"$H2GATE_BIN" --listen "127.0.0.1:$h2gate_port" --admin "127.0.0.1:$admin_port" \
  --upstream "https://127.0.0.1:$nghttpx_port" --cacert "$work/ca.pem" --log-level warn \
  >"$work/h2gate.log" 2>&1 &
h2gate_pid=$!
pids+=("$h2gate_pid")
wait_port "$h2gate_port" h2gate

# --- measurements ----------------------------------------------------------------
clk_tck=$(getconf CLK_TCK)
cpu_ticks() { # utime + stime of a process (fields 14 and 15; comm may hold spaces)
  local stat
  stat=$(<"/proc/$1/stat")
  stat=${stat##*) }
  read -r -a f <<<"$stat"
  echo $((f[11] + f[12]))
}
vm_hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
log_lines() { if [[ -f $nghttpx_log ]]; then wc -l <"$nghttpx_log"; else echo 0; fi; }

urls=()
for i in $(seq "$TRANSFERS"); do
  urls+=(-o /dev/null "https://127.0.0.1:$origin_port/file.bin?t=$i")
done
# Inner connection: HTTP/1.1 to the origin, so every transfer is a tunnel of
# its own (curl would otherwise multiplex the downloads inside one tunnel).
common=(-q -s -S --fail --cacert "$work/ca.pem" --http1.1 --parallel --parallel-max "$TRANSFERS"
  --parallel-immediate --max-time 120 -w '%{size_download}\n')
no_proxy_env=(env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u all_proxy
  -u ALL_PROXY -u no_proxy -u NO_PROXY)

declare -A results # "<workload> <metric>" -> space-separated values, one per round

run_round() { # workload
  local w=$1 before_lines t0 t1 cpu0 cpu1 out got conns
  kill -0 "$h2gate_pid" 2>/dev/null || die "h2gate exited: $(tail -5 "$work/h2gate.log")"
  before_lines=$(log_lines)
  echo 5 >"/proc/$h2gate_pid/clear_refs" 2>/dev/null || true
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
    (($(log_lines) - before_lines >= TRANSFERS)) && break
    sleep 0.1
  done
  conns=$(tail -n +"$((before_lines + 1))" "$nghttpx_log" | grep -F '"CONNECT ' |
    awk '{print $1}' | sort -u | wc -l)
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

summary() { # printf-format values... -> "median (min-max)"
  local f=$1
  shift
  if (($# == 0)); then
    echo "-"
    return
  fi
  printf '%s\n' "$@" | sort -g | awk -v f="$f" '{v[NR] = $1}
    END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
         printf f " (" f "-" f ")", m, v[1], v[NR]}'
}
cell() { # workload metric printf-format
  # shellcheck disable=SC2086 # word splitting wanted
  summary "$3" ${results["$1 $2"]:-}
}

echo
echo "$TRANSFERS parallel CONNECT downloads of $FILE_MIB MiB (inner TLS to nginx), $ROUNDS rounds:"
echo "median (min-max)"
fmt='%-36s | %-18s | %-20s | %-22s | %-15s\n'
# shellcheck disable=SC2059 # the format is ours
printf "$fmt" "workload" "MB/s" "h2gate CPU s/GB" "h2gate peak RSS MiB" "TLS conns"
printf "$fmt" "(a) curl 7.88 -> h2gate -> nghttpx" "$(cell a mbps %.0f)" "$(cell a cpu %.2f)" \
  "$(cell a rss %.1f)" "$(cell a conns %.0f)"
printf "$fmt" "(b) curl 8 --proxy-http2 -> nghttpx" "$(cell b mbps %.0f)" "-" "-" "$(cell b conns %.0f)"
