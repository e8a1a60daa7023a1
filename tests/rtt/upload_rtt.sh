#!/usr/bin/env bash
# Round-trip test for send-buffer tuning (ctest -L rtt).
#
#   upload_rtt.sh H2GATE_BINARY DELAY_RELAY_BINARY
#
# Two network namespaces joined by delay_relay (25 ms each way: 50 ms RTT,
# 1 Gbit/s). Namespace B holds the upstream side: nghttpx (h2 proxy, TLS, a
# throwaway CA) in front of squid in front of tests/support/upload_sink.py.
# Namespace A holds h2gate, its cluster pointing at nghttpx across the relay,
# and curl uploading a file through a CONNECT tunnel:
#
#   curl -p -x h2gate -T file  ->  h2gate ==h2/TLS, 50 ms==> nghttpx -> squid -> sink
#
# The upload runs with the cluster's send_buffer {mode: fixed, bytes: 65536}
# and with the default (no send_buffer key: Linux autotuning), interleaved,
# RTT_ROUNDS rounds each. PASS when the default's median time is at least
# RTT_MIN_RATIO times shorter. Exits 77 (skipped) without root, /dev/net/tun
# or `ip netns`.
#
# Knobs (environment): RTT_UPLOAD_MB (64), RTT_ROUNDS (2), RTT_DELAY_MS (25,
# one way), RTT_RATE_MBIT (1000), RTT_MIN_RATIO (3), RTT_KEEP=1 keeps the work
# directory for a look at the logs.
set -euo pipefail

H2GATE=${1:?usage: upload_rtt.sh H2GATE_BINARY DELAY_RELAY_BINARY}
RELAY=${2:?usage: upload_rtt.sh H2GATE_BINARY DELAY_RELAY_BINARY}
HERE=$(cd "$(dirname "$0")" && pwd)
SINK=$HERE/../support/upload_sink.py

UPLOAD_MB=${RTT_UPLOAD_MB:-64}
ROUNDS=${RTT_ROUNDS:-2}
DELAY_MS=${RTT_DELAY_MS:-25}
RATE_MBIT=${RTT_RATE_MBIT:-1000}
MIN_RATIO=${RTT_MIN_RATIO:-3}
FIXED_BYTES=65536

log() { printf 'rtt_upload: %s\n' "$*"; }
skip() { log "SKIP: $*"; exit 77; }
die() { log "FAIL: $*"; exit 1; }

[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, TUN devices)"
[ -c /dev/net/tun ] || skip "no /dev/net/tun"
{ command -v ip >/dev/null && ip netns list >/dev/null 2>&1; } || skip "ip netns unavailable"
for tool in nghttpx squid curl python3 openssl ss; do
  command -v "$tool" >/dev/null || die "$tool not found (deploy/install-deps.sh installs the test peers)"
done
[ -x "$H2GATE" ] || die "h2gate binary $H2GATE not found"
[ -x "$RELAY" ] || die "delay_relay binary $RELAY not found"
[ -r "$SINK" ] || die "$SINK not found"

NS_A=h2g-rtt-a-$$
NS_B=h2g-rtt-b-$$
ADDR_A=10.201.0.1
ADDR_B=10.201.0.2
PROXY_PORT=8443 # nghttpx, on ADDR_B
SQUID_PORT=3129 # loopback of B
SINK_PORT=8080  # loopback of B; squid maps origin.test to it
GATE_PORT=3128  # h2gate, loopback of A

