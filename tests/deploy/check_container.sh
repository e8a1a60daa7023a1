#!/usr/bin/env bash
# Checks the container image and the Kubernetes example (deploy/Dockerfile,
# deploy/h2gate.yaml, deploy/kubernetes/).
#
#   check_container.sh static H2GATE   offline, a few seconds (CTest container_static, -L deploy):
#     - kubernetes-validate --strict -k 1.29.0 and -k 1.33.0 on every manifest; the
#       PodMonitor (a CRD, not in its schemas) and the Kustomization are checked
#       structurally by container_lint.py instead (which also cross-checks ports,
#       labels, env, Secret keys and probes); a copy of the Deployment with a
#       misspelled field must be rejected, so the validator cannot pass everything
#     - the kustomization renders: `kubectl kustomize` when kubectl exists, else
#       container_lint.py checks that every listed resource exists and parses
#     - hadolint deploy/Dockerfile
#     - H2GATE --validate on deploy/h2gate.yaml and on the ConfigMap's config
#       (with POD_IP, PROXY_USERNAME, PROXY_PASSWORD set; and it must fail without them)
#   check_container.sh image            needs podman + runc, minutes (CTest container_image, -L container):
#     - makes the base images debian:trixie and debian:trixie-slim (below: base),
#       builds deploy/Dockerfile (Debian 13, its default DEBIAN_RELEASE), runs the image
#       (--network host: it shares the host's loopback, as it would a pod's),
#       fetches a file from a loopback origin (python3 http.server) through it,
#       then `podman stop` with a tunnel open: h2gate (PID 1) must drain and exit 0
#       within drain_timeout; then runs the image with the Kubernetes ConfigMap's config
#       and the Deployment's env (/healthz 200, /ready 503: no real upstream proxy here).
#       Removes the containers and the image it built.
#     Exit 77 (skipped) with the reason when podman, runc or mmdebstrap is missing or
#     podman cannot store images or run containers here (e.g. inside a container whose
#     root is overlayfs: "'overlay' is not supported over overlayfs"); found out first,
#     in seconds, with a one-file image made from the host's /bin/true.
#   check_container.sh build-image      the base images and `podman build` only, tagged
#                                       localhost/h2gate-check:prepared: tests/run.sh runs it
#                                       niced from its start, so that the `image` run of the
#                                       container stage finds every layer in podman's cache
#                                       (the compile overlaps the stages before; `image`
#                                       removes that tag)
#   check_container.sh mirror           prints the Debian mirror the image test would use
#   check_container.sh base [RELEASE [slim]]
#                                       makes the pristine base image debian:RELEASE (default
#                                       bookworm; `slim`: debian:RELEASE-slim) or exits 77 with
#                                       the reason: for tests/deploy/check_package.sh and
#                                       tests/deploy/check_debian.sh. The root file system
#                                       comes from mmdebstrap (--variant=apt; slim: minbase
#                                       without documentation, like Debian's official slim
#                                       images) and is kept as a tarball in the cache,
#                                       named after the Date of the suite's InRelease on the
#                                       mirror (it changes when the archive publishes new
#                                       packages: a point release), so a root is made once
#                                       per package list (~40 s) and imported again in
#                                       seconds; the image carries that name as the label
#                                       org.h2gate.root. Offline, the newest cached root of
#                                       the release serves. Older roots of a release are
#                                       deleted when a new one is made.
#
# Env: HADOLINT, KUBERNETES_VALIDATE (default: in PATH, else /opt/h2gate-test/venv/bin),
# KUBECTL (none: do not use kubectl), PYTHON (default /usr/bin/python3: Debian's, with python3-yaml),
# H2GATE_DEBIAN_MIRROR (default: the first archive of a Debian 12 or 13 suite in the apt
# sources: deb822 *.sources files, then one-line sources.list entries), H2GATE_APT_DIR
# (/etc/apt: where those sources are read), H2GATE_ROOT_CACHE (the roots' cache: default
# /var/cache/h2gate-roots where writable, else ${XDG_CACHE_HOME:-~/.cache}/h2gate-roots).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
K8S=$ROOT/deploy/kubernetes
LINT=$ROOT/tests/deploy/container_lint.py
VENV_BIN=/opt/h2gate-test/venv/bin
if [[ -x /usr/bin/python3 ]]; then PYTHON=${PYTHON:-/usr/bin/python3}; else PYTHON=${PYTHON:-python3}; fi
K8S_VERSIONS=(1.29.0 1.33.0)
# The image test's Debian release: deploy/Dockerfile's default DEBIAN_RELEASE.
IMAGE_RELEASE=${H2GATE_IMAGE_RELEASE:-$(sed -n 's/^ARG DEBIAN_RELEASE=//p' "$ROOT/deploy/Dockerfile" | head -n1)}

