#!/usr/bin/env bash
# Builds the libraries h2gate links for 64-bit Windows, from Debian's own source
# packages: the SAME source versions as the Linux build's packages (dpkg-query),
# Debian's patches applied, compiled with mingw-w64 (posix threads) into static
# libraries in a sysroot that cmake/mingw-w64.cmake hands to the top-level
# CMakeLists.txt (its find_package / pkg_check_modules calls find them there).
#
#   deploy/windows/build-deps.sh                  builds the sysroot unless cached;
#                                                 prints its path (the only stdout line)
#   deploy/windows/build-deps.sh --print-sysroot  prints the path if that sysroot is
#                                                 built, else says so and exits 2
#   deploy/windows/build-deps.sh --align          (root; deploy/install-deps.sh --test runs
#                                                 it) when the mirror no longer serves the
#                                                 source of an installed library, upgrades
#                                                 that library to the newest version whose
#                                                 source it serves (never downgrades)
#
# Built: OpenSSL 3 (libssl, libcrypto; Debian's Configure options, minus tests and
# apps), nghttp2 (libnghttp2 only), yaml-cpp (the library only), prometheus-cpp (core
# only: pull and push are not built, so neither civetweb nor zlib is needed); on
# Debian 13 also Catch2 v3 (libCatch2.a, for the Windows tests).
# Not built: libidn2 (Windows has IDN conversion in the system, IdnToAscii in
# normaliz.dll); llhttp and Asio: the build compiles llhttp's C sources and takes
# Asio's headers from libasio-dev (the sysroot's include/ links to them, so the
# cross build's include path never holds /usr/include itself).
#
# Debian releases:
#   12 (bookworm)  llhttp's C sources are those of the installed node-llhttp (the Linux
#                  build compiles them too); the Windows tests compile in Catch2 v2's
#                  single header (package catch2).
#   13 (trixie)    llhttp is a library there (libllhttp-dev, source package
#                  node-undici, which holds llhttp as TypeScript that llparse turns
#                  into C while the package builds; this mirror does not even serve
#                  node-undici's source files): no C sources for Windows. They come
#                  from Debian 12's binary package node-llhttp (arch all: the
#                  generated C sources and llhttp.h), downloaded from the same mirror's
#                  bookworm suite by an apt configuration of this script (checked
#                  against the signed index as for the sources) and copied into the
#                  sysroot (src/llhttp/, include/llhttp/; cmake/mingw-w64.cmake points
#                  the build at them). Its version is part of the key: the newest the
#                  bookworm lists name (they are fetched once, and again by --align).
#                  So the Windows build parses HTTP/1 with llhttp 8.1 where the Linux
#                  build of Debian 13 links 9.2. Catch2 is v3 there, a library: built
#                  from the source of the installed libcatch2-dev (source catch2).
#
# Sources come from a deb-src twin of each `deb` entry of this machine's Debian
# archive (the suites of its codename, security included: deb822
# /etc/apt/sources.list.d/*.sources and one-line sources.list / *.list), kept in an
# apt configuration of this script's own under the cache: the machine's apt setup is
# not touched and no root is needed. apt checks every file against the signed index.
#
# A mirror that lists a source in its index but does not serve its files (this
# machine's, for Debian 13's nghttp2 1.64.0-1.1+deb13u2 and prometheus-cpp 1.0.2-2:
# 404) stops the build with the list of those sources (exit 3). Two variables then
# choose other sources, by hand and in the open (both are part of the key, and the
# log and MANIFEST name every source built):
#   H2GATE_WIN_SOURCE_VERSIONS="SRC=VERSION ..."  builds SRC at VERSION instead of
#                  the installed library's version;
#   H2GATE_WIN_SOURCE_SUITE=SUITE  adds the deb-src entries of SUITE (e.g. bookworm)
#                  on the same mirror, where such a VERSION may be.
# The Windows libraries then differ from the Linux build's in version; the
# Windows build and its tests say whether h2gate works with them.
#
# Cache: $H2GATE_WIN_CACHE, else /var/cache/h2gate-win where writable, else
# ${XDG_CACHE_HOME:-~/.cache}/h2gate-win. A sysroot is <cache>/sysroot-<key>, the key
# a hash of the source versions, the mingw-w64 package versions and this script, so a
# change of any of them builds a new one; a cached one is found in well under a second.
# Builds go to a temporary directory renamed into place when complete, under an
# exclusive lock (flock <cache>/lock): concurrent runs wait for each other, and a
# killed run leaves nothing that looks complete. Old sysroots are not removed
# (each is ~60 MB): `rm -rf <cache>/sysroot-*` is always safe between builds.
#
# Environment: H2GATE_WIN_CACHE (cache directory), H2GATE_WIN_JOBS (parallel jobs,
# default nproc), H2GATE_DEBIAN_RELEASE (bookworm or trixie: the release to act as,
# default VERSION_CODENAME of /etc/os-release).
# Exit status: 0 ok; 1 build or download failed; 2 (--print-sysroot) not built yet;
# 3 a tool or a Linux package is missing, the mirror does not serve a source, or the
# Debian release is not one the Windows build is made on.
set -euo pipefail

