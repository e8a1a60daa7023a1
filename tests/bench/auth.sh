#!/usr/bin/env bash
# W2 (tunnel setup, as in run.sh) with proxy authentication:
# h2gate sending Negotiate (a Kerberos token per tunnel) beside h2gate sending
# Basic, to the same Kerberos squid, in the same rounds. Figures on stdout.
#
#   app (curl 8) ──HTTP/1.1──▶ h2gate ══TLS h2, one connection══▶ nghttpx ──▶ squid ──▶ nginx
#                                                            negotiate_kerberos_auth + basic_ncsa_auth
#
# (n) h2gate with proxy_authentication {scheme: negotiate} and alice's ticket
#     (a FILE credential cache made by kinit in a throwaway MIT realm);
# (b) h2gate with proxy_authentication {scheme: basic}.
# Both send their credentials up front; squid checks every one (negotiate:
# its Kerberos helper on every tunnel; basic: its helper, cached for
# credentialsttl). Reported per workload: tunnels/s and h2gate's CPU ms per
# tunnel (utime + stime of the h2gate process, its token threads included) at
# full speed (curl --parallel, as run.sh's W2), then CPU ms per tunnel with
# both paced to the same W2_RATE (paced_tunnels.py); the target is (n)/(b)
# CPU per tunnel <= 2 at that rate, per round.
#
# Environment: ROUNDS (3), W2_TUNNELS (2000), W2_PARALLEL (50), W2_RATE (250
# tunnels/s), W2_PACED (8 s of them), QUICK=1 (1 round, 300 + 500 tunnels),
# H2GATE_BIN, CURL8_DIR, KEEP_WORK=1. See README.md.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_NAME=auth
# shellcheck source=tests/bench/lib.sh
source "$here/lib.sh"

if [[ -n ${QUICK:-} ]]; then
  ROUNDS=${ROUNDS:-1} W2_TUNNELS=${W2_TUNNELS:-300} W2_PACED=${W2_PACED:-500}
fi
ROUNDS=${ROUNDS:-3}
W2_TUNNELS=${W2_TUNNELS:-2000}
W2_PARALLEL=${W2_PARALLEL:-50}
W2_RATE=${W2_RATE:-250}
W2_PACED=${W2_PACED:-$((W2_RATE * 8))}
REALM=H2GATE.BENCH

sbin() { command -v "$1" || echo "/usr/sbin/$1"; }
require_tools nginx nghttpx squid openssl kinit
for t in krb5kdc kdb5_util kadmin.local; do
  [[ -x $(sbin "$t") ]] || die "$t not found: run deploy/install-deps.sh --test"
done
require_curl8

bench_init
make_certs
start_nginx
head -c 1024 /dev/urandom >"$work/www/1k"

# --- the realm: a KDC, alice, HTTP/localhost, alice's ticket ------------------------
start_kdc() {
  local d=$work/kdc port
  mkdir -p "$d"
  chmod 755 "$work" "$d"
  port=$(free_port)
  cat >"$d/kdc.conf" <<EOF
[kdcdefaults]
 kdc_ports = $port
 kdc_tcp_ports = $port
[realms]
 $REALM = {
  database_name = $d/principal
  key_stash_file = $d/stash
  acl_file = $d/kadm5.acl
  supported_enctypes = aes256-cts-hmac-sha1-96:normal
 }
[logging]
 kdc = FILE:$d/kdc.log
EOF
  cat >"$d/krb5.conf" <<EOF
[libdefaults]
 default_realm = $REALM
 dns_lookup_kdc = false
 dns_lookup_realm = false
 dns_canonicalize_hostname = false
 rdns = false
 udp_preference_limit = 1
[realms]
 $REALM = {
  kdc = 127.0.0.1:$port
 }
[domain_realm]
 localhost = $REALM
EOF
  chmod 644 "$d/krb5.conf"
  export KRB5_CONFIG=$d/krb5.conf KRB5_KDC_PROFILE=$d/kdc.conf
  {
    "$(sbin kdb5_util)" create -s -r "$REALM" -P bench-master
    "$(sbin kadmin.local)" -q "addprinc -pw alice-pw alice"
    "$(sbin kadmin.local)" -q "addprinc -randkey HTTP/localhost"
    "$(sbin kadmin.local)" -q "ktadd -k $d/http.keytab HTTP/localhost"
  } >"$d/setup.log" 2>&1 || die "realm setup failed: $(tail -5 "$d/setup.log")"
  "$(sbin krb5kdc)" -n -P "$d/kdc.pid" >"$d/stdout.log" 2>&1 &
  pids+=($!)
  wait_port "$port" krb5kdc
  export KRB5CCNAME=FILE:$d/alice.cc
  echo alice-pw | kinit alice >"$d/kinit.log" 2>&1 || die "kinit failed: $(cat "$d/kinit.log")"
  kdc_dir=$d
}
start_kdc

