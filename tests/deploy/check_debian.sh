#!/usr/bin/env bash
# h2gate on a pristine Debian release, in a container: the README's command 1, the
# tests and the Debian package there (tests/run.sh runs it for Debian 13 as the
# stage `trixie`).
#
#   tests/deploy/check_debian.sh [RELEASE]      RELEASE: trixie (default) or bookworm
#
#   1. the pristine image debian:RELEASE (tests/deploy/check_container.sh base RELEASE:
#      mmdebstrap --variant=apt, cached outside the tree per package list; the package
#      check of step 6 and the container image test use the same root)
#   2. a container of it (the host's network, privileged like the host's test runs)
#      with this tree's files (those git tracks or would, committed or not) copied in,
#      and README command 1 there: deploy/quickstart.sh, with --listen and --admin on
#      free ports, until curl on the host fetches 1 MiB through it from a loopback
#      origin; then POST /quitquitquit on its admin port: it must exit 0
#   3. deploy/install-deps.sh --test-core, then the tests built in the same build/
#      (command 1's objects are reused: only the tests compile)
#   4. the unit tests (ctest -R '^unit') and a representative integration subset
#      (SUBSET below: an h2 upstream, the HTTP/1.1 response matrix [shapes] on the
#      paths H2GATE_SHAPES_PATHS names, Negotiate with the KDC over HTTP/1.1 and h2,
#      a PAC route)
#   5. tests/deploy/check_package.sh static build there: cpack -G DEB (the version
#      ~debNNu1 of the release, its Depends from dpkg-shlibdeps), the release's lintian,
#      systemd-analyze
#   5w. only with H2GATE_DEBIAN_WINDOWS=1 (it takes 15 to 30 minutes): the Windows cross
#      build there, deploy/install-deps.sh --test-windows and tests/windows/run.sh:
#      deploy/windows/build-deps.sh (its cache: the host's
#      /var/cache/h2gate-win-RELEASE, H2GATE_DEBIAN_WIN_CACHE), h2gate.exe and the
#      Windows tests, run under wine (ctest -L windows, then the [windows-exe] cases of
#      the integration tests built in step 3)
#   6. on the host: tests/deploy/check_package.sh install DEB RELEASE: that package in a
#      new pristine container of the release, under systemd
#   Each step prints its time. The .deb and the logs stay in build-RELEASE/ of the tree.
#
#   tests/deploy/check_debian.sh RELEASE --prepare
#      steps 1 to 3: the container, first `deploy/install-deps.sh --test-core
#      --download-only` in it (apt's cache filled with the packages of steps 2 and 3),
#      then README command 1 with its checks and the tests built. The container is
#      left running and named in build/debian-RELEASE.prepared; the next run without
#      --prepare takes it and goes on from step 4 (it prints the prepared steps' times;
#      their logs are in build-RELEASE/ too). tests/run.sh runs this niced in the
#      background from its start: the downloads, the root and the compiling overlap
#      the stages before, whose tests mostly wait on their peers (log:
#      build/debian-RELEASE.prepare.log).
#
# Exit 0 passed, 1 failed, 77 skipped where podman cannot run containers here (the
# line "check_debian: SKIP: reason").
#
# Env: H2GATE_SHAPES_PATHS (default squid,squid_tls,nghttpx,shapes: every path of the
# matrix but direct and pac, which the others cover), H2GATE_DEBIAN_SUBSET (Catch2
# test specs of the integration subset, one per line, instead of SUBSET),
# H2GATE_DEBIAN_WINDOWS=1 (step 5w), H2GATE_KEEP_CONTAINER=1 (leave the container
# running after a failure, to look in).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RELEASE=${1:-trixie}
PREPARE=0
[[ ${2:-} != --prepare ]] || PREPARE=1
# The container a --prepare run left for the next run (its name).
PREPARED=$ROOT/build/debian-$RELEASE.prepared
if [[ -x /usr/bin/python3 ]]; then PYTHON=${PYTHON:-/usr/bin/python3}; else PYTHON=${PYTHON:-python3}; fi
OUT=$ROOT/build-$RELEASE
SHAPES_PATHS=${H2GATE_SHAPES_PATHS:-squid,squid_tls,nghttpx,shapes}
# Catch2 test specs (a comma would separate two specs: the names end in *).
SUBSET=(
  "h2: max_concurrent_streams 10 puts 25 tunnels on exactly 3 connections"
  "[shapes]"
  "Kerberos fixture: curl's GSSAPI client gets through squid's negotiate_kerberos_auth*"
  "Negotiate through h2gate: CONNECT and absolute-form*"
  "Negotiate over HTTP/2: 20 tunnels on one connection*"
  "pac routing: DIRECT*"
)
if [[ -n ${H2GATE_DEBIAN_SUBSET:-} ]]; then
  mapfile -t SUBSET <<<"$H2GATE_DEBIAN_SUBSET"