# Leftovers of a run that was killed outright (SIGKILL runs no trap): the
# namespaces, work directory and squid shared memory are named after the
# script's pid; remove those whose pid is gone, with whatever still runs inside
# those namespaces (the relay itself dies with its parent).
shopt -s nullglob
ownerGone() { [[ $1 =~ ^[0-9]+$ ]] && ! kill -0 "$1" 2>/dev/null; }
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^h2g-rtt-[ab]-[0-9]+$' || true); do
  if ownerGone "${ns##*-}"; then
    log "removing stale namespace $ns"
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  fi
done
for f in /dev/shm/h2grtt[0-9]*-*; do
  owner=${f#/dev/shm/h2grtt}
  ownerGone "${owner%%-*}" && rm -f "$f"
done
for d in /tmp/h2g-rtt-[0-9]*.*; do
  owner=${d#/tmp/h2g-rtt-}
  ownerGone "${owner%%.*}" && rm -rf "$d"
done

W=$(mktemp -d "/tmp/h2g-rtt-$$.XXXXXX")
chmod 755 "$W" # squid drops to user proxy and must reach its own folder
PIDS=()

stopPid() { # stopPid PID [seconds]: SIGTERM, then SIGKILL after the grace time
  local pid=$1 tries=$((${2:-5} * 10))
  kill -TERM "$pid" 2>/dev/null || return 0
  while kill -0 "$pid" 2>/dev/null && [ $tries -gt 0 ]; do
    sleep 0.1
    tries=$((tries - 1))
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  local i
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stopPid "${PIDS[i]}" 3; done
  # Anything else still inside our namespaces was started by this script.
  for ns in "$NS_A" "$NS_B"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
    for f in "$W"/relay.err "$W"/nghttpx/error.log "$W"/squid/cache.log "$W"/sink.err "$W"/h2gate-*.log; do
      [ -s "$f" ] && { echo "---- tail $f"; tail -n 15 "$f"; }
    done
  fi
  if [ "${RTT_KEEP:-0}" = 1 ]; then log "kept $W"; else rm -rf "$W"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# startIn NS NAME CMD...: run CMD in namespace NS (or the host's with NS "-"),
# output to $W/NAME.out/.err; sets LAST_PID. `ip netns exec` execs the command
# itself, so the pid is the program's.
startIn() {
  local ns=$1 name=$2
  shift 2
  if [ "$ns" = - ]; then
    "$@" >"$W/$name.out" 2>"$W/$name.err" &
  else
    ip netns exec "$ns" "$@" >"$W/$name.out" 2>"$W/$name.err" &
  fi
  LAST_PID=$!
  PIDS+=("$LAST_PID")
}

# waitFor SECONDS PID DESCRIPTION CMD...: poll CMD until it succeeds; fail if
# PID dies or time runs out.
waitFor() {
  local tries=$(($1 * 20)) pid=$2 what=$3
  shift 3
  until "$@" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || die "$what: process exited"
    tries=$((tries - 1))
    [ $tries -gt 0 ] || die "$what: timed out"
    sleep 0.05
  done
}

# ---------------------------------------------------------------------------
# Namespaces and the relay

ip netns add "$NS_A"
ip netns add "$NS_B"
startIn - relay "$RELAY" --ns-a "$NS_A" --ns-b "$NS_B" --dev rtt0 \
  --delay-ms "$DELAY_MS" --rate-mbit "$RATE_MBIT"
RELAY_PID=$LAST_PID
waitFor 5 "$RELAY_PID" "delay_relay start" grep -q '^ready' "$W/relay.out"
ip -n "$NS_A" addr add "$ADDR_A/24" dev rtt0
ip -n "$NS_B" addr add "$ADDR_B/24" dev rtt0
for ns in "$NS_A" "$NS_B"; do
  ip -n "$ns" link set lo up
  ip -n "$ns" link set rtt0 up
done
log "$(cat "$W/relay.out")"
log "namespaces $NS_A ($ADDR_A) and $NS_B ($ADDR_B); TCP congestion control" \
  "$(ip netns exec "$NS_A" sysctl -n net.ipv4.tcp_congestion_control)," \
  "tcp_wmem $(ip netns exec "$NS_A" sysctl -n net.ipv4.tcp_wmem | tr '\t' ' ')"

# ---------------------------------------------------------------------------
# Certificates: a throwaway EC P-256 CA and a cert for nghttpx on ADDR_B

mkdir "$W/pki"
(
  cd "$W/pki"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -keyout ca.key -out ca.pem -subj /CN=h2gate-rtt-test-ca \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout proxy.key -out proxy.csr -subj "/CN=$ADDR_B"
  printf '%s\n' "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyAgreement" "extendedKeyUsage=serverAuth" \
    "authorityKeyIdentifier=keyid:always" "subjectAltName=IP:$ADDR_B" >proxy.ext
  openssl x509 -req -in proxy.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
    -extfile proxy.ext -out proxy.pem
) >"$W/pki.log" 2>&1 || die "openssl: $(tail -n 5 "$W/pki.log")"

# ---------------------------------------------------------------------------
# Namespace B: sink, squid, nghttpx

startIn "$NS_B" sink python3 "$SINK" --port "$SINK_PORT"
waitFor 10 "$LAST_PID" "upload_sink start" grep -q 'listening' "$W/sink.out"

mkdir "$W/squid"
printf '127.0.0.1 localhost\n127.0.0.1 origin.test\n' >"$W/squid/hosts"
cat >"$W/squid/squid.conf" <<EOF
http_port 127.0.0.1:$SQUID_PORT
visible_hostname h2gate-rtt-squid
acl localnet src 127.0.0.0/8
http_access allow localnet
http_access deny all
cache deny all
cache_mem 8 MB
pinger_enable off
shutdown_lifetime 1 seconds
hosts_file $W/squid/hosts
access_log stdio:$W/squid/access.log
cache_log $W/squid/cache.log
pid_filename $W/squid/squid.pid
netdb_filename stdio:$W/squid/netdb.state
coredump_dir $W/squid
EOF
chown -R proxy:proxy "$W/squid" 2>/dev/null || true
startIn "$NS_B" squid squid -N -f "$W/squid/squid.conf" -n "h2grtt$$"
waitFor 20 "$LAST_PID" "squid start" grep -q "Accepting HTTP Socket connections.*local=127.0.0.1:$SQUID_PORT " "$W/squid/cache.log"

mkdir "$W/nghttpx"
cat >"$W/nghttpx/nghttpx.conf" <<EOF
frontend=$ADDR_B,$PROXY_PORT
backend=127.0.0.1,$SQUID_PORT
http2-proxy=yes
workers=1
no-ocsp=yes
backend-connections-per-host=1024
private-key-file=$W/pki/proxy.key
certificate-file=$W/pki/proxy.pem
frontend-http2-window-size=16777216
frontend-http2-connection-window-size=16777216
accesslog-file=$W/nghttpx/access.log
accesslog-format=\$remote_addr:\$remote_port \$alpn "\$request" \$status
errorlog-file=$W/nghttpx/error.log
EOF
startIn "$NS_B" nghttpx nghttpx "--conf=$W/nghttpx/nghttpx.conf"
waitFor 15 "$LAST_PID" "nghttpx start" grep -q 'Created worker thread' "$W/nghttpx/error.log"

# ---------------------------------------------------------------------------
# The round trip, measured across the relay

if command -v ping >/dev/null; then
  ping_out=$(ip netns exec "$NS_A" ping -n -q -c 3 -i 0.2 "$ADDR_B") || die "ping across the relay failed"
  # "rtt min/avg/max/mdev = 50.278/51.540/54.048/1.773 ms"
  RTT=$(sed -n 's|.* = \([0-9.]*\)/\([0-9.]*\)/.*|\1|p' <<<"$ping_out")
  RTT_HOW="ping min of 3, $(sed -n 's|^rtt ||p' <<<"$ping_out")"
else
  # No iputils-ping: a TCP handshake to nghttpx takes one round trip.
  RTT=$(ip netns exec "$NS_A" python3 -c '
import socket, sys, time
best = 1e9
for _ in range(3):
    t = time.monotonic()
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()
    best = min(best, time.monotonic() - t)
print("%.3f" % (best * 1000))' "$ADDR_B" "$PROXY_PORT") || die "TCP connect across the relay failed"
  RTT_HOW="TCP connect, min of 3 (install iputils-ping for ping)"
fi
log "round trip $ADDR_A -> $ADDR_B: $RTT ms ($RTT_HOW)"
awk -v r="$RTT" -v d="$DELAY_MS" 'BEGIN { exit !(r >= 2 * d * 0.95 && r <= 2 * d * 1.3 + 5) }' ||
  die "round trip $RTT ms, expected about $((2 * DELAY_MS)) ms"

# ---------------------------------------------------------------------------
# Namespace A: h2gate and curl, one h2gate per upload (a fresh upstream TCP
# connection each time)

UPLOAD=$W/upload.bin
head -c $((UPLOAD_MB << 20)) /dev/urandom >"$UPLOAD"
UPLOAD_SHA=$(sha256sum "$UPLOAD" | cut -d' ' -f1)

writeConfig() { # writeConfig MODE FILE
  local send_buffer=""
  [ "$1" = fixed ] && send_buffer="    send_buffer: {mode: fixed, bytes: $FIXED_BYTES}"
  cat >"$2" <<EOF
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: 0}}
static_resources:
  listeners:
  - name: local_proxy
    address: {socket_address: {address: 127.0.0.1, port_value: $GATE_PORT}}
    filter_chains:
    - filters:
      - name: h2gate.filters.forward_proxy
        typed_config: {cluster: proxy}
  clusters:
  - name: proxy
$send_buffer
    load_assignment:
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: $ADDR_B, port_value: $PROXY_PORT}}}
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        common_tls_context:
          alpn_protocols: [h2]
          validation_context:
            trusted_ca: {filename: $W/pki/ca.pem}