CHECK_NAME=check_container
# log, fail, skip; $TMP and CLEANUP, cleaned at exit
# shellcheck source=tests/deploy/lib.sh
source "$ROOT/tests/deploy/lib.sh"


# tool NAME ENVVAR: the tool's path (ENVVAR, PATH, then the test venv).
tool() {
  local name=$1 override=${2:-}
  if [[ -n $override ]]; then
    echo "$override"
  elif command -v "$name" >/dev/null 2>&1; then
    command -v "$name"
  elif [[ -x $VENV_BIN/$name ]]; then
    echo "$VENV_BIN/$name"
  else
    return 1
  fi
}

# run LABEL CMD...: runs CMD; on failure shows its output and fails.
run() {
  local label=$1
  shift
  if ! "$@" >"$TMP/out" 2>&1; then
    sed 's/^/    /' "$TMP/out" >&2
    fail "$label"
  fi
  log "ok: $label"
}

# ------------------------------------------------------------------ static ----
static_checks() {
  local h2gate=${1:-}
  [[ -n $h2gate && -x $h2gate ]] || fail "usage: $0 static PATH/TO/h2gate"
  local kv hadolint
  kv=$(tool kubernetes-validate "${KUBERNETES_VALIDATE:-}") ||
    fail "kubernetes-validate not found (deploy/install-deps.sh --test puts it in $VENV_BIN)"
  hadolint=$(tool hadolint "${HADOLINT:-}") ||
    fail "hadolint not found (deploy/install-deps.sh --test puts it in $VENV_BIN)"
  "$PYTHON" -c 'import yaml' 2>/dev/null || fail "$PYTHON has no PyYAML (Debian: python3-yaml)"

  # 1. Kubernetes schemas (built-in kinds) and the structural/cross checks.
  local manifests=() m kind v
  for m in "$K8S"/*.yaml; do
    [[ $(basename "$m") == kustomization.yaml ]] && continue
    kind=$("$PYTHON" -c 'import sys,yaml; print(yaml.safe_load(open(sys.argv[1]))["apiVersion"])' "$m")
    if [[ $kind == */* && $kind != apps/* && $kind != batch/* && $kind != policy/* ]] &&
      [[ $kind != *.k8s.io/* ]]; then
      log "note: $(basename "$m") is $kind, a CRD without a schema in kubernetes-validate:" \
        "checked structurally by container_lint.py"
      continue
    fi
    manifests+=("$m")
  done
  ((${#manifests[@]} >= 3)) || fail "expected the ConfigMap, Secret and Deployment in $K8S"
  for v in "${K8S_VERSIONS[@]}"; do
    run "kubernetes-validate --strict -k $v $(cd "$K8S" && basename -a "${manifests[@]}" | paste -sd' ')" \
      "$kv" --strict -k "$v" "${manifests[@]}"
  done
  sed 's/restartPolicy: Always/restartPolicyy: Always/' "$K8S/deployment.yaml" >"$TMP/misspelled.yaml"
  if "$kv" --strict -k "${K8S_VERSIONS[0]}" "$TMP/misspelled.yaml" >"$TMP/out" 2>&1; then
    cat "$TMP/out" >&2
    fail "self-test: kubernetes-validate --strict accepted a misspelled field (restartPolicyy)"
  fi
  log "ok: self-test: a misspelled field is rejected"
  run "container_lint.py (PodMonitor, Kustomization, cross-references, security settings)" \
    "$PYTHON" "$LINT" "$K8S"
  cat "$TMP/out"

  # 2. The kustomization renders.
  local kubectl=${KUBECTL:-}
  [[ -z $kubectl ]] && kubectl=$(command -v kubectl || true)
  if [[ -n $kubectl && $kubectl != none ]]; then
    run "kubectl kustomize deploy/kubernetes" "$kubectl" kustomize "$K8S"
    cp "$TMP/out" "$TMP/rendered.yaml"
    run "the rendered kustomization has every resource and the image" \
      "$PYTHON" "$LINT" --rendered "$TMP/rendered.yaml" "$K8S"
  else
    log "note: no kubectl (not installed, or KUBECTL=none): kustomization.yaml checked by container_lint.py only" \
      "(every listed resource exists and parses), not rendered"
  fi

  # 3. Dockerfile.
  run "hadolint deploy/Dockerfile ($("$hadolint" --version 2>/dev/null | head -n1))" \
    "$hadolint" "$ROOT/deploy/Dockerfile"

  # 4. The configs h2gate will read.
  run "h2gate --validate -c deploy/h2gate.yaml (the image's baked config)" \
    "$h2gate" --validate -c "$ROOT/deploy/h2gate.yaml"
  "$PYTHON" -c 'import sys,yaml; sys.stdout.write(yaml.safe_load(open(sys.argv[1]))["data"]["h2gate.yaml"])' \
    "$K8S/configmap.yaml" >"$TMP/configmap-h2gate.yaml"
  run "h2gate --validate on configmap.yaml's h2gate.yaml (POD_IP, PROXY_USERNAME, PROXY_PASSWORD set)" \
    env POD_IP=10.244.1.23 PROXY_USERNAME=alice PROXY_PASSWORD='s3cret:/@' \
    "$h2gate" --validate -c "$TMP/configmap-h2gate.yaml"
  if env -u POD_IP -u PROXY_USERNAME -u PROXY_PASSWORD \
    "$h2gate" --validate -c "$TMP/configmap-h2gate.yaml" >"$TMP/out" 2>&1; then
    fail "the ConfigMap's config validated without POD_IP/PROXY_* set: it does not use them"
  fi
  local var
  for var in POD_IP PROXY_USERNAME PROXY_PASSWORD; do
    grep -q "environment variable $var is not set" "$TMP/out" ||
      fail "without the env, --validate did not name $var: $(cat "$TMP/out")"
  done
  log "ok: without the env, --validate names POD_IP, PROXY_USERNAME and PROXY_PASSWORD"
  log "static checks passed"
}

# ------------------------------------------------------------------- image ----
debian_mirror() {
  if [[ -n ${H2GATE_DEBIAN_MIRROR:-} ]]; then
    echo "$H2GATE_DEBIAN_MIRROR"
    return
  fi
  local apt=${H2GATE_APT_DIR:-/etc/apt} f uri=""
  for f in "$apt"/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    # deb822: the URIs of the stanza whose Suites has plain "bookworm" or "trixie".
    uri=$(awk 'BEGIN{RS=""} /\nSuites:([^\n]*[ \t])?(bookworm|trixie)([ \t]|\n|$)/ || /^Suites:([^\n]*[ \t])?(bookworm|trixie)([ \t]|\n|$)/ {
                 if (match($0, /URIs:[ \t]*[^ \t\n]+/)) { s = substr($0, RSTART, RLENGTH); sub(/URIs:[ \t]*/, "", s); print s; exit } }' "$f")
    [[ -n $uri ]] && break
  done
  if [[ -z $uri ]]; then
    # One-line style: "deb [option=value ...] URI SUITE COMPONENT...".
    local lists=()
    [[ -f $apt/sources.list ]] && lists+=("$apt/sources.list")
    for f in "$apt"/sources.list.d/*.list; do [[ -f $f ]] && lists+=("$f"); done
    if ((${#lists[@]})); then
      uri=$(awk '{ sub(/#.*/, "") }
                 $1 == "deb" { sub(/^[ \t]*deb[ \t]+(\[[^]]*\][ \t]+)?/, ""); split($0, f, /[ \t]+/)
                               if (f[2] == "bookworm" || f[2] == "trixie") { print f[1]; exit } }' "${lists[@]}")
    fi
  fi
  echo "${uri:-http://deb.debian.org/debian}"
}