SCRIPT=$(readlink -f "${BASH_SOURCE[0]}")
TRIPLE=x86_64-w64-mingw32
# shellcheck disable=SC1091 # the machine's
RELEASE=${H2GATE_DEBIAN_RELEASE:-$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")}
# The Linux build's development packages (deploy/install-deps.sh): the sources built
# here are theirs, at their installed version. Built in this order: OpenSSL, which
# takes most of the time, last, so that a failure elsewhere shows in seconds.
LINUX_PKGS=(libnghttp2-dev libyaml-cpp-dev prometheus-cpp-dev libssl-dev)
# Debian 13: llhttp's C sources from this binary package of Debian 12 (see the top).
LLHTTP_PKG=""
LLHTTP_SUITE=""
if [[ $RELEASE == trixie ]]; then
  LINUX_PKGS=(libcatch2-dev "${LINUX_PKGS[@]}")
  LLHTTP_PKG=node-llhttp
  LLHTTP_SUITE=bookworm
fi
# The cross toolchain; their versions are part of the cache key.
TOOL_PKGS=(gcc-mingw-w64-x86-64-posix g++-mingw-w64-x86-64-posix mingw-w64-x86-64-dev
  binutils-mingw-w64-x86-64)
JOBS=${H2GATE_WIN_JOBS:-$(nproc)}

log() { printf 'build-deps: %s\n' "$*" >&2; }
die() { # MESSAGE [EXIT_STATUS]
  log "error: $1"
  exit "${2:-1}"
}

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//p}' "$SCRIPT"; }

# What the Windows build takes from each Debian release besides LINUX_PKGS' sources.
release_check() {
  case $RELEASE in
    bookworm | trixie) ;; # the differences: LINUX_PKGS, LLHTTP_PKG
    *) die "made for Debian 12 (bookworm) and 13 (trixie); this is '${RELEASE:-unknown}' (VERSION_CODENAME of /etc/os-release; H2GATE_DEBIAN_RELEASE chooses on a derivative)" 3 ;;
  esac
}

mode=build
case ${1:-} in
  "") ;;
  --print-sysroot) mode=print ;;
  --align) mode=align ;;
  -h | --help)
    usage
    exit 0
    ;;
  *) die "unknown argument '$1' (try --help)" 3 ;;