# --- squid with Negotiate and Basic, behind nghttpx -----------------------------------
squid_port=$(free_port)
openssl passwd -apr1 bench-pw | sed 's/^/bob:/' >"$work/htpasswd"
cp "$kdc_dir/http.keytab" "$work/http.keytab"
write_squid_conf squid "$squid_port" \
  "auth_param negotiate program /usr/lib/squid/negotiate_kerberos_auth -k $work/http.keytab -s HTTP/localhost@$REALM" \
  "auth_param negotiate children 32 startup=8 idle=4" \
  "auth_param negotiate keep_alive on" \
  "auth_param basic program /usr/lib/squid/basic_ncsa_auth $work/htpasswd" \
  "auth_param basic children 4 startup=2 idle=1" \
  "auth_param basic credentialsttl 1 hour" \
  "acl authed proxy_auth REQUIRED" \
  "http_access deny !authed" \
  "logformat bench %rm %>Hs %un" \
  "access_log stdio:$work/squid/access.log bench"
# write_squid_conf allows localnet first: authentication must come first.
sed -i '/^http_access allow localnet/d; /^http_access deny all/d; /^access_log none/d' \
  "$work/squid/squid.conf"
printf '%s\n' "http_access allow localnet" "http_access deny all" >>"$work/squid/squid.conf"
if [[ $(id -u) == 0 ]] && id proxy >/dev/null 2>&1; then
  chown proxy: "$work/http.keytab" "$work/htpasswd"
fi
run_squid squid "$squid_port"
start_nghttpx

# --- two h2gates -------------------------------------------------------------------
# lib.sh's h2gate (spawn_h2gate), with the endpoint named "localhost" (the
# service principal is HTTP/localhost) and the cluster's authentication.
spawn_auth_h2gate() { # name auth-yaml-lines -> last_pid, last_port
  conf_endpoint=localhost conf_auth=$2 spawn_h2gate "$1"
}
spawn_auth_h2gate negotiate "      scheme: negotiate"
n_port=$last_port n_pid=$last_pid
BENCH_BASIC_PASSWORD=bench-pw spawn_auth_h2gate basic \
  "      scheme: basic
      credentials: {username: bob, password: \"\${BENCH_BASIC_PASSWORD}\"}"
b_port=$last_port b_pid=$last_pid

curl8="env LD_LIBRARY_PATH=$CURL8_LIB $CURL8"
div() { awk -v a="$1" -v b="$2" -v f="${3:-%.3f}" 'BEGIN {if (b == 0) print "nan"; else printf f, a / b}'; }
rotate() { # round workloads...
  local r=$1
  shift
  local n=$# i
  for ((i = 0; i < n; i++)); do
    local k=$((((r + i) % n) + 1))
    echo "${!k}"
  done
}
declare -A R
add() { R[$1]+="$2 "; }
# shellcheck disable=SC2086 # word splitting wanted
cell() { summary "$2" ${R[$1]:-}; }
med() { median ${R[$1]:-}; }
squid_lines() { if [[ -f $work/squid/access.log ]]; then wc -l <"$work/squid/access.log"; else echo 0; fi; }

for i in $(seq "$W2_TUNNELS"); do
  printf 'url = "http://127.0.0.1:%s/1k?t=%s"\noutput = "/dev/null"\n' "$plain_port" "$i"
done >"$work/w2.urls"

w2_round() { # workload (n|b)
  local w=$1 pid port before t0 t1 cpu0 cpu1 n secs users denied
  case $w in n) pid=$n_pid port=$n_port ;; b) pid=$b_pid port=$b_port ;; esac
  before=$(squid_lines)
  cpu0=$(cpu_ticks "$pid")
  t0=$EPOCHREALTIME
  "${no_proxy_env[@]}" $curl8 -q -s -S -p -x "http://127.0.0.1:$port" --parallel \
    --parallel-max "$W2_PARALLEL" --max-time 60 -H 'Connection: close' \
    -w '%{http_code} %{size_download}\n' -K "$work/w2.urls" >"$work/w2-$w.out" 2>"$work/w2-$w.err" ||
    log "w2 $w: curl failed: $(tail -3 "$work/w2-$w.err")"
  t1=$EPOCHREALTIME
  cpu1=$(cpu_ticks "$pid")
  check_alive "$pid" "h2gate $w"
  n=$(awk '$1 == 200 && $2 == 1024' "$work/w2-$w.out" | wc -l)
  ((n == W2_TUNNELS)) || log "w2 $w: $n of $W2_TUNNELS tunnels answered 200 with 1 KiB"
  for _ in $(seq 100); do
    (($(squid_lines) - before >= W2_TUNNELS)) && break
    sleep 0.1
  done
  # Every tunnel authenticated as its user; no 407 at all (credentials up front).
  users=$(tail -n +"$((before + 1))" "$work/squid/access.log" |
    awk -v u="$([[ $w == n ]] && echo "alice@$REALM" || echo bob)" '$1 == "CONNECT" && $2 == 200 && $3 == u' | wc -l)
  denied=$(tail -n +"$((before + 1))" "$work/squid/access.log" | awk '$2 == 407' | wc -l)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
  add "$w rps" "$(div "$n" "$secs" %.0f)"
  add "$w cpu" "$(awk -v t=$((cpu1 - cpu0)) -v hz="$clk_tck" -v n="$W2_TUNNELS" \
    'BEGIN {printf "%.4f", t / hz * 1000 / n}')"
  log "w2 $w: $n tunnels in ${secs}s; squid: $users authenticated, $denied answered 407"
  last_cpu=$(awk -v t=$((cpu1 - cpu0)) -v hz="$clk_tck" -v n="$W2_TUNNELS" 'BEGIN {print t / hz * 1000 / n}')
}