# Can podman store an image and run a container here? Seconds, before the minutes of
# mmdebstrap: a one-file image (the host's /bin/true and the libraries it loads).
probe_podman() {
  local root=$TMP/probe-root tag=localhost/h2gate-probe:$$ lib
  mkdir -p "$root/bin"
  cp /bin/true "$root/bin/true"
  for lib in $(ldd /bin/true | grep -o '/[^ ]*'); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
  tar -C "$root" -cf "$TMP/probe.tar" .
  if ! podman import --quiet "$TMP/probe.tar" "$tag" >"$TMP/out" 2>&1; then
    skip "podman cannot store an image here: $(tail -n1 "$TMP/out")"
  fi
  CLEANUP+=("podman rmi -f $tag")
  if ! podman run --rm "${RUN_OPTS[@]}" --network none "$tag" /bin/true >"$TMP/out" 2>&1; then
    skip "podman cannot run a container here: $(tail -n1 "$TMP/out")"
  fi
  podman rmi -f "$tag" >/dev/null 2>&1 || true
  log "ok: podman stores images and runs containers here"
}

root_cache() {
  if [[ -n ${H2GATE_ROOT_CACHE:-} ]]; then
    printf '%s\n' "$H2GATE_ROOT_CACHE"
  elif [[ -w /var/cache/h2gate-roots ]] || { [[ ! -e /var/cache/h2gate-roots && -w /var/cache ]]; }; then
    printf '%s\n' /var/cache/h2gate-roots
  else
    printf '%s\n' "${XDG_CACHE_HOME:-$HOME/.cache}/h2gate-roots"
  fi
}