EOF
}

for mode in fixed auto; do
  writeConfig "$mode" "$W/h2gate-$mode.yaml"
  "$H2GATE" --validate -c "$W/h2gate-$mode.yaml" >"$W/validate-$mode.log" 2>&1 ||
    die "h2gate rejects the $mode config: $(cat "$W/validate-$mode.log")"
done

TIMES_fixed=()
TIMES_auto=()
SNDBUF_fixed=0
SNDBUF_auto=0
MINRTT=""

# upload MODE ROUND: one upload through a fresh h2gate; appends the time to
# TIMES_<MODE>, tracks the largest SO_SNDBUF seen on the upstream socket.
upload() {
  local mode=$1 round=$2 name="h2gate-$1-$2"
  ip -n "$NS_A" tcp_metrics flush all 2>/dev/null || true # no cached ssthresh/cwnd between runs
  ip -n "$NS_B" tcp_metrics flush all 2>/dev/null || true
  startIn "$NS_A" "$name" "$H2GATE" -c "$W/h2gate-$mode.yaml"
  local gate=$LAST_PID
  waitFor 10 "$gate" "h2gate start ($mode)" grep -q "listening on 127.0.0.1:$GATE_PORT" "$W/$name.out" "$W/$name.err"

  startIn "$NS_A" "curl-$mode-$round" env -u http_proxy -u https_proxy -u HTTPS_PROXY \
    -u all_proxy -u ALL_PROXY -u no_proxy -u NO_PROXY \
    curl -q -sS --max-time 150 -p -x "http://127.0.0.1:$GATE_PORT" -H 'Expect:' \
    -T "$UPLOAD" -o "$W/response-$mode-$round" \
    -w '%{http_code} %{time_total} %{time_pretransfer}\n' "http://origin.test:$SINK_PORT/upload"
  local curl_pid=$LAST_PID tb=0 line v
  # While it runs: the upstream socket's send buffer (skmem tb) and min RTT.
  while kill -0 "$curl_pid" 2>/dev/null; do
    line=$(ss -N "$NS_A" -Htnmi state established dst "$ADDR_B" dport = ":$PROXY_PORT" 2>/dev/null | tr '\n' ' ')
    v=$(grep -o '[(,]tb[0-9]*' <<<"$line" | tr -dc '0-9\n' | sort -n | tail -n 1 || true)
    [ -n "$v" ] && [ "$v" -gt "$tb" ] && tb=$v
    v=$(grep -o 'minrtt:[0-9.]*' <<<"$line" | head -n 1 | cut -d: -f2 || true)
    [ -n "$v" ] && MINRTT=$v
    sleep 0.1
  done
  wait "$curl_pid" || die "curl ($mode, round $round) failed: $(cat "$W/curl-$mode-$round.err")"
  stopPid "$gate" 10

  local code total pre
  read -r code total pre <"$W/curl-$mode-$round.out"
  [ "$code" = 200 ] || die "upload ($mode) answered HTTP $code"
  [ "$(cat "$W/response-$mode-$round")" = "$UPLOAD_SHA $((UPLOAD_MB << 20))" ] ||
    die "sink received something else: $(cat "$W/response-$mode-$round")"
  eval "TIMES_$mode+=(\"$total\")"
  [ "$tb" -gt "$(eval echo "\$SNDBUF_$mode")" ] && eval "SNDBUF_$mode=$tb"
  log "$(awk -v r="$round" -v m="$mode" -v t="$total" -v p="$pre" -v b=$((UPLOAD_MB << 23)) -v tb="$tb" \
    'BEGIN { printf "round %d %s: %.2f s, %.0f Mbit/s (tunnel up after %.2f s); upstream socket SO_SNDBUF up to %s bytes",
             r, m, t, b / t / 1e6, p, (tb > 0 ? tb : "?") }')"
}

