# shellcheck shell=bash disable=SC2034 # variables here are for the scripts that source it
# Shared setup for the benchmarks in tests/bench/: sourced, not run.
#
#   BENCH_NAME=mybench; source "$here/lib.sh"
#   bench_init                 # scratch folder, cleanup trap, raised ulimit -n
#   make_certs                 # ca.pem, server.pem/.key (IP:127.0.0.1, DNS:localhost)
#   start_nginx                # origin: HTTPS $origin_port, plain HTTP $plain_port, files in $work/www
#   start_squid_backend        # plain HTTP proxy $squid_port (nghttpx's backend)
#   start_nghttpx              # h2 proxy (TLS) $nghttpx_port, access log $nghttpx_log
#   start_h2gate               # $h2gate_port, $h2gate_pid (a YAML config, see below)
#   start_squid_child          # squid as a peer sidecar: $child_port, $child_pid
#
# Every server listens on 127.0.0.1 on a free ephemeral port; everything
# started is stopped and the scratch folder removed on exit (KEEP_WORK=1 keeps
# it). Measurement helpers: cpu_ticks, vm_hwm_kib, vm_rss_kib, reset_hwm,
# summary. Callers set `set -euo pipefail` themselves.

here=${here:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
repo=${repo:-$(cd "$here/../.." && pwd)}
BENCH_NAME=${BENCH_NAME:-bench}
H2GATE_BIN=${H2GATE_BIN:-$repo/build/h2gate}
H2GATE_BIN=$(readlink -m "$H2GATE_BIN") # bench_init changes directory
CURL8_DIR=${CURL8_DIR:-/opt/h2gate-test/curl8}
CURL7=${CURL7:-curl}
CURL8=$CURL8_DIR/usr/bin/curl
CURL8_LIB=$CURL8_DIR/usr/lib/x86_64-linux-gnu

die() {
  echo "$BENCH_NAME: $*" >&2
  exit 1
}
log() { echo "$BENCH_NAME: $*" >&2; }

# Runs a command with no proxy variables from the caller's environment.
no_proxy_env=(env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u all_proxy
  -u ALL_PROXY -u no_proxy -u NO_PROXY)

require_tools() { # tool...
  [[ -x $H2GATE_BIN ]] || die "no h2gate at $H2GATE_BIN: cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C build h2gate (or set H2GATE_BIN)"
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || die "$tool not found: run deploy/install-deps.sh --test"
  done
}
require_curl8() {
  [[ -x $CURL8 ]] || die "no curl 8 in $CURL8_DIR: run deploy/install-deps.sh --test"
}

# --- scratch space and cleanup ------------------------------------------------
pids=()
bench_init() {
  local base=/tmp
  if [[ -d /dev/shm && -w /dev/shm ]]; then base=/dev/shm; fi # tmpfs: origin files are not read from disk
  work=$(mktemp -d "$base/h2gate-$BENCH_NAME.XXXXXX")
  cd "$work" || exit 1
  squid_prefix=h2gb$$
  # Thousands of tunnels need descriptors; every server started inherits this.
  ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
}
stop_pid() { # pid: TERM, wait up to 5 s, then KILL
  kill -TERM "$1" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
bench_cleanup() {
  local pid
  stop_wine # h2gate.exe and its wineserver first: TERM is no console event for it
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do stop_pid "$pid"; done
  if [[ -n ${KEEP_WORK:-} ]]; then log "kept $work"; else rm -rf "$work"; fi
  rm -f /dev/shm/"$squid_prefix"*-*.shm
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_port() { # port what [tries of 50 ms, default 200]
  for _ in $(seq "${3:-200}"); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.05
  done
  die "$2 did not start listening on port $1 (logs in $work)"
}

# --- certificates ---------------------------------------------------------------
make_certs() {
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
}

# --- origin: nginx, one process -------------------------------------------------
# HTTPS on $origin_port and plain HTTP on $plain_port, both serving $work/www
# (put files there before or after starting). PUT/POST to /upload is read in
# full and discarded (204), for upload benchmarks.
start_nginx() {
  mkdir -p "$work/www" "$work/nginx"
  origin_port=$(free_port)
  plain_port=$(free_port)
  cat >"$work/nginx/nginx.conf" <<EOF
daemon off;
master_process off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
worker_rlimit_nofile 20000;
events { worker_connections 16384; }
http {
  access_log off;
  client_body_temp_path $work/nginx/body;
  proxy_temp_path $work/nginx/proxy;
  fastcgi_temp_path $work/nginx/fastcgi;
  uwsgi_temp_path $work/nginx/uwsgi;
  scgi_temp_path $work/nginx/scgi;
  keepalive_requests 100000;
  client_header_timeout 600s;
  keepalive_timeout 600s;
  lingering_time 600s;
  server {
    listen 127.0.0.1:$origin_port ssl;
    listen 127.0.0.1:$plain_port;
    ssl_certificate $work/server.pem;
    ssl_certificate_key $work/server.key;
    root $work/www;
    location = /upload {
      client_max_body_size 0;
      return 204;
    }
  }
}
EOF
  nginx -p "$work/nginx" -e "$work/nginx/error.log" -c "$work/nginx/nginx.conf" \
    >"$work/nginx/stdout.log" 2>&1 &
  pids+=($!)
  wait_port "$origin_port" nginx
}

# --- squid -----------------------------------------------------------------------
write_squid_conf() { # name port [extra config lines...]
  local name=$1 port=$2
  shift 2
  mkdir -p "$work/$name"
  {
    cat <<EOF
http_port 127.0.0.1:$port
visible_hostname h2gate-bench-$name
acl localnet src 127.0.0.0/8
http_access allow localnet
http_access deny all
cache deny all
cache_mem 8 MB
max_filedescriptors 20000
pinger_enable off
shutdown_lifetime 1 seconds
access_log none
cache_log $work/$name/cache.log
pid_filename $work/$name/squid.pid
netdb_filename none
coredump_dir $work/$name
EOF
    printf '%s\n' "$@"
  } >"$work/$name/squid.conf"
  if [[ $(id -u) == 0 ]] && id proxy >/dev/null 2>&1; then
    chmod 755 "$work" # squid drops to user proxy: it must reach its own folder
    chown -R proxy: "$work/$name"
  fi
}
run_squid() { # name port -> pid in $last_pid
  squid -N -f "$work/$1/squid.conf" -n "$squid_prefix$1" >"$work/$1/stdout.log" 2>&1 &
  last_pid=$!
  pids+=("$last_pid")
  wait_port "$2" "squid $1"
}
# Plain HTTP proxy that nghttpx hands tunnels and requests to.
start_squid_backend() {
  squid_port=$(free_port)
  write_squid_conf squid "$squid_port"
  run_squid squid "$squid_port"
}
# squid as a peer sidecar: apps speak HTTP/1.1 to it, it forwards everything to
# nghttpx over TLS (HTTP/1.1, one connection per tunnel). Needs start_nghttpx.
start_squid_child() {
  child_port=$(free_port)
  write_squid_conf child "$child_port" \
    "cache_peer 127.0.0.1 parent $nghttpx_port 0 no-query no-digest default tls tls-cafile=$work/ca.pem tls-domain=localhost" \
    "never_direct allow all"
  run_squid child "$child_port"
  child_pid=$last_pid
}

# --- nghttpx: the HTTP/2 upstream proxy (TLS) ------------------------------------
# Frontend windows raised from nghttpx's 65,535-byte default (which would cap
# uploads), streams per connection raised so the scale test fits in one.
start_nghttpx() {
  mkdir -p "$work/nghttpx"
  nghttpx_port=$(free_port)
  nghttpx_log=$work/nghttpx/access.log
  cat >"$work/nghttpx/nghttpx.conf" <<EOF
frontend=127.0.0.1,$nghttpx_port
backend=127.0.0.1,$squid_port
http2-proxy=yes
workers=1
no-ocsp=yes
backend-connections-per-host=16384
frontend-http2-max-concurrent-streams=10000
frontend-http2-window-size=${NGHTTPX_STREAM_WINDOW:-1048576}
frontend-http2-connection-window-size=${NGHTTPX_CONN_WINDOW:-33554432}
backend-read-timeout=10m
frontend-read-timeout=10m
private-key-file=$work/server.key
certificate-file=$work/server.pem
accesslog-file=$nghttpx_log
accesslog-format=\$remote_addr:\$remote_port \$alpn "\$request" \$status
errorlog-file=$work/nghttpx/error.log
EOF
  nghttpx --conf="$work/nghttpx/nghttpx.conf" >"$work/nghttpx/stdout.log" 2>&1 &
  pids+=($!)
  wait_port "$nghttpx_port" nghttpx
}
# Lines in nghttpx's access log (a tunnel is logged when it closes).
log_lines() { if [[ -f $nghttpx_log ]]; then wc -l <"$nghttpx_log"; else echo 0; fi; }
# Distinct client address:port of CONNECT lines after line $1: TLS connections.
tls_conns_since() {
  tail -n +"$(($1 + 1))" "$nghttpx_log" | grep -F "${2:-\"CONNECT }" |
    awk '{print $1}' | sort -u | wc -l
}

# --- h2gate ----------------------------------------------------------------------
# One listener (max_connections raised for the scale test) to one cluster, the
# nghttpx above, with h2gate's defaults except max_concurrent_streams 1000
# (nghttpx allows 10,000), listener max_connections and cluster max_requests
# 20,000, so thousands of tunnels neither queue nor get 503.
# The one place the benchmarks write that config; a script changes a piece by
# setting, for the call only (conf_endpoint=localhost write_h2gate_conf ...):
#   conf_route     the forward_proxy's typed_config lines (indented 10;
#                  default: cluster: nghttpx)
#   conf_endpoint  the cluster's endpoint address (default 127.0.0.1)
#   conf_auth      the cluster's proxy_authentication lines (indented 6; none
#                  by default)
#   conf_streams   max_concurrent_streams ("" leaves the protocol options out:
#                  h2gate's default; default 1000)
write_h2gate_conf() { # file listen-port admin-port
  local route=${conf_route:-"          cluster: nghttpx"}
  local auth=
  if [[ -n ${conf_auth:-} ]]; then auth=$'    proxy_authentication:\n'$conf_auth$'\n'; fi
  local streams=
  if [[ -n ${conf_streams-1000} ]]; then
    streams="    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        auto_config:
          http2_protocol_options:
            max_concurrent_streams: ${conf_streams-1000}
"
  fi
  cat >"$1" <<EOF
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: $3}}
static_resources:
  listeners:
  - name: bench
    address: {socket_address: {address: 127.0.0.1, port_value: $2}}
    max_connections: 20000
    filter_chains:
    - filters:
      - name: h2gate.filters.forward_proxy
        typed_config:
$route
  clusters:
  - name: nghttpx
    circuit_breakers: {thresholds: [{max_requests: 20000}]}
${auth}    load_assignment:
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: ${conf_endpoint:-127.0.0.1}, port_value: $nghttpx_port}}}
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        common_tls_context:
          validation_context:
            trusted_ca: {filename: $work/ca.pem}