# suite_date MIRROR SUITE: the Date of the suite's InRelease as 20260711T101637Z, or
# nothing when the mirror cannot be reached.
suite_date() {
  local date
  date=$(curl -fsS --max-time 30 -r 0-4095 "$1/dists/$2/InRelease" 2>/dev/null | sed -n 's/^Date: //p' | head -n1)
  [[ -n $date ]] && date -u -d "$date" +%Y%m%dT%H%M%SZ 2>/dev/null
  return 0
}

# ensure_base RELEASE FLAVOUR: podman has debian:RELEASE (FLAVOUR apt) or
# debian:RELEASE-slim (FLAVOUR slim) made from the root of the cache for the
# suite's current Date (made by mmdebstrap when missing). See `base` above.
ensure_base() {
  local release=$1 flavour=$2 tag mirror date cache name tar label opts=()
  case $flavour in
    apt)
      tag=debian:$release
      opts=(--variant=apt)
      ;;
    slim)
      tag=debian:$release-slim
      # Like Debian's official slim image (debuerreotype): no documentation, man
      # pages or translations.
      opts=(--variant=minbase --dpkgopt='path-exclude=/usr/share/doc/*'
        --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/man/*'
        --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/locale/*'
        --dpkgopt='path-exclude=/usr/share/groff/*' --dpkgopt='path-exclude=/usr/share/lintian/*'
        --dpkgopt='path-exclude=/usr/share/linda/*')
      ;;
    *) fail "base image flavour '$flavour' (apt or slim)" ;;
  esac
  [[ $release =~ ^[a-z]+$ ]] || fail "Debian release '$release' (a codename: bookworm, trixie)"
  mirror=$(debian_mirror)
  cache=$(root_cache)
  mkdir -p "$cache"
  date=$(suite_date "$mirror" "$release")
  if [[ -n $date ]]; then
    name=$release-$flavour-$date.tar
  else
    name=$(cd "$cache" && ls -1 "$release-$flavour-"*.tar 2>/dev/null | sort | tail -n1)
    [[ -n $name ]] || fail "cannot read $mirror/dists/$release/InRelease and no $release root is cached in $cache"
    log "base image $tag: $mirror/dists/$release/InRelease unreadable: the newest cached root, $name"
  fi
  tar=$cache/$name
  label=$(podman image inspect --format '{{index .Labels "org.h2gate.root"}}' "$tag" 2>/dev/null || true)
  if [[ $label == "$name" ]]; then
    log "base image $tag: cached ($name)"
    return
  fi
  local t0=$SECONDS
  (
    # One mmdebstrap per root at a time (concurrent runs wait); a killed one
    # leaves only a .tmp file.
    exec 8>>"$cache/lock"
    flock 8
    if [[ ! -f $tar ]]; then
      log "base image $tag: mmdebstrap ${opts[0]} $release from $mirror (root $name)"
      # mmdebstrap picks the output format by the name's extension: .tar.
      local part=$cache/.partial-$$-$name
      mmdebstrap --quiet "${opts[@]}" "$release" "$part" "$mirror" ||
        { rm -f "$part"; fail "mmdebstrap ${opts[0]} $release failed"; }
      mv "$part" "$tar"
      find "$cache" -maxdepth 1 \( -name "$release-$flavour-*.tar" -o -name ".partial-*-$release-$flavour-*.tar" \) \
        ! -name "$name" -delete
    fi
  )
  podman import --quiet --change 'CMD ["/bin/bash"]' --change "LABEL org.h2gate.root=$name" \
    "$tar" "$tag" >/dev/null || fail "podman import $tag failed"
  log "base image $tag ready in $((SECONDS - t0))s ($name)"
}

free_port() {
  "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_http URL SECONDS: until URL answers 200.
wait_http() {
  local url=$1 deadline=$((SECONDS + $2))
  while ((SECONDS < deadline)); do
    curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null && return 0
    sleep 0.3
  done
  return 1
}

# Exits 77 (skip) with the reason unless podman can store images and run
# containers here; sets RUN_OPTS (runc, ulimits: see TESTBED notes).
container_prereqs() {
  local x
  for x in podman runc mmdebstrap curl; do
    command -v "$x" >/dev/null 2>&1 || skip "$x not installed (deploy/install-deps.sh --test installs it)"
  done
  [[ $(id -u) -eq 0 ]] || skip "needs root (rootful podman: --network host, imports, runc)"
  podman info >/dev/null 2>&1 || skip "podman info fails here: $(podman info 2>&1 | tail -n1)"
  RUN_OPTS=(--runtime runc --ulimit nofile=1024:20000 --ulimit nproc=1024:1024)
  probe_podman
}

# The image of `build-image`: built ahead (tests/run.sh, niced from its start), so
# that image_test's own podman build finds every layer in podman's cache.
PREPARED_IMAGE=localhost/h2gate-check:prepared

# podman build of deploy/Dockerfile, tagged $1.
build_image() {
  # The builder's RUN apt-get reaches the Debian mirror through podman's default
  # network (rootful: a bridge with NAT); no registry is contacted, the bases are local.
  log "podman build -f deploy/Dockerfile (the builder compiles h2gate: minutes on 2 cores)"
  local t0=$SECONDS
  if ! podman build --runtime runc --pull=never --build-arg "DEBIAN_RELEASE=$IMAGE_RELEASE" \
    -f "$ROOT/deploy/Dockerfile" -t "$1" "$ROOT" \
    >"$TMP/build.log" 2>&1; then
    tail -n 60 "$TMP/build.log" >&2
    fail "podman build -f deploy/Dockerfile failed"
  fi
  log "ok: podman build in $((SECONDS - t0))s: $(podman image inspect --format '{{.Size}}' "$1" |
    awk '{printf "%.0f MB", $1 / 1e6}')"
}

image_test() {
  local RUN_OPTS=()
  container_prereqs

  ensure_base "$IMAGE_RELEASE" apt
  ensure_base "$IMAGE_RELEASE" slim
  # The base images themselves run here too?
  if ! podman run --rm "${RUN_OPTS[@]}" --network none "debian:$IMAGE_RELEASE-slim" true >"$TMP/out" 2>&1; then
    skip "podman cannot run a container here: $(tail -n1 "$TMP/out")"
  fi

  local image=localhost/h2gate-check:$$ name=h2gate-check-$$
  CLEANUP+=("podman rm -f -t 0 $name" "podman rmi -f $image" "podman rmi -f $PREPARED_IMAGE")
  if podman image exists "$PREPARED_IMAGE"; then
    log "podman build -f deploy/Dockerfile: its layers were built by check_container.sh build-image ($PREPARED_IMAGE)"
  fi
  build_image "$image"

  # Image metadata.
  local user entry ports
  user=$(podman image inspect --format '{{.Config.User}}' "$image")
  entry=$(podman image inspect --format '{{json .Config.Entrypoint}}' "$image")
  ports=$(podman image inspect --format '{{json .Config.ExposedPorts}}' "$image")
  [[ $user == 65532:65532 ]] || fail "image user is '$user', expected 65532:65532"
  [[ $entry == '["/usr/bin/h2gate","-c","/etc/h2gate/h2gate.yaml"]' ]] || fail "ENTRYPOINT is $entry"
  [[ $ports == *3128/tcp* && $ports == *9901/tcp* ]] || fail "EXPOSE is $ports"
  log "ok: user $user, entrypoint $entry, exposes $ports"
  run "the baked config validates inside the image (podman run IMAGE --validate)" \
    podman run --rm "${RUN_OPTS[@]}" --network none "$image" --validate
  run "the image runs h2gate (--version): $(podman run --rm "${RUN_OPTS[@]}" --network none "$image" --version 2>&1 | head -n1)" \
    podman run --rm "${RUN_OPTS[@]}" --network none "$image" --version

  # A loopback origin with a 1 MiB file.
  local origin_port proxy_port admin_port
  origin_port=$(free_port)
  proxy_port=$(free_port)
  admin_port=$(free_port)
  mkdir -p "$TMP/www"
  head -c 1048576 /dev/urandom >"$TMP/www/1m.bin"
  "$PYTHON" -m http.server --bind 127.0.0.1 --directory "$TMP/www" "$origin_port" >"$TMP/origin.log" 2>&1 &
  local origin_pid=$!
  CLEANUP+=("kill $origin_pid")
  wait_http "http://127.0.0.1:$origin_port/1m.bin" 10 || fail "the origin (python3 http.server) did not start"

  # A config mounted over the baked one: other ports (the host may run an h2gate on
  # 3128/9901) and a short drain, so the stop test is quick.
  local drain=5
  cat >"$TMP/h2gate.yaml" <<EOF
# check_container.sh: mounted over /etc/h2gate/h2gate.yaml
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: $admin_port}}
h2gate:
  drain_timeout: ${drain}s
static_resources:
  listeners:
  - name: local_proxy
    address: {socket_address: {address: 127.0.0.1, port_value: $proxy_port}}
    filter_chains:
    - filters:
      - name: h2gate.filters.access_log
      - name: h2gate.filters.forward_proxy
  clusters: []
EOF
  chmod 644 "$TMP/h2gate.yaml"
  # --network host: the container shares the host's network namespace, as h2gate
  # shares the pod's with the app, so its 127.0.0.1 listeners are the host's.
  # --read-only, --cap-drop ALL and no-new-privileges: what deploy/kubernetes/'s
  # securityContext asks for (readOnlyRootFilesystem, drop ALL, allowPrivilegeEscalation).
  podman run -d --name "$name" "${RUN_OPTS[@]}" --network host \
    --read-only --cap-drop ALL --security-opt no-new-privileges \
    -v "$TMP/h2gate.yaml:/etc/h2gate/h2gate.yaml:ro" "$image" >/dev/null ||
    fail "podman run $image failed"
  if ! wait_http "http://127.0.0.1:$admin_port/ready" 20; then
    podman logs "$name" >&2 || true
    fail "h2gate in the container did not become ready on 127.0.0.1:$admin_port"
  fi
  log "ok: h2gate ready in the container (admin 127.0.0.1:$admin_port from the mounted config)"
  local pid1
  pid1=$(podman exec "$name" cat /proc/1/cmdline | tr '\0' ' ')
  [[ $pid1 == "/usr/bin/h2gate -c /etc/h2gate/h2gate.yaml "* ]] || fail "PID 1 is '$pid1', not h2gate"
  local uid
  uid=$(podman exec "$name" awk '/^Uid:/{print $2}' /proc/1/status)
  [[ $uid == 65532 ]] || fail "h2gate runs as uid $uid"
  log "ok: PID 1 is h2gate ($pid1), uid $uid, read-only root file system, no capabilities"

  # A request through it.
  curl -fsS --max-time 30 -x "http://127.0.0.1:$proxy_port" -o "$TMP/got.bin" \
    "http://127.0.0.1:$origin_port/1m.bin" || {
    podman logs "$name" >&2 || true
    fail "curl -x through the container failed"
  }
  cmp -s "$TMP/www/1m.bin" "$TMP/got.bin" || fail "the file fetched through the container differs"
  podman logs "$name" 2>/dev/null | grep -q "1m.bin" ||
    fail "no access log line for the request in podman logs"
  log "ok: 1 MiB fetched through h2gate in the container, byte-identical; access log in podman logs"

  # podman stop with a CONNECT tunnel open: h2gate drains for drain_timeout, then
  # closes the tunnel and exits 0. podman stop waits longer than that (-t), so a
  # SIGKILL (exit 137) or a SIGTERM ignored by PID 1 would show.
  "$PYTHON" - "$proxy_port" "$origin_port" >"$TMP/tunnel.log" 2>&1 <<'EOF' &
import socket, sys, time
proxy, origin = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", proxy))
s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (origin, origin))
head = s.recv(4096)
print("tunnel:", head.split(b"\r\n")[0].decode(), flush=True)
t0 = time.monotonic()
how = "closed"
try:
    while s.recv(4096):
        pass
except ConnectionResetError:
    how = "reset"  # h2gate closes what is left at the end of the drain
print("tunnel %s by h2gate %.1f s after it opened" % (how, time.monotonic() - t0), flush=True)
EOF
  local tunnel_pid=$!
  CLEANUP+=("kill $tunnel_pid")
  for _ in $(seq 50); do
    grep -q '^tunnel: HTTP/1.1 200' "$TMP/tunnel.log" && break
    sleep 0.1
  done
  grep -q '^tunnel: HTTP/1.1 200' "$TMP/tunnel.log" || fail "no CONNECT tunnel: $(cat "$TMP/tunnel.log")"
  local stop_timeout=$((drain + 20)) started elapsed code
  started=$(date +%s.%N)
  podman stop -t "$stop_timeout" "$name" >/dev/null || fail "podman stop failed"
  elapsed=$("$PYTHON" -c "import sys; print('%.1f' % ($(date +%s.%N) - $started))")
  code=$(podman inspect --format '{{.State.ExitCode}}' "$name")
  podman logs "$name" >"$TMP/h2gate.log" 2>&1 || true
  if [[ $code != 0 ]]; then
    tail -n 20 "$TMP/h2gate.log" >&2
    fail "after podman stop h2gate exited with $code, expected 0 (137: killed after -t $stop_timeout s)"
  fi
  "$PYTHON" -c "import sys; sys.exit(0 if $elapsed < $drain + 5 else 1)" ||
    fail "podman stop took ${elapsed}s, more than drain_timeout ${drain}s + 5"
  "$PYTHON" -c "import sys; sys.exit(0 if $elapsed >= $drain - 1 else 1)" ||
    fail "podman stop took ${elapsed}s: h2gate did not wait drain_timeout (${drain}s) for the open tunnel"
  wait "$tunnel_pid" 2>/dev/null || true
  grep -Eq '^tunnel (closed|reset) by h2gate' "$TMP/tunnel.log" || fail "the open tunnel was not closed: $(cat "$TMP/tunnel.log")"
  log "ok: podman stop with a tunnel open: exit code 0 after ${elapsed}s (drain_timeout ${drain}s);" \
    "$(tail -n1 "$TMP/tunnel.log")"

  # The Kubernetes ConfigMap's config in the image, with the env the Deployment gives
  # it (ports moved to free ones): it loads (CA bundle path and all), /healthz is 200
  # and /ready explains that no upstream proxy (example.net names) is usable.
  local cm_name=h2gate-check-cm-$$ cm_admin cm_proxy
  cm_admin=$(free_port)
  cm_proxy=$(free_port)
  "$PYTHON" -c 'import sys,yaml; sys.stdout.write(yaml.safe_load(open(sys.argv[1]))["data"]["h2gate.yaml"])' \
    "$K8S/configmap.yaml" |
    sed "s/port_value: 9901}/port_value: $cm_admin}/; s/port_value: 3128}/port_value: $cm_proxy}/" \
      >"$TMP/configmap-h2gate.yaml"
  chmod 644 "$TMP/configmap-h2gate.yaml"
  grep -q "port_value: $cm_admin}" "$TMP/configmap-h2gate.yaml" || fail "could not move the ConfigMap's admin port"
  CLEANUP+=("podman rm -f -t 0 $cm_name")
  podman run -d --name "$cm_name" "${RUN_OPTS[@]}" --network host \
    --read-only --cap-drop ALL --security-opt no-new-privileges \
    -e POD_IP=127.0.0.1 -e PROXY_USERNAME=alice -e PROXY_PASSWORD=s3cret \
    -v "$TMP/configmap-h2gate.yaml:/etc/h2gate/h2gate.yaml:ro" "$image" >/dev/null ||
    fail "podman run with the ConfigMap's config failed"
  if ! wait_http "http://127.0.0.1:$cm_admin/healthz" 20; then
    podman logs "$cm_name" >&2 || true
    fail "h2gate with the ConfigMap's config: /healthz did not answer 200"
  fi
  local ready
  ready=$(curl -sS --max-time 5 -w ' %{http_code}' "http://127.0.0.1:$cm_admin/ready" | tr -d '\n' || true)
  [[ $ready == *corp_proxy*" 503" ]] || fail "ConfigMap config: /ready answered '$ready'"
  podman stop -t 20 "$cm_name" >/dev/null
  code=$(podman inspect --format '{{.State.ExitCode}}' "$cm_name")
  [[ $code == 0 ]] || fail "ConfigMap config: exit code $code after podman stop"
  log "ok: the ConfigMap's config runs in the image: /healthz 200, /ready 503 (${ready% *}), exit 0 on stop"
  log "image test passed"
}

case ${1:-} in
  static)
    shift
    static_checks "$@"
    ;;
  image) image_test ;;
  build-image)
    # The base images and the image's layers only (tagged $PREPARED_IMAGE), for a
    # later `image` run to find in podman's cache; exit 77 as `image`.
    RUN_OPTS=()
    container_prereqs
    ensure_base "$IMAGE_RELEASE" apt
    ensure_base "$IMAGE_RELEASE" slim
    build_image "$PREPARED_IMAGE"
    ;;
  base)
    # For tests/deploy/check_package.sh and check_debian.sh: a pristine image (made
    # once per package list, then cached), or exit 77 with the reason.
    RUN_OPTS=()
    container_prereqs
    ensure_base "${2:-bookworm}" "${3:-apt}"
    ;;
  mirror) debian_mirror ;;
  *)
    sed -n '2,/^set -euo/{/^set -euo/d; s/^# \{0,1\}//p;}' "$0"
    exit 2
    ;;
esac