esac
(($# <= 1)) || die "one argument at most (try --help)" 3

# ------------------------------------------------------------------ cache ----

cache_dir() {
  if [[ -n ${H2GATE_WIN_CACHE:-} ]]; then
    printf '%s\n' "$H2GATE_WIN_CACHE"
  elif [[ -w /var/cache/h2gate-win ]] || { [[ ! -e /var/cache/h2gate-win && -w /var/cache ]]; }; then
    printf '%s\n' /var/cache/h2gate-win
  else
    printf '%s\n' "${XDG_CACHE_HOME:-$HOME/.cache}/h2gate-win"
  fi
}
CACHE=$(cache_dir)

installed_version() { # PKG -> "source-name source-version", empty when not installed
  dpkg-query -W -f='${db:Status-Status} ${source:Package} ${source:Version}\n' "$1" 2>/dev/null |
    sed -n 's/^installed //p'
}

# SRC_NAME[i] / SRC_VERSION[i]: the source of LINUX_PKGS[i] as installed.
resolve_sources() {
  SRC_NAME=()
  SRC_VERSION=()
  local pkg sv missing=()
  for pkg in "${LINUX_PKGS[@]}"; do
    sv=$(installed_version "$pkg")
    if [[ -z $sv ]]; then
      missing+=("$pkg")
      continue
    fi
    SRC_NAME+=("${sv%% *}")
    SRC_VERSION+=("${sv#* }")
  done
  ((${#missing[@]} == 0)) ||
    die "the Linux build's packages are not installed: ${missing[*]} (deploy/install-deps.sh installs them)" 3
  # Versions chosen by hand (see the top).
  local pin name ver i found
  for pin in ${H2GATE_WIN_SOURCE_VERSIONS:-}; do
    name=${pin%%=*} ver=${pin#*=}
    [[ $pin == *=* && -n $name && -n $ver ]] ||
      die "H2GATE_WIN_SOURCE_VERSIONS: '$pin' is not SOURCE=VERSION" 3
    found=0
    for i in "${!SRC_NAME[@]}"; do
      [[ ${SRC_NAME[$i]} == "$name" ]] || continue
      [[ $mode == print ]] ||
        log "$name: building $ver (H2GATE_WIN_SOURCE_VERSIONS), not the installed ${SRC_VERSION[$i]} of ${LINUX_PKGS[$i]}"
      SRC_VERSION[$i]=$ver
      found=1
    done
    ((found)) || die "H2GATE_WIN_SOURCE_VERSIONS: '$name' is none of the sources built here (${SRC_NAME[*]})" 3
  done
}

check_tools() {
  local missing=() p t
  for p in "${TOOL_PKGS[@]}"; do
    [[ -n $(installed_version "$p") ]] || missing+=("package $p")
  done
  for t in "$TRIPLE-gcc-posix" "$TRIPLE-g++-posix" "$TRIPLE-ar" "$TRIPLE-objdump" cmake make perl \
    pkg-config apt-get dpkg-source flock sha256sum; do
    command -v "$t" >/dev/null 2>&1 || missing+=("command $t")
  done
  [[ -f /usr/include/asio.hpp && -d /usr/include/asio ]] || missing+=("Asio's headers (package libasio-dev)")
  ((${#missing[@]} == 0)) ||
    die "missing: ${missing[*]} (deploy/install-deps.sh --test installs them)" 3
}

key_inputs() {
  local p i
  printf 'script %s\n' "$(sha256sum <"$SCRIPT" | cut -d' ' -f1)"
  for p in "${TOOL_PKGS[@]}"; do
    printf 'tool %s %s\n' "$p" "$(installed_version "$p" | cut -d' ' -f2)"
  done
  for i in "${!SRC_NAME[@]}"; do
    printf 'source %s %s\n' "${SRC_NAME[$i]}" "${SRC_VERSION[$i]}"
  done
  [[ -z $LLHTTP_PKG ]] || printf 'package %s %s (%s)\n' "$LLHTTP_PKG" "$(llhttp_version)" "$LLHTTP_SUITE"
  [[ -z ${H2GATE_WIN_SOURCE_SUITE:-} ]] || printf 'source suite %s\n' "$H2GATE_WIN_SOURCE_SUITE"
}

sysroot_path() { printf '%s/sysroot-%s\n' "$CACHE" "$(key_inputs | sha256sum | cut -c1-16)"; }

# A sysroot is complete once it has been renamed into place with its MANIFEST.
is_complete() { [[ -f $1/MANIFEST ]]; }

take_lock() {
  mkdir -p "$CACHE"
  exec 9>>"$CACHE/lock"
  if ! flock -n 9; then
    log "another build-deps run holds $CACHE/lock: waiting for it"
    flock 9
  fi
}

# ------------------------------------------------------ sources via apt ----

APT_DIR=$CACHE/apt
# Debian 13: Debian 12's binary packages (LLHTTP_PKG), an apt configuration of its own.
APT_OLD_DIR=$CACHE/apt-$LLHTTP_SUITE
# apt_in DIR apt-get|apt-cache ARGS...: apt with the configuration in DIR.
apt_in() {
  local dir=$1 tool=$2
  shift 2
  local opts=(-q -o "Dir::Etc::SourceList=$dir/sources.list"
    -o "Dir::Etc::SourceParts=$dir/sources.list.d" -o "Dir::State::Lists=$dir/lists"
    -o "Dir::Cache=$dir/cache" -o "Dir::Etc::Preferences=$dir/preferences"
    -o "Dir::Etc::PreferencesParts=$dir/preferences.d")
  # As root apt drops to the _apt user for downloads, which cannot write here.
  [[ $tool != apt-get || $(id -u) -ne 0 ]] || opts+=(-o APT::Sandbox::User=root)
  "$tool" "${opts[@]}" "$@"
}
apt_src() { apt_in "$APT_DIR" apt-get "$@"; }
apt_src_cache() { apt_in "$APT_DIR" apt-cache "$@"; }

# write_sources DIR TYPE [SUITE]: an apt configuration in DIR with, for each `deb`
# entry of the machine's Debian archive for its codename's suites, an entry of TYPE
# (deb-src: the source twins of them all); with SUITE, only the entries of the
# codename's main suite (not -updates, -security), for SUITE instead.
write_sources() {
  local dir=$1 type=$2 to=${3:-} codename f out
  # shellcheck disable=SC1091 # the machine's, not ours
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [[ -n $codename ]] || die "no VERSION_CODENAME in /etc/os-release: cannot tell the Debian suites" 3
  rm -rf "$dir/sources.list.d"
  mkdir -p "$dir/sources.list.d" "$dir/lists/partial" "$dir/cache" "$dir/preferences.d"
  : >"$dir/sources.list"
  : >"$dir/preferences"
  out=$dir/sources.list.d/debian.sources
  : >"$out"
  # deb822: each stanza whose Types has `deb` and whose Suites has one of the
  # codename's suites, copied whole (Signed-By may be a multi-line key) with
  # Types: TYPE (and Suites: SUITE).
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    awk -v cn="$codename" -v type="$type" -v to="$to" '
      function flush() {
        if (n && deb && suite && enabled) { for (i = 1; i <= n; i++) print lines[i]; print "" }
        n = 0; deb = 0; suite = 0; enabled = 1
      }
      BEGIN { enabled = 1 }
      /^[[:space:]]*$/ { flush(); next }
      /^#/ { next }
      {
        line = $0
        if (tolower($1) == "types:") {
          for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1
          line = "Types: " type
        } else if (tolower($1) == "suites:") {
          for (i = 2; i <= NF; i++)
            if ($i == cn || (to == "" && (index($i, cn "-") == 1 || index($i, cn "/") == 1))) suite = 1
          if (to != "") line = "Suites: " to
        } else if (tolower($1) == "enabled:" && tolower($2) == "no") {
          enabled = 0
        }
        lines[++n] = line
      }
      END { flush() }' "$f" >>"$out"
  done
  # One-line format: "deb [options] URI SUITE COMPONENT..." -> TYPE [options] URI SUITE...
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f $f ]] || continue
    awk -v cn="$codename" -v type="$type" -v to="$to" '
      $1 == "deb" {
        s = 2
        if ($2 ~ /^\[/) { while (s <= NF && $s !~ /\]$/) s++; s++ }
        suite = $(s + 1)
        if (suite == cn || (to == "" && (index(suite, cn "-") == 1 || index(suite, cn "/") == 1))) {
          $1 = type
          if (to != "") $(s + 1) = to
          print
        }
      }' "$f" >>"$dir/sources.list"
  done
  if [[ ! -s $out && ! -s $dir/sources.list ]]; then
    die "no 'deb' entry for Debian $codename in /etc/apt/sources.list or /etc/apt/sources.list.d/: no mirror to take packages from${to:+ (for the suite $to)}" 3
  fi
}

apt_updated=0
apt_src_update() {
  ((apt_updated)) && return 0
  write_sources "$APT_DIR" deb-src
  if [[ -n ${H2GATE_WIN_SOURCE_SUITE:-} ]]; then
    # That suite's entries beside the machine's (see the top).
    write_sources "$APT_DIR-extra" deb-src "$H2GATE_WIN_SOURCE_SUITE"
    cp "$APT_DIR-extra/sources.list.d/debian.sources" "$APT_DIR/sources.list.d/extra.sources"
    cat "$APT_DIR-extra/sources.list" >>"$APT_DIR/sources.list"
  fi
  log "apt-get update of deb-src entries for: $(sed -n 's/^Suites: //p; s/^deb-src \(\[[^]]*\] \)\{0,1\}[^ ]* \([^ ]*\).*/\2/p' \
    "$APT_DIR/sources.list.d/debian.sources" "$APT_DIR/sources.list" | tr '\n' ' ')(in $APT_DIR)"
  local out
  if ! out=$(apt_src update --error-on=any 2>&1); then
    printf '%s\n' "$out" >&2
    die "apt-get update of the deb-src entries failed (entries in $APT_DIR/sources.list.d/ and sources.list)"
  fi
  apt_updated=1
}

# Versions of source SRC the mirror lists, newest first.
served_versions() {
  apt_src_cache showsrc "$1" 2>/dev/null | sed -n 's/^Version: //p' | sort -u |
    sort -r -t' ' -k1,1 --version-sort 2>/dev/null || true
}

# Downloads source SRC at VER into <cache>/sources/SRC_VER (apt checks every file
# against the signed index). Returns 1, with apt's messages in $FETCH_ERROR, when
# the mirror does not serve it.
FETCH_ERROR=""
fetch_source() {
  local src=$1 ver=$2 dir tmp
  dir=$CACHE/sources/${src}_$ver
  [[ -f $dir/.complete ]] && return 0
  apt_src_update
  mkdir -p "$CACHE/sources"
  tmp=$(mktemp -d "$CACHE/sources/.tmp.XXXXXX")
  if ! FETCH_ERROR=$(cd "$tmp" && apt_src source --download-only "$src=$ver" 2>&1); then
    rm -rf "$tmp"
    return 1
  fi
  ls "$tmp"/*.dsc >/dev/null 2>&1 || {
    rm -rf "$tmp"
    FETCH_ERROR="no .dsc downloaded"
    return 1
  }
  touch "$tmp/.complete"
  rm -rf "$dir"
  mv -T "$tmp" "$dir"
}

# Drops downloaded sources of other versions of SRC (the machine has one installed).
prune_sources() {
  local src=$1 keep=$2 d
  for d in "$CACHE/sources/${src}_"*; do
    [[ -d $d && $d != "$CACHE/sources/${src}_$keep" ]] && rm -rf "$d"
  done
  return 0
}

# ------------------------------------------ llhttp from Debian 12 (13) ----

# The lists of Debian 12's main suite on the machine's mirror, in APT_OLD_DIR.
llhttp_lists_update() {
  write_sources "$APT_OLD_DIR" deb "$LLHTTP_SUITE"
  log "apt-get update of Debian's $LLHTTP_SUITE suite, for $LLHTTP_PKG (in $APT_OLD_DIR)"
  local out
  if ! out=$(apt_in "$APT_OLD_DIR" apt-get update --error-on=any 2>&1); then
    printf '%s\n' "$out" >&2
    die "apt-get update of Debian's $LLHTTP_SUITE suite failed (entries in $APT_OLD_DIR/)"
  fi
}

# LLHTTP_VERSION: the version of LLHTTP_PKG built, the newest in the lists; they are
# fetched first if there are none (but not for --print-sysroot: the version is then
# empty, and no sysroot is found), and again by --align.
LLHTTP_VERSION=""
resolve_llhttp() {
  [[ -n $LLHTTP_PKG ]] || return 0
  if ! compgen -G "$APT_OLD_DIR/lists/*_Packages*" >/dev/null; then
    [[ $mode == print ]] && return 0
    llhttp_lists_update
  fi
  LLHTTP_VERSION=$(apt_in "$APT_OLD_DIR" apt-cache policy "$LLHTTP_PKG" 2>/dev/null |
    sed -n 's/^ *Candidate: //p' | grep -v '^(none)$' || true)
  [[ -n $LLHTTP_VERSION || $mode == print ]] ||
    die "Debian's $LLHTTP_SUITE suite on this mirror has no $LLHTTP_PKG (lists in $APT_OLD_DIR/lists)" 3
}
llhttp_version() { printf '%s\n' "$LLHTTP_VERSION"; }

# Downloads LLHTTP_PKG at its version into <cache>/sources/ (apt checks it against
# the signed index).
fetch_llhttp() {
  local ver dir tmp
  ver=$(llhttp_version)
  dir=$CACHE/sources/${LLHTTP_PKG}_$ver
  [[ -f $dir/.complete ]] && return 0
  mkdir -p "$CACHE/sources"
  tmp=$(mktemp -d "$CACHE/sources/.tmp.XXXXXX")
  if ! FETCH_ERROR=$(cd "$tmp" && apt_in "$APT_OLD_DIR" apt-get download "$LLHTTP_PKG=$ver" 2>&1); then
    rm -rf "$tmp"
    printf '%s\n' "$FETCH_ERROR" >&2
    die "could not download $LLHTTP_PKG $ver from Debian's $LLHTTP_SUITE suite" 3
  fi
  touch "$tmp/.complete"
  rm -rf "$dir"
  mv -T "$tmp" "$dir"
  prune_sources "$LLHTTP_PKG" "$ver"
}

# llhttp's generated C sources and header from the package into the sysroot.
stage_llhttp() {
  local ver deb out=$WORK/llhttp f
  ver=$(llhttp_version)
  deb=$(ls "$CACHE/sources/${LLHTTP_PKG}_$ver"/*.deb)
  run_logged llhttp dpkg-deb -x "$deb" "$out"
  mkdir -p "$STAGE/src/llhttp" "$STAGE/include/llhttp"
  for f in llhttp.c api.c http.c; do
    [[ -f $out/usr/share/llhttp/$f ]] || die "$deb has no usr/share/llhttp/$f"
    cp "$out/usr/share/llhttp/$f" "$STAGE/src/llhttp/"
  done
  cp "$out/usr/share/include/llhttp/llhttp.h" "$STAGE/include/llhttp/" ||
    die "$deb has no usr/share/include/llhttp/llhttp.h"
  cp "$out/usr/share/doc/$LLHTTP_PKG/copyright" "$STAGE/src/llhttp/" ||
    die "$deb has no usr/share/doc/$LLHTTP_PKG/copyright"
}

# ------------------------------------------------------------- --align ----

# Source version of binary package PKG at binary version BV (differs for binNMUs).
source_version_of() {
  local s
  s=$(apt-cache show "$1=$2" 2>/dev/null | sed -n 's/^Source: [^ ]* (\(.*\))$/\1/p' | head -n1)
  printf '%s\n' "${s:-$2}"
}

align() {
  [[ $(id -u) -eq 0 ]] || die "--align installs packages: run it as root" 3
  take_lock
  local i pkg src ver bv sv chosen cand binaries b attempt
  for i in "${!LINUX_PKGS[@]}"; do
    pkg=${LINUX_PKGS[$i]} src=${SRC_NAME[$i]} ver=${SRC_VERSION[$i]}
    if fetch_source "$src" "$ver"; then
      log "$pkg: the source of the installed version ($src $ver) is served"
      continue
    fi
    log "$pkg: the mirror does not serve $src $ver (installed): $(tail -n1 <<<"$FETCH_ERROR")"
    chosen=""
    for attempt in 1 2; do
      # Binary versions newer than the installed one, newest first.
      mapfile -t cand < <(apt-cache madison "$pkg" | awk -F'|' '{gsub(/ /, "", $2); print $2}' |
        sort -u | while read -r bv; do
        [[ -n $bv ]] && dpkg --compare-versions "$bv" gt "$(dpkg-query -W -f='${Version}' "$pkg")" &&
          echo "$bv"
      done | sort -r --version-sort)
      for bv in "${cand[@]}"; do
        sv=$(source_version_of "$pkg" "$bv")
        if fetch_source "$src" "$sv"; then
          chosen=$bv
          break
        fi
        log "$pkg: $src $sv (for $pkg $bv) not served either"
      done
      [[ -z $chosen && $attempt == 1 ]] || break
      log "$pkg: none of the versions apt knows will do: apt-get update, then again"
      apt-get -q -o DPkg::Lock::Timeout=900 update >&2 || die "apt-get update failed"
    done
    [[ -n $chosen ]] ||
      die "$pkg: no version newer than the installed one whose source ($src) the mirror serves; served: $(served_versions "$src" | tr '\n' ' ')" 3
    # Every installed binary package of that source that exists at that version.
    binaries=()
    while read -r b; do
      apt-cache madison "$b" | awk -F'|' '{gsub(/ /, "", $2); print $2}' | grep -qxF "$chosen" &&
        binaries+=("$b=$chosen")
    done < <(dpkg-query -W -f='${db:Status-Status} ${source:Package} ${Package}\n' |
      awk -v s="$src" '$1 == "installed" && $2 == s { print $3 }')
    log "$pkg: installing ${binaries[*]} (its source is served; the Linux and Windows builds use the same one)"
    DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=900 install -y \
      --no-install-recommends "${binaries[@]}" >&2 ||
      die "apt-get install ${binaries[*]} failed"
  done
  resolve_sources
  log "aligned: $(for i in "${!SRC_NAME[@]}"; do printf '%s %s; ' "${SRC_NAME[$i]}" "${SRC_VERSION[$i]}"; done)"
  if [[ -n $LLHTTP_PKG ]]; then
    llhttp_lists_update
    resolve_llhttp
    log "llhttp: $LLHTTP_PKG $LLHTTP_VERSION from Debian's $LLHTTP_SUITE suite"
  fi
}

# ---------------------------------------------------------------- build ----

# Debian's Configure options (debian/rules CONFARGS), minus its paths and the
# unit tests; build_openssl says why these paths.
OPENSSL_CONFIGURE=(mingw64 --cross-compile-prefix="$TRIPLE-" CC=gcc-posix
  --prefix="C:/Program Files/OpenSSL" --openssldir="C:/Program Files/Common Files/SSL" --libdir=lib
  no-shared no-tests no-idea no-mdc2 no-rc5 no-zlib no-ssl3 no-ssl3-method enable-rfc3779
  enable-cms no-capieng no-rdrand enable-ec_nistp_64_gcc_128)

# The toolchain the dependencies' CMake builds use: mingw-w64 with posix threads,
# headers and libraries from the mingw runtime and the sysroot being built only.
write_toolchain() { # FILE STAGE
  cat >"$1" <<EOF
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_C_COMPILER $TRIPLE-gcc-posix)
set(CMAKE_CXX_COMPILER $TRIPLE-g++-posix)
set(CMAKE_RC_COMPILER $TRIPLE-windres)
set(CMAKE_FIND_ROOT_PATH /usr/$TRIPLE "$2")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
EOF
}

# run_logged NAME CMD...: output to the library's log; on failure its tail and path.
run_logged() {
  local name=$1
  shift
  if ! "$@" >>"$LOGS/$name.log" 2>&1; then
    tail -n 40 "$LOGS/$name.log" >&2
    die "$name: '$*' failed (whole log: $LOGS/$name.log)"
  fi
}

# extract SRC VER -> prints the unpacked tree (Debian's patches applied).
extract() {
  local src=$1 ver=$2 out=$WORK/src/$1
  run_logged "$src" dpkg-source --no-copy -x "$(ls "$CACHE/sources/${src}_$ver"/*.dsc)" "$out"
  printf '%s\n' "$out"
}

cmake_lib() { # NAME SRCDIR CMAKE_ARGS...
  local name=$1 src=$2 gen=()
  shift 2
  command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
  run_logged "$name" cmake -S "$src" -B "$WORK/build/$name" "${gen[@]}" \
    -DCMAKE_TOOLCHAIN_FILE="$WORK/toolchain.cmake" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$STAGE" -DCMAKE_INSTALL_LIBDIR=lib -DBUILD_SHARED_LIBS=OFF "$@"
  run_logged "$name" cmake --build "$WORK/build/$name" -j "$JOBS"
  run_logged "$name" cmake --install "$WORK/build/$name"
}

build_openssl() {
  local src dest top
  src=$(extract openssl "$1")
  # OPENSSL_CONFIGURE above. OPENSSLDIR (openssl.cnf), ENGINESDIR and MODULESDIR
  # are compiled in: OpenSSL's Windows defaults under Program Files, which only administrators
  # can write (mingw builds with /usr/local-style paths let any user plant an
  # openssl.cnf: CVE-2019-1552). DESTDIR (ending in / as INSTALLTOP starts with C:)
  # puts the installed files under a directory of ours.
  top="C:/Program Files/OpenSSL"
  (cd "$src" && run_logged openssl ./Configure "${OPENSSL_CONFIGURE[@]}")
  run_logged openssl make -C "$src" -j "$JOBS" build_libs
  dest=$WORK/dest/openssl
  run_logged openssl make -C "$src" install_dev DESTDIR="$dest/"
  mkdir -p "$STAGE/include" "$STAGE/lib/pkgconfig"
  cp -a "$dest/$top/include/openssl" "$STAGE/include/"
  cp -a "$dest/$top/lib/libssl.a" "$dest/$top/lib/libcrypto.a" "$STAGE/lib/"
  cp -a "$dest/$top/lib/pkgconfig/." "$STAGE/lib/pkgconfig/"
}

build_nghttp2() {
  local src
  src=$(extract nghttp2 "$1")
  # HAVE_CLOCK_GETTIME=OFF: mingw-w64 has both clock_gettime (winpthreads) and
  # GetTickCount64, and 1.52's lib/nghttp2_time.c then calls time_now_sec(), which
  # it defines only without GetTickCount64 (undefined at link time). Without
  # clock_gettime it takes GetTickCount64, Windows' own monotonic clock.
  # The static library: ENABLE_STATIC_LIB up to 1.5x (Debian 12), BUILD_STATIC_LIBS
  # from 1.60 on (Debian 13's 1.64, which then builds its tests unless BUILD_TESTING
  # is off); each version ignores the other's options.
  cmake_lib nghttp2 "$src" -DENABLE_LIB_ONLY=ON -DENABLE_SHARED_LIB=OFF -DENABLE_STATIC_LIB=ON \
    -DBUILD_STATIC_LIBS=ON -DBUILD_TESTING=OFF \
    -DENABLE_DOC=OFF -DENABLE_FAILMALLOC=OFF -DENABLE_HTTP3=OFF -DWITH_LIBXML2=OFF -DWITH_JEMALLOC=OFF \
    -DHAVE_CLOCK_GETTIME=OFF
  # A static-only install: its users must not declare the API dllimport
  # (nghttp2/nghttp2.h's NGHTTP2_EXTERN), which the .pc does not say.
  sed -i -E 's/^(Cflags:.*)$/\1 -DNGHTTP2_STATICLIB/' "$STAGE/lib/pkgconfig/libnghttp2.pc"
}

build_yaml_cpp() {
  local src
  src=$(extract yaml-cpp "$1")
  cmake_lib yaml-cpp "$src" -DYAML_BUILD_SHARED_LIBS=OFF -DYAML_CPP_BUILD_TESTS=OFF \
    -DYAML_CPP_BUILD_TOOLS=OFF -DYAML_CPP_INSTALL=ON
  # yaml-cpp 0.8 (Debian 13) declares its API dllimport on mingw unless
  # YAML_CPP_STATIC_DEFINE is set, which its CMake config passes on but its .pc
  # does not: the installed header is made static-only, as prometheus-cpp's below
  # (0.7's has no such block and declares nothing dllimport for a static build).
  local hdr=$STAGE/include/yaml-cpp/dll.h
  if grep -q '^#ifdef YAML_CPP_STATIC_DEFINE$' "$hdr"; then
    sed -i 's|^#ifdef YAML_CPP_STATIC_DEFINE$|#if 1 /* static library only (deploy/windows/build-deps.sh) */|' "$hdr"
  fi
}

build_prometheus_cpp() {
  local src hdr
  src=$(extract prometheus-cpp "$1")
  # prometheus-cpp's generated export header declares the API dllimport on
  # Windows unless PROMETHEUS_CPP_CORE_STATIC_DEFINE is set, which its CMake
  # config does not pass on: defined for the build, and the installed header
  # made static-only below.
  cmake_lib prometheus-cpp "$src" -DENABLE_PULL=OFF -DENABLE_PUSH=OFF -DENABLE_COMPRESSION=OFF \
    -DENABLE_TESTING=OFF -DUSE_THIRDPARTY_LIBRARIES=OFF -DGENERATE_PKGCONFIG=OFF \
    -DCMAKE_CXX_FLAGS=-DPROMETHEUS_CPP_CORE_STATIC_DEFINE
  hdr=$STAGE/include/prometheus/detail/core_export.h
  grep -q '^#ifdef PROMETHEUS_CPP_CORE_STATIC_DEFINE$' "$hdr" ||
    die "prometheus-cpp: $hdr has no PROMETHEUS_CPP_CORE_STATIC_DEFINE block to make static"
  sed -i 's|^#ifdef PROMETHEUS_CPP_CORE_STATIC_DEFINE$|#if 1 /* static library only (deploy/windows/build-deps.sh) */|' "$hdr"
}

# Catch2 v3 (Debian 13), for the Windows tests: the library and its CMake package,
# built with the tests' C++ standard (v3 compiles some of its API only from C++17 on:
# the library and its users must agree).
build_catch2() {
  local src
  src=$(extract catch2 "$1")
  cmake_lib catch2 "$src" -DCMAKE_CXX_STANDARD=20 -DCATCH_INSTALL_DOCS=OFF -DCATCH_INSTALL_EXTRAS=OFF
}

# Makes the sysroot relocatable and checks it before it is renamed into place.
finish_sysroot() {
  local pc f bad
  # .pc files: prefix relative to the file (pkg-config's ${pcfiledir}). OpenSSL 3.5's
  # util/mkinstallvars.pl takes INSTALLTOP "C:/Program Files/OpenSSL" for a relative
  # path on this Unix build host and puts the build directory before it in its
  # prefix= line (3.0 writes it as given): the whole line is replaced.
  for pc in "$STAGE"/lib/pkgconfig/*.pc; do
    # shellcheck disable=SC2016 # ${pcfiledir} is pkg-config's, written as is
    sed -i -e "s|$STAGE|\${pcfiledir}/../..|g" \
      -e 's|^prefix=.*C:/Program Files/OpenSSL$|prefix=${pcfiledir}/../..|' \
      -e 's|C:/Program Files/OpenSSL|${pcfiledir}/../..|g' "$pc"
  done
  # Libraries only: nghttp2 installs its README and an OCSP helper script there.
  rm -rf "$STAGE/share"
  # Asio: links to Debian's headers (see the top of this file).
  ln -s /usr/include/asio.hpp "$STAGE/include/asio.hpp"
  ln -s /usr/include/asio "$STAGE/include/asio"

  local expect=(include/openssl/ssl.h include/openssl/opensslv.h lib/libssl.a lib/libcrypto.a
    lib/pkgconfig/openssl.pc include/nghttp2/nghttp2.h lib/libnghttp2.a lib/pkgconfig/libnghttp2.pc
    include/yaml-cpp/yaml.h lib/libyaml-cpp.a lib/cmake/yaml-cpp/yaml-cpp-config.cmake
    include/prometheus/registry.h lib/libprometheus-cpp-core.a
    lib/cmake/prometheus-cpp/prometheus-cpp-config.cmake)
  [[ $RELEASE != trixie ]] || expect+=(include/catch2/catch_all.hpp lib/libCatch2.a
    lib/cmake/Catch2/Catch2Config.cmake src/llhttp/llhttp.c src/llhttp/api.c src/llhttp/http.c
    include/llhttp/llhttp.h)
  for f in "${expect[@]}"; do
    [[ -e $STAGE/$f ]] || die "the sysroot lacks $f after the build"
  done
  local formats
  for f in "$STAGE"/lib/*.a; do
    formats=$("$TRIPLE-objdump" -f "$f" 2>/dev/null | sed -n 's/.*file format //p' | sort -u)
    [[ $formats == pe-x86-64 ]] || die "$f: object formats '${formats//$'\n'/ }', not pe-x86-64 only"
  done
  # A program using each library links statically with the flags of the .pc
  # files (a library calling something undefined fails here, not in h2gate's build).
  cat >"$WORK/link_check.cc" <<'EOF'
#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <prometheus/registry.h>
#include <yaml-cpp/yaml.h>
int main() {
  nghttp2_session_callbacks* cbs = nullptr;
  nghttp2_session* session = nullptr;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_client_new(&session, cbs, nullptr);
  nghttp2_session_del(session);
  nghttp2_session_callbacks_del(cbs);
  SSL_CTX_free(SSL_CTX_new(TLS_client_method()));
  prometheus::Registry registry;
  return YAML::Load("a: 1")["a"].as<int>() == 1 && registry.Collect().empty() ? 0 : 1;
}
EOF
  local flags
  flags=$(PKG_CONFIG_LIBDIR=$STAGE/lib/pkgconfig PKG_CONFIG_PATH="" pkg-config --static --cflags --libs \
    libnghttp2 openssl yaml-cpp) || die "pkg-config cannot read the sysroot's .pc files"
  # shellcheck disable=SC2086 # pkg-config's flags are words
  run_logged link-check "$TRIPLE-g++-posix" -std=c++17 -static -o "$WORK/link_check.exe" \
    "$WORK/link_check.cc" $flags -lprometheus-cpp-core
  # Nothing may point into the staging directory, which is renamed, or into the
  # build directory, which is removed.
  bad=$(grep -rlIF -e "$STAGE" -e "$WORK" "$STAGE" 2>/dev/null || true)
  [[ -z $bad ]] || die "these files name the staging or the build directory (not relocatable): $bad"
}

write_manifest() { # SECONDS
  {
    echo "# h2gate's Windows dependencies (deploy/windows/build-deps.sh)"
    echo "# built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $1 s on $(uname -n)"
    key_inputs
    echo "openssl Configure ${OPENSSL_CONFIGURE[*]}"
  } >"$STAGE/MANIFEST"
}

build() {
  local final t0 t i
  final=$(sysroot_path)
  if is_complete "$final"; then
    printf '%s\n' "$final"
    return 0
  fi
  take_lock
  if is_complete "$final"; then # built by the run we waited for
    printf '%s\n' "$final"
    return 0
  fi
  # We hold the lock: temporaries are from runs that were killed.
  if compgen -G "$CACHE/*.tmp.*" >/dev/null || compgen -G "$CACHE/sources/.tmp.*" >/dev/null; then
    log "removing what an interrupted run left in $CACHE"
    rm -rf "$CACHE"/build.tmp.* "$CACHE"/sysroot-*.tmp.* "$CACHE"/sources/.tmp.*
  fi
  t0=$SECONDS
  log "building the Windows sysroot $final"
  log "sources: $(for i in "${!SRC_NAME[@]}"; do printf '%s %s  ' "${SRC_NAME[$i]}" "${SRC_VERSION[$i]}"; done)"
  # Every source is tried, so that one run names all those the mirror lacks.
  local unserved=()
  for i in "${!SRC_NAME[@]}"; do
    if ! fetch_source "${SRC_NAME[$i]}" "${SRC_VERSION[$i]}"; then
      printf '%s\n' "$FETCH_ERROR" | grep -E '^(E|Err):' >&2 || true
      log "the mirror does not serve ${SRC_NAME[$i]} ${SRC_VERSION[$i]}, the version of the installed ${LINUX_PKGS[$i]}; the index names: $(served_versions "${SRC_NAME[$i]}" | tr '\n' ' ')"
      unserved+=("${SRC_NAME[$i]} ${SRC_VERSION[$i]} (${LINUX_PKGS[$i]})")
      continue
    fi
    prune_sources "${SRC_NAME[$i]}" "${SRC_VERSION[$i]}"
  done
  [[ -z $LLHTTP_PKG ]] || fetch_llhttp
  if ((${#unserved[@]})); then
    local list
    list=$(printf '%s, ' "${unserved[@]}")
    die "the mirror does not serve the source of ${list%, }: as root, '$SCRIPT --align' (deploy/install-deps.sh --test runs it) upgrades such a package to the newest version whose source is served, if there is one; or H2GATE_WIN_SOURCE_VERSIONS (and H2GATE_WIN_SOURCE_SUITE) choose versions that are served (see $SCRIPT --help)" 3
  fi
  log "sources ready ($((SECONDS - t0)) s)"

  WORK=$(mktemp -d "$CACHE/build.tmp.XXXXXX")
  STAGE=$final.tmp.$$
  LOGS=$CACHE/logs/$(basename "$final")
  rm -rf "$LOGS" "$STAGE"
  mkdir -p "$LOGS" "$STAGE" "$WORK/src" "$WORK/build" "$WORK/dest"
  trap 'rm -rf "$WORK" "$STAGE"' EXIT
  write_toolchain "$WORK/toolchain.cmake" "$STAGE"

  local name fn
  for i in "${!SRC_NAME[@]}"; do
    name=${SRC_NAME[$i]}
    case $name in
      openssl) fn=build_openssl ;;
      nghttp2) fn=build_nghttp2 ;;
      yaml-cpp) fn=build_yaml_cpp ;;
      prometheus-cpp) fn=build_prometheus_cpp ;;
      catch2) fn=build_catch2 ;;
      *) die "no build recipe for source package $name" ;;
    esac
    t=$SECONDS
    log "$name ${SRC_VERSION[$i]}: building (log: $LOGS/$name.log)"
    "$fn" "${SRC_VERSION[$i]}"
    log "$name: done in $((SECONDS - t)) s"
  done
  if [[ -n $LLHTTP_PKG ]]; then
    log "llhttp: the C sources of $LLHTTP_PKG $(llhttp_version) ($LLHTTP_SUITE)"
    stage_llhttp
  fi
  finish_sysroot
  write_manifest $((SECONDS - t0))
  mv -T "$STAGE" "$final"
  rm -rf "$WORK"
  trap - EXIT
  log "sysroot complete in $((SECONDS - t0)) s: $final"
  printf '%s\n' "$final"
}

# ----------------------------------------------------------------- main ----

resolve_sources
resolve_llhttp
case $mode in
  print)
    final=$(sysroot_path)
    if is_complete "$final"; then
      printf '%s\n' "$final"
    else
      log "not built yet: $final (run $SCRIPT)"
      exit 2
    fi
    ;;
  align)
    release_check
    check_tools
    align
    ;;
  build)
    release_check
    check_tools
    build
    ;;
esac
