#!/usr/bin/env bash
# The Windows builds of h2gate's libraries (deploy/windows/build-deps.sh) checked
# end to end: tests/windows/deps_test.cc, cross-built by the top-level CMake
# project, runs under wine against real Linux peers on loopback.
#
#   tests/windows/deps_test.sh EXE      (ctest: windows_deps, label windows)
#
#  1. EXE imports only Windows system DLLs (x86_64-w64-mingw32-objdump -p): the
#     libraries and the C++ runtime are linked in statically.
#  2. nginx serves a 1 MiB random file over HTTP/1.1; nghttpx (TLS, h2) proxies to it
#     with a certificate from a throwaway CA. curl fetches the file from both, to
#     prove the peers before the Windows program is trusted to be the one failing.
#  3. EXE under wine: HTTP/1.1 GET with Asio + llhttp from nginx; TLS 1.3 verified
#     against the CA with ALPN h2 and an HTTP/2 GET with nghttp2 through nghttpx
#     (SHA-256 of both bodies); yaml-cpp; prometheus-cpp. nghttpx's access log must
#     show EXE's request as TLSv1.3 / h2, nginx's its HTTP/1.1 one, and promtool
#     must accept the metrics EXE wrote.
#  4. EXE again with another CA: the TLS check must fail with "certificate verify
#     failed" (verification is really on).
# Needs wine64, nginx, nghttpx, curl, openssl, promtool (deploy/install-deps.sh --test).
# Environment: WINEPREFIX, WINEDEBUG (ctest sets them), H2GATE_WINE (wine binary).
# Exit status 0 passed, 1 failed.
set -euo pipefail

HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
[[ $# -eq 1 && -f $1 ]] || {
  echo "usage: $0 EXE" >&2
  exit 1
}
EXE=$(readlink -f "$1")
WINE=${H2GATE_WINE:-$(command -v wine64 || command -v wine || echo /usr/lib/wine/wine64)}
export WINEDEBUG=${WINEDEBUG:--all}
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

log() { printf 'deps_test: %s\n' "$*"; }
fail() {
  log "FAIL: $*"
  exit 1
}

for tool in "$WINE" x86_64-w64-mingw32-objdump nginx nghttpx curl openssl promtool python3; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool not found (deploy/install-deps.sh --test)"
done

# ---------------------------------------------------- 1. system DLLs only ----
# DLLs every Windows 10/11 has in System32.
SYSTEM_DLLS=(kernel32.dll msvcrt.dll ws2_32.dll mswsock.dll crypt32.dll advapi32.dll user32.dll
  gdi32.dll bcrypt.dll shell32.dll ole32.dll iphlpapi.dll secur32.dll ntdll.dll normaliz.dll)
mapfile -t dlls < <(x86_64-w64-mingw32-objdump -p "$EXE" | sed -n 's/^[[:space:]]*DLL Name: //p' |
  tr '[:upper:]' '[:lower:]' | sort -u)
((${#dlls[@]})) || fail "objdump -p $EXE lists no DLL at all"
for d in "${dlls[@]}"; do
  [[ " ${SYSTEM_DLLS[*]} " == *" $d "* ]] || fail "$EXE imports $d, not a Windows system DLL (all: ${dlls[*]})"
done
log "ok: imports only system DLLs: ${dlls[*]}"

# ------------------------------------------------------------ 2. peers ----
TMP=$(mktemp -d "${TMPDIR:-/tmp}/h2gate-deps-test.XXXXXX")
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_port() { # PORT PID NAME LOG
  local _
  for _ in $(seq 1 200); do
    kill -0 "$2" 2>/dev/null || fail "$3 exited: $(tail -n 20 "$4" 2>/dev/null)"
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  fail "$3 does not listen on 127.0.0.1:$1 after 10 s: $(tail -n 20 "$4" 2>/dev/null)"
}

# A throwaway EC P-256 CA, a server certificate for localhost / 127.0.0.1, and a
# second CA that signed nothing here.
ca() { # NAME
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=h2gate deps test $1" -addext basicConstraints=critical,CA:TRUE \
    -keyout "$TMP/$1.key" -out "$TMP/$1.pem" 2>/dev/null
}
ca ca
ca other-ca
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
  -keyout "$TMP/server.key" -out "$TMP/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$TMP/server.ext"
openssl x509 -req -in "$TMP/server.csr" -CA "$TMP/ca.pem" -CAkey "$TMP/ca.key" -CAcreateserial \
  -days 2 -extfile "$TMP/server.ext" -out "$TMP/server.pem" 2>/dev/null

mkdir -p "$TMP/www" "$TMP/nginx"
head -c 1048576 /dev/urandom >"$TMP/www/file"
SUM=$(sha256sum "$TMP/www/file" | cut -d' ' -f1)

H1=$(free_port)
{
  [[ $(id -u) -ne 0 ]] || echo "user root root;" # workers must read the 0700 temp dir
  cat <<EOF
daemon off;
worker_processes 1;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log info;
events { worker_connections 64; }
http {
  log_format ua '\$request \$status \$body_bytes_sent "\$http_user_agent"';
  access_log $TMP/nginx/access.log ua;
  client_body_temp_path $TMP/nginx/client_body;
  proxy_temp_path $TMP/nginx/proxy;
  fastcgi_temp_path $TMP/nginx/fastcgi;
  uwsgi_temp_path $TMP/nginx/uwsgi;
  scgi_temp_path $TMP/nginx/scgi;
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:$H1;
    root $TMP/www;
  }
}
EOF
} >"$TMP/nginx/nginx.conf"
nginx -p "$TMP/nginx/" -c "$TMP/nginx/nginx.conf" -e "$TMP/nginx/error.log" >"$TMP/nginx/out.log" 2>&1 &
pids+=($!)
wait_port "$H1" "${pids[-1]}" nginx "$TMP/nginx/error.log"

H2=$(free_port)
cat >"$TMP/nghttpx.conf" <<EOF
frontend=127.0.0.1,$H2
backend=127.0.0.1,$H1
workers=1
no-ocsp=yes
private-key-file=$TMP/server.key
certificate-file=$TMP/server.pem
accesslog-file=$TMP/nghttpx-access.log
accesslog-format=\$tls_protocol \$alpn "\$request" \$status "\$http_user_agent"
errorlog-file=$TMP/nghttpx-error.log
EOF
nghttpx --conf="$TMP/nghttpx.conf" >"$TMP/nghttpx-out.log" 2>&1 &
pids+=($!)
wait_port "$H2" "${pids[-1]}" nghttpx "$TMP/nghttpx-error.log"
log "peers: nginx 127.0.0.1:$H1 (HTTP/1.1), nghttpx 127.0.0.1:$H2 (TLS, h2) in front of it"

# curl proves the peers first.
got=$(curl -sS --noproxy '*' -o "$TMP/curl.h1" -w '%{http_code}' "http://127.0.0.1:$H1/file") ||
  fail "curl could not fetch from nginx"
[[ $got == 200 && $(sha256sum <"$TMP/curl.h1" | cut -d' ' -f1) == "$SUM" ]] ||
  fail "curl from nginx: status $got or a different body"
got=$(curl -sS --noproxy '*' --http2 --cacert "$TMP/ca.pem" -o "$TMP/curl.h2" \
  -w '%{http_version} %{http_code}' "https://localhost:$H2/file") || fail "curl could not fetch from nghttpx"
[[ $got == "2 200" && $(sha256sum <"$TMP/curl.h2" | cut -d' ' -f1) == "$SUM" ]] ||
  fail "curl from nghttpx: '$got' (HTTP version, status) or a different body"
log "ok: curl fetched the file from nginx (HTTP/1.1) and nghttpx (h2, CA verified)"

# ---------------------------------------------------- 3. EXE under wine ----
run_exe() { # CAFILE OUTFILE -> exit status of EXE
  local rc=0
  # Wine maps drive Z: to /, so Z:/tmp/... is /tmp/... for the Windows program.
  timeout --kill-after=10 180 "$WINE" "$EXE" --h1="127.0.0.1:$H1" --h2="127.0.0.1:$H2" --host=localhost \
    --cafile="Z:$1" --path=/file --sha256="$SUM" --yaml="Z:$HERE/deps_test.yaml" \
    --metrics-out="Z:$TMP/metrics.txt" >"$2" 2>&1 || rc=$?
  tr -d '\r' <"$2" | sed 's/^/  exe: /'
  return "$rc"
}

t0=$SECONDS
rc=0
run_exe "$TMP/ca.pem" "$TMP/exe.out" || rc=$?
log "the Windows program took $((SECONDS - t0)) s under wine (exit $rc)"
((rc == 0)) || fail "the Windows program failed (exit $rc)"
for want in 'ok: http1 (Asio, llhttp): GET /file status 200, 1048576 bytes' \
  'ok: tls (OpenSSL 3.' 'TLSv1.3, ALPN h2, certificate verified for localhost' \
  'ok: http2 (nghttp2 1.' 'status 200, 1048576 bytes' 'ok: yaml (yaml-cpp)' \
  'ok: yaml: broken document rejected at line 2, column 6' 'ok: prometheus' 'PASSED: 0 check(s) failed'; do
  grep -qF -- "$want" "$TMP/exe.out" || fail "the program's output lacks '$want'"
done

# The peers saw the Windows program's requests as it says.
grep -qF 'TLSv1.3 h2 "GET /file HTTP/2" 200 "h2gate-windows-deps-test"' "$TMP/nghttpx-access.log" ||
  fail "nghttpx's access log has no TLSv1.3/h2 request from the program: $(cat "$TMP/nghttpx-access.log")"
grep -qF 'GET /file HTTP/1.1 200 1048576 "h2gate-windows-deps-test"' "$TMP/nginx/access.log" ||
  fail "nginx's access log has no HTTP/1.1 request from the program: $(cat "$TMP/nginx/access.log")"
log "ok: nghttpx logged the program's request as TLSv1.3, h2; nginx its HTTP/1.1 one"

promtool check metrics <"$TMP/metrics.txt" || fail "promtool rejects the metrics: $(cat "$TMP/metrics.txt")"
grep -qxF 'h2gate_windows_deps_checks_total{check="http2"} 1' "$TMP/metrics.txt" ||
  fail "the metrics lack the http2 check: $(cat "$TMP/metrics.txt")"
log "ok: promtool check metrics accepts what prometheus-cpp wrote"

# ------------------------------------------------- 4. the wrong CA fails ----
rc=0
run_exe "$TMP/other-ca.pem" "$TMP/exe-wrong-ca.out" || rc=$?
((rc == 1)) || fail "with a CA that did not sign nghttpx's certificate the program exited $rc, not 1"
grep -q 'FAIL: tls: handshake .*certificate verify failed' "$TMP/exe-wrong-ca.out" ||
  fail "with the wrong CA the TLS check did not fail on verification"
log "ok: with another CA the handshake fails: certificate verify failed"
log "PASSED"