for ((round = 1; round <= ROUNDS; round++)); do
  if ((round % 2)); then
    upload fixed "$round"
    upload auto "$round"
  else
    upload auto "$round"
    upload fixed "$round"
  fi
done

# Every upload went over h2 (ALPN) through nghttpx. nghttpx writes a stream's
# access-log line when it sees the stream end, which for the last upload can be
# a moment (a round trip or two) after h2gate has exited: wait up to 5 s.
h2_tunnels=0
for ((i = 0; i < 50; i++)); do
  h2_tunnels=$(grep -c ' h2 "CONNECT origin.test' "$W/nghttpx/access.log" || true)
  [ "$h2_tunnels" -ge $((2 * ROUNDS)) ] && break
  sleep 0.1
done
[ "$h2_tunnels" -eq $((2 * ROUNDS)) ] ||
  die "expected $((2 * ROUNDS)) h2 CONNECTs in nghttpx's access log, found $h2_tunnels"
# The fixed config reached the socket (Linux reports twice the SO_SNDBUF set);
# the default left autotuning on.
[ "$SNDBUF_fixed" -le $((2 * FIXED_BYTES)) ] ||
  die "fixed mode: upstream send buffer grew to $SNDBUF_fixed bytes"
[ "$SNDBUF_auto" -eq 0 ] || [ "$SNDBUF_auto" -gt $((2 * FIXED_BYTES)) ] ||
  log "note: auto mode's send buffer was sampled at only $SNDBUF_auto bytes"

kill -USR1 "$RELAY_PID" 2>/dev/null && sleep 0.2
grep 'a->b\|b->a' "$W/relay.err" | tail -n 2 | sed 's/^delay_relay: /rtt_upload: relay /' || true
[ -n "$MINRTT" ] && log "tcpi_min_rtt of the last upstream connection: $MINRTT ms"

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
FIXED=$(median "${TIMES_fixed[@]}")
AUTO=$(median "${TIMES_auto[@]}")
log "$UPLOAD_MB MiB upload, median of $ROUNDS: fixed $(printf '%.2f ' "${TIMES_fixed[@]}")s," \
  "auto $(printf '%.2f ' "${TIMES_auto[@]}")s"
summary=$(awk -v f="$FIXED" -v a="$AUTO" -v m="$MIN_RATIO" -v kib=$((FIXED_BYTES / 1024)) 'BEGIN {
  r = f / a
  printf "fixed %d KiB %.1f s, auto %.1f s, %.1fx (>= %sx required) %s", kib, f, a, r, m, (r >= m ? "PASS" : "FAIL")
}')
log "$summary"
[[ $summary == *PASS ]] || exit 1