# The same, paced: W2_RATE tunnels/s started whatever the answers take
# (paced_tunnels.py), so both do the same work per second and their CPU per
# tunnel compares what authentication costs (at full speed Basic runs faster
# and batches more work per wakeup, which lowers its CPU per tunnel).
paced_round() { # workload (n|b)
  local w=$1 pid port cpu0 cpu1 out ok
  case $w in n) pid=$n_pid port=$n_port ;; b) pid=$b_pid port=$b_port ;; esac
  cpu0=$(cpu_ticks "$pid")
  out=$(python3 "$here/paced_tunnels.py" --proxy-port "$port" --target "127.0.0.1:$plain_port" \
    --count "$W2_PACED" --rate "$W2_RATE")
  cpu1=$(cpu_ticks "$pid")
  ok=$(sed -n 's/^ok=//p' <<<"$out")
  ((ok == W2_PACED)) || log "paced $w: $ok of $W2_PACED tunnels answered 200 with 1 KiB"
  add "$w pcpu" "$(awk -v t=$((cpu1 - cpu0)) -v hz="$clk_tck" -v n="$W2_PACED" \
    'BEGIN {printf "%.4f", t / hz * 1000 / n}')"
  last_cpu=$(awk -v t=$((cpu1 - cpu0)) -v hz="$clk_tck" -v n="$W2_PACED" 'BEGIN {print t / hz * 1000 / n}')
  log "paced $w: $ok tunnels at $W2_RATE/s ($(sed -n 's/^secs=//p' <<<"$out") s)"
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
log "rounds: $ROUNDS, $W2_TUNNELS tunnels, $W2_PARALLEL in parallel, load average $load0"
# A warm-up tunnel each: the first Kerberos token asks the KDC for a ticket.
for p in "$n_port" "$b_port"; do
  "${no_proxy_env[@]}" $curl8 -q -s -p -x "http://127.0.0.1:$p" -o /dev/null "http://127.0.0.1:$plain_port/1k"
done
for _ in $(seq 100); do # squid logs a tunnel when it closes
  (($(squid_lines) >= 2)) && break
  sleep 0.1
done
for r in $(seq "$ROUNDS"); do
  for w in $(rotate "$r" n b); do
    w2_round "$w"
    case $w in n) cn=$last_cpu ;; b) cb=$last_cpu ;; esac
  done
  add "ratio" "$(div "$cn" "$cb")"
  for w in $(rotate "$r" n b); do
    paced_round "$w"
    case $w in n) cn=$last_cpu ;; b) cb=$last_cpu ;; esac
  done
  add "pratio" "$(div "$cn" "$cb")"
done

ok=$(awk -v m="$(med pratio)" 'BEGIN {print (m != "" && m <= 2) ? "✓" : "✗"}')
printf '\nW2 tunnel setup with proxy authentication: %s rounds, %s tunnels, %s in parallel (load %s)\n' \
  "$ROUNDS" "$W2_TUNNELS" "$W2_PARALLEL" "$load0"
printf '%-52s %s\n' "figure" "median (min-max)"
printf '%-52s %s\n' "(n) Negotiate: tunnels/s" "$(cell 'n rps' %.0f)"
printf '%-52s %s\n' "(b) Basic: tunnels/s" "$(cell 'b rps' %.0f)"
printf '%-52s %s\n' "(n) Negotiate: h2gate CPU ms per tunnel" "$(cell 'n cpu' %.3f)"
printf '%-52s %s\n' "(b) Basic: h2gate CPU ms per tunnel" "$(cell 'b cpu' %.3f)"
printf '%-52s %s\n' "CPU per tunnel (n)/(b), full speed (per round)" "$(cell ratio %.2f)"
printf '%-52s %s\n' "(n) Negotiate at $W2_RATE/s: CPU ms per tunnel" "$(cell 'n pcpu' %.3f)"
printf '%-52s %s\n' "(b) Basic at $W2_RATE/s: CPU ms per tunnel" "$(cell 'b pcpu' %.3f)"
printf '%-52s %s  target <= 2 %s\n' "CPU per tunnel (n)/(b) at $W2_RATE/s (per round)" "$(cell pratio %.2f)" "$ok"