fi
# The integration test files that hold the subset's cases (a spec's text without
# its trailing *, found literally in tests/integration/*.cc): only those are built
# (H2GATE_INTEGRATION_FILES, tests/CMakeLists.txt).
SUBSET_FILES=()
for spec in "${SUBSET[@]}"; do
  files=$(cd "$ROOT/tests/integration" && grep -lF -- "${spec%\*}" ./*.cc | sed 's#^\./##; s#\.cc$##') ||
    { printf 'check_debian: FAIL: no tests/integration/*.cc holds the subset spec "%s"\n' "$spec" >&2; exit 1; }
  for f in $files; do
    [[ " ${SUBSET_FILES[*]} " == *" $f "* ]] || SUBSET_FILES+=("$f")
  done
done
WINDOWS=${H2GATE_DEBIAN_WINDOWS:-0}
# Step 5w runs h2gate.exe against the real peers with the Linux build's
# [windows-exe] test (tests/windows/run.sh): build it too.
[[ $WINDOWS != 1 ]] || SUBSET_FILES+=(windows_exe_test)
WIN_CACHE=${H2GATE_DEBIAN_WIN_CACHE:-/var/cache/h2gate-win-$RELEASE}

CHECK_NAME=check_debian
# log, fail, skip; $TMP and CLEANUP, cleaned at exit
# shellcheck source=tests/deploy/lib.sh
source "$ROOT/tests/deploy/lib.sh"

[[ $RELEASE =~ ^(bookworm|trixie)$ ]] || fail "release '$RELEASE': bookworm or trixie"

# CPU seconds the container has used (cgroup v2 or v1), 0 without it: with the
# wall time of each step, what the step would take on 2 idle cores is about
# max(wall on an idle machine, CPU / 2); a shared machine's load inflates the wall time.
box_cpu() {
  [[ -n ${NAME:-} ]] && podman exec "$NAME" sh -c \
    'if [ -f /sys/fs/cgroup/cpu.stat ]; then sed -n "s/^usage_usec //p" /sys/fs/cgroup/cpu.stat | awk "{print int(\$1 / 1e6)}";
     else awk "{print int(\$1 / 1e9)}" /sys/fs/cgroup/cpuacct/cpuacct.usage; fi' 2>/dev/null || echo 0
}

T_START=$SECONDS
STEP_T0=$SECONDS
STEP_CPU0=0
TIMES=()
# step NAME: ends the previous step (its wall and the container's CPU time kept for
# the summary) and starts NAME.
step() {
  local cpu
  cpu=$(box_cpu)
  if [[ -n ${STEP_NAME:-} ]]; then
    TIMES+=("$STEP_NAME: $((SECONDS - STEP_T0))s, CPU $((cpu > STEP_CPU0 ? cpu - STEP_CPU0 : 0))s")
    log "--- ${TIMES[-1]}"
  fi
  STEP_NAME=${1:-}
  STEP_T0=$SECONDS
  STEP_CPU0=$cpu
  [[ -z $STEP_NAME ]] || log "=== $STEP_NAME"
}

free_port() {
  "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# in_box LOG CMD: runs the bash command CMD in the container's /src, output to
# $OUT/LOG; on failure its tail and the log's path.
in_box() {
  local logf=$OUT/$1
  shift
  if ! podman exec "${EXEC_ENV[@]}" "$NAME" bash -c "cd /src && $*" >"$logf" 2>&1; then
    tail -n 60 "$logf" >&2
    fail "in the $RELEASE container: '$*' failed (log: $logf)"
  fi
}

# ------------------------------------------------------------ 1. the root ----
step "pristine debian:$RELEASE"
"$ROOT/tests/deploy/check_container.sh" base "$RELEASE" >"$TMP/base.log" 2>&1 || {
  rc=$?
  cat "$TMP/base.log"
  ((rc == 77)) && skip "$(sed -n 's/^check_container: SKIP: //p' "$TMP/base.log" | tail -n1)"
  fail "the debian:$RELEASE base image"
}
sed 's/^/  /' "$TMP/base.log"

# ---------------------------------------------------------- 2. command 1 ----
# The host's CA bundle and proxy settings, for pip's downloads from PyPI in step 3
# (only there: the tests must not see a proxy).
INSTALL_ENV=()
CA_MOUNT=()
if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
  CA_MOUNT=(-v /etc/ssl/certs/ca-certificates.crt:/host-ca.crt:ro)
  INSTALL_ENV+=(-e SSL_CERT_FILE=/host-ca.crt -e PIP_CERT=/host-ca.crt -e REQUESTS_CA_BUNDLE=/host-ca.crt)
fi
for v in http_proxy https_proxy HTTP_PROXY HTTPS_PROXY no_proxy NO_PROXY PIP_INDEX_URL PIP_DEFAULT_TIMEOUT; do
  [[ -n ${!v:-} ]] && INSTALL_ENV+=(-e "$v=${!v}")
done
EXEC_ENV=()
# The Windows libraries built in the container are kept on the host, keyed by their
# versions as on the host (deploy/windows/build-deps.sh).
if [[ $WINDOWS == 1 ]]; then
  mkdir -p "$WIN_CACHE"
  CA_MOUNT+=(-v "$WIN_CACHE:/var/cache/h2gate-win")
fi
# The container: one a --prepare run left (steps 1 to 3 done: BUILT), else a new one.
# The marker file is written by --prepare as its last act.
BUILT_MARK=/src/.h2gate-prepared
NAME=""
BUILT=0
if ((!PREPARE)) && [[ -f $PREPARED ]]; then
  NAME=$(cat "$PREPARED")
  rm -f "$PREPARED"
  if [[ $(podman container inspect --format '{{.State.Running}}' "$NAME" 2>/dev/null) == true ]] &&
    podman exec "$NAME" test -e "$BUILT_MARK"; then
    BUILT=1
    # The container's CPU so far is the prepared steps': not this step's.
    STEP_CPU0=$(box_cpu)
    log "container $NAME from --prepare: steps 1 to 3 done there (README command 1 served a request, the tests built):"
    podman exec "$NAME" cat "$BUILT_MARK" | sed 's/^/  /'
  else
    log "the container $NAME from --prepare is gone or not prepared: a new one"
    podman rm -f -t 0 "$NAME" >/dev/null 2>&1 || true
    NAME=""
  fi
fi
if ((!BUILT)); then
  rm -rf "$OUT"
  mkdir -p "$OUT"
fi
FRESH=0
if [[ -z $NAME ]]; then
  NAME=h2gate-debian-$RELEASE-$$
  FRESH=1
fi
if ((PREPARE)); then
  # Removed on failure only: on success the next run takes it.
  CLEANUP+=("[[ -f $PREPARED ]] || podman rm -f -t 0 $NAME")
else
  CLEANUP+=("[[ \${H2GATE_KEEP_CONTAINER:-} == 1 ]] || podman rm -f -t 0 $NAME")
fi
if ((FRESH)); then
  podman run -d --name "$NAME" --runtime runc --privileged --network host \
    --ulimit nofile=20000:20000 --ulimit nproc=4096:4096 "${CA_MOUNT[@]}" \
    "debian:$RELEASE" sleep infinity >/dev/null || fail "podman run debian:$RELEASE"
fi
if ((PREPARE)); then
  step "apt's downloads for steps 2 and 3 (deploy/install-deps.sh --test-core --download-only)"
  podman exec -i "$NAME" bash -c 'mkdir -p /tmp/prepare && cat >/tmp/prepare/install-deps.sh' \
    <"$ROOT/deploy/install-deps.sh" || fail "copying deploy/install-deps.sh in"
  extra=()
  [[ $WINDOWS != 1 ]] || extra=(--test-windows)
  podman exec "${INSTALL_ENV[@]}" "$NAME" bash /tmp/prepare/install-deps.sh --test-core "${extra[@]}" \
    --download-only || fail "install-deps.sh --download-only in the $RELEASE container"
  podman exec "$NAME" rm -rf /tmp/prepare
fi
if ((!BUILT)); then
  step "README command 1 (deploy/quickstart.sh) in the pristine root"
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf "$TMP/src.tar") ||
    fail "could not list this tree's files with git"
  podman exec -i "$NAME" bash -c 'mkdir /src && tar -C /src -xf -' <"$TMP/src.tar" || fail "copying the tree in"
  log "container $NAME: $(podman exec "$NAME" sh -c '. /etc/os-release && echo "$PRETTY_NAME"'), $(tar -tf "$TMP/src.tar" | wc -l) files of the tree in /src"

  proxy_port=$(free_port)
  admin_port=$(free_port)
  origin_port=$(free_port)
  mkdir -p "$TMP/www"
  head -c 1048576 /dev/urandom >"$TMP/www/1m.bin"
  "$PYTHON" -m http.server --bind 127.0.0.1 --directory "$TMP/www" "$origin_port" >"$TMP/origin.log" 2>&1 &
  CLEANUP+=("kill $!")
  podman exec "$NAME" bash -c "cd /src && exec nice deploy/quickstart.sh \
    --listen 127.0.0.1:$proxy_port --admin 127.0.0.1:$admin_port" >"$OUT/quickstart.log" 2>&1 &
  qs_pid=$!
  CLEANUP+=("kill $qs_pid")
  # Installing and compiling take minutes on 2 busy cores.
  deadline=$((SECONDS + 3600))
  until curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$admin_port/ready" 2>/dev/null; do
    if ! kill -0 "$qs_pid" 2>/dev/null; then
      tail -n 40 "$OUT/quickstart.log" >&2
      fail "deploy/quickstart.sh ended before h2gate was ready (log: $OUT/quickstart.log)"
    fi
    ((SECONDS < deadline)) || fail "h2gate from deploy/quickstart.sh not ready within an hour"
    sleep 1
  done
  log "ok: $(grep -m1 -o 'install-deps: installing: .*' "$OUT/quickstart.log" | cut -c1-160)..."
  log "ok: h2gate ready $((SECONDS - STEP_T0))s after deploy/quickstart.sh started ($(podman exec "$NAME" /src/build/h2gate --version))"
  want=$(sha256sum <"$TMP/www/1m.bin" | cut -d' ' -f1)
  got=$(curl -fsS --max-time 30 -x "http://127.0.0.1:$proxy_port" "http://127.0.0.1:$origin_port/1m.bin" | sha256sum | cut -d' ' -f1)
  [[ $got == "$want" ]] || fail "1 MiB through h2gate of deploy/quickstart.sh: not intact"
  curl -fsS -o /dev/null --max-time 10 -X POST -H "X-H2gate-Admin: 1" "http://127.0.0.1:$admin_port/quitquitquit" ||
    fail "POST /quitquitquit to h2gate's admin port"
  rc=0
  wait "$qs_pid" || rc=$?
  ((rc == 0)) || {
    tail -n 20 "$OUT/quickstart.log" >&2
    fail "h2gate of deploy/quickstart.sh exited $rc after POST /quitquitquit"
  }
  grep -q '1m.bin' "$OUT/quickstart.log" || fail "no access log line for the request in h2gate's output"
  log "ok: curl -x http://127.0.0.1:$proxy_port fetched 1 MiB intact through it (access log line written); /quitquitquit: exit 0"

  # --------------------------------------------------------- 3. the tests ----
  step "deploy/install-deps.sh --test-core"
  EXEC_ENV=("${INSTALL_ENV[@]}")
  in_box install-test-core.log nice deploy/install-deps.sh --test-core
  EXEC_ENV=()
  log "ok: $(grep -o 'installing: .*' "$OUT/install-test-core.log" | head -n1 | wc -w) test packages, $(grep -o 'curl 8 ready: .*' "$OUT/install-test-core.log")"

  step "the tests built in build/ (command 1's objects reused; integration: ${SUBSET_FILES[*]})"
  subset_files=$(IFS=';' && echo "${SUBSET_FILES[*]}")
  in_box configure.log cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DH2GATE_TESTS=ON -DH2GATE_WERROR=ON \
    -DH2GATE_UNITY=ON \
    "'-DH2GATE_INTEGRATION_FILES=$subset_files'"
  in_box build.log nice cmake --build build
  # Command 1's objects must be reused (CMakeLists.txt keeps their command lines the
  # same when the tree is configured again): a rebuilt h2gate costs minutes here.
  rebuilt=$(grep -c 'Building CXX object CMakeFiles/h2gate_core.dir/' "$OUT/build.log" || true)
  ((rebuilt == 0)) || fail "the tests' build compiled $rebuilt of h2gate's objects again, which command 1 had built (log: $OUT/build.log)"
  log "ok: $(grep -c '^\[' "$OUT/build.log") build steps, none of h2gate's; $(grep -E '^-- (Catch2|llhttp|integration tests)' "$OUT/configure.log" | tr '\n' ' ')"
fi

if ((PREPARE)); then
  step ""
  printf '%s\n' "${TIMES[@]}" | podman exec -i "$NAME" sh -c "cat >$BUILT_MARK" ||
    fail "writing $BUILT_MARK in the container"
  mkdir -p "$(dirname "$PREPARED")"
  echo "$NAME" >"$PREPARED"
  log "prepared in $((SECONDS - T_START))s: container $NAME (named in $PREPARED): ${TIMES[*]/#/| }"
  exit 0
fi

# --------------------------------------------------------- 4. run them ----
step "unit tests"
in_box unit.log ctest --test-dir build --output-on-failure -R "'^unit'"
log "ok: $(grep -Eo '[0-9]+% tests passed.*' "$OUT/unit.log")"

step "integration subset"
# One run per spec (and its time): Catch2 takes several arguments as one spec
# whose parts must all match.
i=0
for spec in "${SUBSET[@]}"; do
  i=$((i + 1))
  t0=$SECONDS
  in_box "integration-$i.log" H2GATE_CURL8=/opt/h2gate-test/curl8/curl H2GATE_SHAPES_PATHS="$SHAPES_PATHS" \
    build/tests/h2gate_integration_tests --durations yes "$(printf '%q' "$spec")"
  log "ok: $spec: $(grep -E '^(All tests passed|test cases:)' "$OUT/integration-$i.log" | tail -n1) in $((SECONDS - t0))s"
done

# ----------------------------------------------------------- 5. package ----
step "the Debian package: cpack, lintian, systemd-analyze"
in_box package-static.log tests/deploy/check_package.sh static build
grep -E '^check_package: (ok: (version|cpack|lintian|Depends)|Depends:)' "$OUT/package-static.log" | sed 's/^/  /'
deb=$(podman exec "$NAME" bash -c 'ls /src/build/h2gate_*.deb') || fail "no .deb in the container's build/"
podman cp "$NAME:$deb" "$OUT/" || fail "podman cp $deb"
DEB=$OUT/$(basename "$deb")

if [[ $WINDOWS == 1 ]]; then
  step "the Windows cross build (deploy/install-deps.sh --test-windows, tests/windows/run.sh)"
  EXEC_ENV=("${INSTALL_ENV[@]}")
  in_box install-test-windows.log nice deploy/install-deps.sh --test-windows
  EXEC_ENV=()
  # deploy/windows/build-deps.sh's choice of sources, passed on (see its top).
  EXEC_ENV=()
  for v in H2GATE_WIN_SOURCE_VERSIONS H2GATE_WIN_SOURCE_SUITE; do
    [[ -n ${!v:-} ]] && EXEC_ENV+=(-e "$v=${!v}")
  done
  in_box windows.log nice tests/windows/run.sh build-windows
  EXEC_ENV=()
  grep -E '^build-deps: (sources:|[a-z0-9-]+: done in|llhttp:|sysroot complete)|^windows: (mingw|wine|dependencies|configured)' \
    "$OUT/windows.log" | sed 's/^/  /'
  log "ok: $(grep -Eo '[0-9]+% tests passed.*' "$OUT/windows.log" | tail -n1); [windows-exe]: $(grep -E '^(All tests passed|test cases:)' "$OUT/windows.log" | tail -n1); windows: passed under wine"
fi

step "$(basename "$DEB") installed and run under systemd (tests/deploy/check_package.sh install)"
# The container is done: its memory and processes go before the next one starts.
[[ ${H2GATE_KEEP_CONTAINER:-} == 1 ]] || podman rm -f -t 0 "$NAME" >/dev/null
NAME=""
rc=0
"$ROOT/tests/deploy/check_package.sh" install "$DEB" "$RELEASE" >"$OUT/package-install.log" 2>&1 || rc=$?
sed 's/^/  /' "$OUT/package-install.log"
((rc == 0)) || fail "the package under systemd in a pristine $RELEASE container (log: $OUT/package-install.log)"
step ""
log "Debian $RELEASE passed in $((SECONDS - T_START))s$( ((!BUILT)) || echo ", steps 1 to 3 before that by --prepare"): ${TIMES[*]/#/| }"