EOF
  printf '%s' "$streams" >>"$1"
}
# Starts an h2gate of its own config $work/NAME.yaml and log $work/NAME.log;
# sets last_pid and last_port. Waits for the listener only (up to 10 s, or
# $spawn_tries × 50 ms). The command may be several words (wine's loader and
# the .exe): its process must exec the gateway in place, so that last_pid is
# the gateway's own process.
spawn_h2gate() { # name [command..., default $H2GATE_BIN]
  local name=$1
  shift
  if (($# == 0)); then set -- "$H2GATE_BIN"; fi
  last_port=$(free_port)
  write_h2gate_conf "$work/$name.yaml" "$last_port" "$(free_port)"
  "$@" -c "$work/$name.yaml" --log-level warn >>"$work/$name.log" 2>&1 &
  last_pid=$!
  pids+=("$last_pid")
  wait_port "$last_port" "h2gate $name" "${spawn_tries:-200}"
}
# The main h2gate: sets h2gate_port, h2gate_pid.
start_h2gate() {
  spawn_h2gate h2gate
  h2gate_port=$last_port
  h2gate_pid=$last_pid
}

# --- h2gate.exe under wine ---------------------------------------------------------
# The Windows build (mingw-w64 cross build, build-windows/h2gate.exe) run by
# wine's loader $H2GATE_WINE in a prefix of its own, $wine_prefix (default
# $H2GATE_BENCH_WINEPREFIX, else ~/.cache/h2gate/bench-wineprefix: kept between
# runs, since creating one takes seconds and ~700 MB). Its wineserver is
# started first, persistent and in the foreground (-p -f), so that its pid is
# known, it is the same process for every round, and wine's start-up is not
# timed; stop_wine ends that session (wineserver -k: this prefix only).
# Sets wine_pid (the Windows process h2gate.exe: wine's loader execs in place),
# wine_port and wineserver_pid.
start_h2gate_wine() { # exe wine-loader
  local exe wine server
  exe=$(readlink -m "$1")
  wine=$2
  [[ -f $exe ]] || die "H2GATE_WINDOWS_EXE=$exe does not exist: tests/windows/run.sh builds it"
  [[ -x $wine ]] || die "H2GATE_WINE=$wine is not executable (Debian: wine64, /usr/lib/wine/wine64)"
  server=$(dirname "$wine")/wineserver
  [[ -x $server ]] || server=$(command -v wineserver || true)
  [[ -n $server ]] || die "no wineserver beside $wine or in PATH"
  wine_prefix=${H2GATE_BENCH_WINEPREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/h2gate/bench-wineprefix}
  mkdir -p "$wine_prefix"
  wine_env=(env WINEPREFIX="$wine_prefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml=")
  wineserver_cmd=("${wine_env[@]}" "$server")
  "${wineserver_cmd[@]}" -k >/dev/null 2>&1 || true # a session left by a killed run
  "${wineserver_cmd[@]}" -f -p >"$work/wineserver.log" 2>&1 &
  wineserver_pid=$!
  pids+=("$wineserver_pid")
  # A wine command started before the server's socket exists would start a
  # wineserver of its own, and ours would exit: wait for the socket beside the
  # lock file the server holds open (/tmp/wine-*/server-DEV-INODE/).
  local fd dir=
  for _ in $(seq 400); do
    check_alive "$wineserver_pid" "wineserver ($(tail -2 "$work/wineserver.log"))"
    for fd in "/proc/$wineserver_pid"/fd/*; do
      fd=$(readlink "$fd" 2>/dev/null) || continue
      if [[ $fd == */server-*/lock ]]; then dir=${fd%/lock}; fi
    done
    if [[ -n $dir && -S $dir/socket ]]; then break; fi
    sleep 0.05
  done
  [[ -n $dir && -S $dir/socket ]] || die "wineserver did not make its socket in 20 s"
  # Boots the prefix (creates it on the first run) and proves the .exe starts.
  local version
  version=$("${wine_env[@]}" "$wine" "$exe" --version 2>>"$work/wine-boot.log" | tr -d '\r' | head -n1) ||
    die "$exe --version failed under wine: $(tail -3 "$work/wine-boot.log")"
  log "under wine ($("$wine" --version 2>/dev/null), WINEPREFIX=$wine_prefix): $version"
  check_alive "$wineserver_pid" "wineserver ($(tail -2 "$work/wineserver.log"))"
  spawn_tries=1200 spawn_h2gate h2gate_wine "${wine_env[@]}" "$wine" "$exe"
  wine_port=$last_port
  wine_pid=$last_pid
  grep -qia 'h2gate\.exe' "/proc/$wine_pid/cmdline" ||
    die "pid $wine_pid is not h2gate.exe: $(tr '\0' ' ' <"/proc/$wine_pid/cmdline")"
}
# The other processes of the wine session (services.exe, winedevice.exe,
# explorer.exe, ...): those whose environment holds our WINEPREFIX, but for
# h2gate.exe and the wineserver.
wine_session_pids() {
  local f pid
  for f in /proc/[0-9]*/environ; do
    pid=${f#/proc/}
    pid=${pid%/environ}
    [[ $pid != "$wine_pid" && $pid != "$wineserver_pid" ]] || continue
    if grep -qszxF "WINEPREFIX=$wine_prefix" "$f" 2>/dev/null; then echo "$pid"; fi
  done
}
# CPU ticks of the pids given, those gone meanwhile counting 0.
sum_ticks() { # pid...
  local pid t=0
  for pid in "$@"; do t=$((t + $(cpu_ticks "$pid" 2>/dev/null || echo 0))); done
  echo "$t"
}
stop_wine() {
  [[ -n ${wineserver_pid:-} ]] || return 0
  "${wineserver_cmd[@]}" -k >/dev/null 2>&1 || true
  stop_pid "$wineserver_pid"
  wineserver_pid=
}

check_alive() { # pid what
  kill -0 "$1" 2>/dev/null || die "$2 exited (logs in $work)"
}

# --- measurements ----------------------------------------------------------------
clk_tck=$(getconf CLK_TCK)
cpu_ticks() { # utime + stime of a process (fields 14 and 15; comm may hold spaces)
  local stat f
  stat=$(<"/proc/$1/stat")
  stat=${stat##*) }
  read -r -a f <<<"$stat"
  echo $((f[11] + f[12]))
}
vm_hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
vm_rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
reset_hwm() { echo 5 >"/proc/$1/clear_refs" 2>/dev/null || true; } # VmHWM := VmRSS

# Formats values as "median (min-max)"; "-" when there are none.
summary() { # printf-format values...
  local fmt=$1
  shift
  if (($# == 0)); then
    echo "-"
    return
  fi
  printf '%s\n' "$@" | sort -g | awk -v f="$fmt" '{v[NR] = $1}
    END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
         if (NR == 1) printf f, m; else printf f " (" f "-" f ")", m, v[1], v[NR]}'
}
# The median alone.
median() { # values...
  (($# > 0)) || {
    echo ""
    return
  }
  printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1}
    END {printf "%s", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
