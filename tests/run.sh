#!/usr/bin/env bash
# h2gate's whole test suite: installs what it needs, then runs the stages
#
#   format   clang-format --dry-run --Werror on gateway/ filters/ config/ tests/, and
#            tests/check_layers.py: no #include from a lower layer to a higher one,
#            no folders that include each other (the table in that script;
#            gateway/README.md, Layers), with its self-test proving it reports both
#   release  Release build (gcc, -Werror) in build/, then ctest -j (unit, the
#            integration tests, one entry per tests/integration/*_test.cc,
#            the systemd and Windows proxy settings of tests/clients/README.md: clients_systemd,
#            clients_wininet; the SSPI backend under wine: clients_sspi; a test
#            that cannot run here is listed as skipped)
#   bench    the benchmark suite once in its quick mode (QUICK=1 tests/bench/run.sh,
#            about a minute) with build/h2gate: every workload runs and the table
#            has a figure in every row; the figures and their targets are not judged
#   asan     the sanitizer build (clang, ASan+UBSan, libFuzzer's coverage) in
#            build-asan/ of h2gate, the PAC probe, the unit tests and the fuzz
#            targets; then the unit tests, and the release build's integration and
#            client tests with h2gate and the probe from build-asan/
#   fuzz     each *_fuzz target of build-asan/ for H2GATE_FUZZ_SECONDS (default 30)
#            seconds from its seed corpus
#   windows  tests/windows/run.sh: the Windows builds of OpenSSL, nghttp2, yaml-cpp and
#            prometheus-cpp from Debian's sources (deploy/windows/build-deps.sh, cached
#            outside the tree), then the mingw-w64 cross build in build-windows/ of the
#            send-buffer tuner, network monitor, the SSPI backend and a program
#            using every library, run under wine against nginx and nghttpx; then
#            h2gate.exe under wine as workload (w) of tests/bench/run.sh's W1 down and
#            up, quick (~20 s), beside build/h2gate: its rows must have figures
#   container  podman build of deploy/Dockerfile, then the image runs and proxies a
#            request and drains on podman stop (tests/deploy/check_container.sh image);
#            then the Debian package from build/ is installed with apt-get in a pristine
#            bookworm container and run under systemd (tests/deploy/check_package.sh
#            install); each skipped, with the reason, where podman cannot run containers.
#            The image's podman build runs niced in the background from the start of
#            the run (check_container.sh build-image): the stage's own build finds its
#            layers cached
#   trixie   tests/deploy/check_debian.sh trixie: in a pristine Debian 13 container
#            (mmdebstrap root cached outside the tree), README command 1 until h2gate
#            serves a request, then the tests built there: the unit tests and an
#            integration subset (h2 upstream, [shapes], Negotiate with the KDC, a PAC
#            route); the Debian 13 package (lintian) installed and run under systemd in
#            another pristine Debian 13 container; skipped like container. Its
#            root and apt's downloads are made from the start of the run, niced, in
#            the background (check_debian.sh trixie --prepare): they overlap the
#            stages before it
#
# The builds of asan (and fuzz) and windows run niced in the background from the
# start, one after another (see start_prepare below), as do the container
# stage's image and the trixie stage's root: a stage then mostly runs tests.
# The summary ends with the wall time and the machine's CPU seconds.
#
# Every stage runs even if an earlier one failed, except after a failed build.
# The last line printed is "N passed, N failed" (stages); the exit status is 0
# only when every stage that ran passed.
#
# Environment:
#   H2GATE_SKIP=asan,fuzz     stages to skip (local quick runs; CI sets none)
#   H2GATE_FUZZ_SECONDS=30    time per fuzz target
#   H2GATE_NO_INSTALL=1       do not run deploy/install-deps.sh --test
#   CTEST_ARGS="-R unit"      extra ctest arguments (e.g. one test only)
#   H2GATE_CTEST_JOBS=4       tests ctest runs at once
set -euo pipefail

cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
ROOT=$PWD

STAGES=(format release bench asan fuzz windows container trixie)
SKIP=",${H2GATE_SKIP:-},"
FUZZ_SECONDS=${H2GATE_FUZZ_SECONDS:-30}
read -r -a CTEST_EXTRA <<<"${CTEST_ARGS:-}"
# A test without its own TIMEOUT property gets this many seconds.
CTEST_TIMEOUT=${H2GATE_CTEST_TIMEOUT:-600}
# Tests ctest runs side by side (ctest -j): the integration tests are one
# entry per source file (tests/CMakeLists.txt) and mostly wait on their
# peers, so more run at once than there are cores.
CTEST_JOBS=${H2GATE_CTEST_JOBS:-4}

# For tests that need curl 8 (--proxy-http2); installed by install-deps.sh --test.
export H2GATE_CURL8=${H2GATE_CURL8:-/opt/h2gate-test/curl8/curl}

declare -A RESULT NOTE SECONDS_TAKEN
suite_start=$(date +%s)
# The machine's CPU seconds so far (all processes: /proc/stat's user, nice,
# system, irq and softirq ticks): the summary's CPU figure, which says how
# much of the run's wall time the cores were busy, and is far steadier from
# run to run than the wall time on a shared machine.
machine_cpu() { awk -v hz="$(getconf CLK_TCK)" '/^cpu / {printf "%d\n", ($2 + $3 + $4 + $7 + $8) / hz}' /proc/stat; }
cpu_start=$(machine_cpu)

banner() { printf '\n===== %s =====\n' "$*"; }

# Runs "$@", prints how long it took; returns its status.
timed() {
  local t0=$SECONDS rc=0
  "$@" || rc=$?
  printf -- '--- %s: %ds (exit %d)\n' "$*" $((SECONDS - t0)) "$rc"
  return "$rc"
}

note() { NOTE[$1]="${NOTE[$1]:+${NOTE[$1]}; }$2"; }

# ---------------------------------------------------------------- stages ----
# Each returns 0 (pass), 1 (fail) or 2 (build failed: stop the suite).

stage_format() {
  local files=() bad=() f rc=0
  mapfile -t files < <(find gateway filters config tests \( -name build -prune \) -o \
    -type f \( -name '*.h' -o -name '*.cc' \) -print | sort)
  for f in "${files[@]}"; do
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  echo "checked ${#files[@]} files with $(clang-format --version)"
  if ((${#bad[@]})); then
    echo "not clang-formatted (fix: clang-format -i FILE...):"
    printf '  %s\n' "${bad[@]}"
    note format "${#bad[@]} file(s) not formatted: ${bad[*]}"
    rc=1
  fi
  if ! python3 tests/check_layers.py; then
    note format "an include goes up a layer or folders include each other (tests/check_layers.py, listed above)"
    rc=1
  fi
  if ! python3 tests/check_layers.py --self-test; then
    note format "tests/check_layers.py --self-test failed"
    rc=1
  fi
  return "$rc"
}

# build STAGE DIR TARGETS CMAKE_ARGS...: configure DIR and build TARGETS ("" for all).
build() {
  local stage=$1 dir=$2 targets=$3
  shift 3
  local target_args=()
  [[ -n $targets ]] && read -r -a target_args <<<"--target $targets"
  if ! timed cmake -S . -B "$dir" -G Ninja "$@" || ! timed cmake --build "$dir" "${target_args[@]}"; then
    note "$stage" "build failed"
    return 2
  fi
}

# run_ctest STAGE DIR LOG CTEST_ARGS...: ctest -j in DIR; notes what failed or was skipped.
run_ctest() {
  local stage=$1 dir=$2 log=$3 rc=0
  shift 3
  timed ctest --test-dir "$dir" --output-on-failure --timeout "$CTEST_TIMEOUT" -j "$CTEST_JOBS" \
    "$@" "${CTEST_EXTRA[@]}" 2>&1 | tee "$log" || rc=$?
  # ctest lists the tests that failed or were skipped as "  N - name (Why)".
  local failed skipped
  failed=$(sed -n '/(Skipped)$/d; s/^[[:space:]]*[0-9]\{1,\} - \([^ ]*\) .*/\1/p' "$log" | tr '\n' ' ')
  skipped=$(sed -n 's/^[[:space:]]*[0-9]\{1,\} - \([^ ]*\) (Skipped)$/\1/p' "$log" | tr '\n' ' ')
  if ((rc)); then
    note "$stage" "ctest failed: ${failed:-see log}"
    return 1
  fi
  note "$stage" "$(grep -Eo '[0-9]+% tests passed.*' "$log" | tail -n1)${skipped:+; skipped: ${skipped% }}"
}

stage_release() {
  build release build "" -DCMAKE_BUILD_TYPE=Release -DH2GATE_WERROR=ON -DH2GATE_UNITY=ON \
    -DH2GATE_TESTS=ON -DH2GATE_SANITIZE=OFF -DH2GATE_FUZZ=OFF || return
  # -LE container: the image test is a stage of its own (stage_container).
  run_ctest release build build/ctest.log -LE container
}

# The benchmark suite in its quick mode, so it cannot rot unseen: it must run to the
# end and print its table with a figure in every row ("-" means a workload gave
# none, "nan" a ratio without one). Its ✓/✗ are not judged: they depend on the
# machine and its load.
stage_bench() {
  local out=build/bench.out err=build/bench.err rc=0
  QUICK=1 H2GATE_BIN="$ROOT/build/h2gate" timed tests/bench/run.sh >"$out" 2>"$err" || rc=$?
  cat "$out"
  if ((rc)); then
    tail -n 40 "$err"
    note bench "tests/bench/run.sh exited $rc (log: $err)"
    return 1
  fi
  local sections=("W1 down" "W1 up" "W2 setup" "W3 abs" cold scale floor) missing=() s empty
  grep -q '^h2gate benchmark suite: ' "$out" || missing+=("the title")
  for s in "${sections[@]}"; do
    grep -q "^$s *| " "$out" || missing+=("$s")
  done
  # Rows: "section | figure | value | target | mark"; the header row excepted.
  empty=$(awk -F'|' 'NR > 1 && NF >= 3 && $1 !~ /^section/ {
      v = $3; gsub(/^ +| +$/, "", v); if (v == "-" || v == "" || v ~ /nan/) print $1 "|" $2 }' "$out")
  if ((${#missing[@]})) || [[ -n $empty ]]; then
    if [[ -n $empty ]]; then printf 'rows without a figure:\n%s\n' "$empty"; fi
    note bench "table incomplete:${missing[*]:+ no ${missing[*]};}${empty:+ $(wc -l <<<"$empty") row(s) without a figure}"
    return 1
  fi
  note bench "QUICK=1: $(grep -c '^[A-Za-z0-9 ]* *| ' "$out") table rows, every section"
}

# The rtt test (send-buffer tuning at 50 ms RTT, ~70 s) asserts a ratio of upload
# times, a property of the release build; the tuner's code runs under ASan in the
# integration tests.
#
# One build for the asan and fuzz stages (build_asan, in build-asan/): clang
# with ASan + UBSan and libFuzzer's coverage instrumentation
# (-fsanitize=fuzzer-no-link, CMakeLists.txt H2GATE_FUZZ), so h2gate_core,
# the biggest part of both, is compiled once; it was compiled twice (GCC's
# ASan build and clang's fuzz build), each about 100 files at sanitizer
# flags. The coverage callbacks cost the ASan run little: its integration
# tests mostly wait on their peers. -Werror holds for clang here as for GCC in
# the release stage.
#
# Only what runs under the sanitizers is built: h2gate, the PAC probe, the
# unit tests and the fuzz targets (h2gate_fuzzers). The tests that start
# h2gate (labels integration and clients) are the release stage's test
# programs pointed at these binaries (H2GATE_TEST_BINARY,
# H2GATE_TEST_PAC_PROBE: tests/support/h2gate.h): the test programs' own code
# gains nothing from ASan, and building them a second time was a third of this
# stage. The static checks (docs, monitoring, deploy) look at files, not at a
# sanitizer, and run in the release stage only.
#
# -O1 -gline-tables-only: AddressSanitizer's documentation advises -O1 for
# reasonable speed, and these line tables are all its stack traces need; they
# are OSS-Fuzz's default flags too. The build takes about half the CPU time of
# -O2 -g (h2_connection.cc: 10.7 s against 19.4 s with GCC's ASan).
build_asan() {
  # The compilers as cache variables, not CC/CXX (read only by a first configure):
  # a build-asan/ of GCC's earlier ASan build is then configured again for clang.
  build asan build-asan "h2gate pac_probe h2gate_unit_tests h2gate_fuzzers" \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" \
    -DH2GATE_SANITIZE=ON -DH2GATE_FUZZ=ON -DH2GATE_WERROR=ON -DH2GATE_TESTS=ON -DH2GATE_UNITY=ON
}

stage_asan() {
  wait_prepared asan
  build_asan || return
  if [[ ! -x build/tests/h2gate_integration_tests ]]; then
    note asan "no build/tests/h2gate_integration_tests: the release stage builds it"
    return 1
  fi
  local -x ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
  local -x UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  local rc=0
  run_ctest asan build-asan build-asan/ctest-unit.log -R '^unit' || rc=1
  H2GATE_TEST_BINARY="$ROOT/build-asan/h2gate" \
    H2GATE_TEST_PAC_PROBE="$ROOT/build-asan/tests/pac_probe" \
    run_ctest asan build build-asan/ctest.log -L 'integration|clients' || rc=1
  return "$rc"
}

stage_fuzz() {
  wait_prepared asan
  if ! build_asan; then
    note fuzz "the build of build-asan/ failed"
    return 2
  fi
  local targets=() t name base work corpus dict args rc=0 one
  mapfile -t targets < <(find build-asan/tests -maxdepth 1 -type f -name '*_fuzz' -perm -u+x | sort)
  if ((${#targets[@]} == 0)); then
    echo "no *_fuzz targets were built"
    note fuzz "no fuzz targets"
    return 1
  fi
  local artifacts="$ROOT/build-asan/fuzz-artifacts" works=() i
  mkdir -p "$artifacts"
  # Two targets at a time (libFuzzer runs one thread): the stage takes half
  # the wall time on two cores.
  for t in "${targets[@]}"; do
    name=$(basename "$t")
    base=${name%_fuzz}
    work=$(mktemp -d)
    works+=("$work")
    mkdir -p "$work/corpus"
    corpus="tests/fuzz/corpus/$base"
    [[ -d $corpus ]] && cp -R "$corpus/." "$work/corpus/"
    args=(-max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
      -artifact_prefix="$artifacts/$name-")
    for dict in "tests/fuzz/$name.dict" "tests/fuzz/$base.dict" "$corpus.dict"; do
      if [[ -f $dict ]]; then
        args+=(-dict="$dict")
        break
      fi
    done
    rm -f "$artifacts/$name-"*
    echo "fuzzing $name for ${FUZZ_SECONDS}s ($(find "$work/corpus" -type f | wc -l) seeds)"
    # Two at most: each writes its rc file when done. Not bash's bare `wait`
    # or `wait -n`: they also wait for the builds and preparations running in
    # the background (start_prepare), which outlast this stage.
    while (($(find "${works[@]}" -maxdepth 1 -name rc 2>/dev/null | wc -l) < ${#works[@]} - 2)); do
      sleep 1
    done
    (
      one=0
      ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
        UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
        timeout --kill-after=30 $((FUZZ_SECONDS + 300)) "$t" "${args[@]}" "$work/corpus" \
        >"$work/log" 2>&1 || one=$?
      echo "$one" >"$work/rc.tmp" && mv "$work/rc.tmp" "$work/rc"
    ) &
  done
  while (($(find "${works[@]}" -maxdepth 1 -name rc 2>/dev/null | wc -l) < ${#works[@]})); do
    sleep 1
  done
  for i in "${!targets[@]}"; do
    name=$(basename "${targets[$i]}")
    work=${works[$i]}
    one=$(cat "$work/rc" 2>/dev/null || echo 99)
    echo "--- $name: exit $one"
    if ((one)); then
      tail -n 300 "$work/log"
      rc=1
      note fuzz "$name FAILED (exit $one, reproducer in $artifacts/)"
    else
      tail -n 12 "$work/log"
      note fuzz "$name ok ($(grep -Eo 'stat::number_of_executed_units: [0-9]+' "$work/log" | grep -Eo '[0-9]+$' || echo '?') runs)"
    fi
    rm -rf "$work"
  done
  return "$rc"
}

# h2gate.exe under wine as workload (w) of the benchmark's W1 down and up
# (tests/bench/README.md), quick (1 round, 4 MiB transfers; ~20 s): so that
# workload cannot rot unseen. It needs the Linux build's h2gate beside it.
bench_wine() {
  local out=build-windows/bench-wine.out err=build-windows/bench-wine.err rc=0 wine empty
  if [[ ! -x build/h2gate ]]; then
    note windows "bench under wine skipped: no build/h2gate (the release stage makes it)"
    return 0
  fi
  wine=$(command -v wine64 || command -v wine || echo /usr/lib/wine/wine64)
  QUICK=1 ONLY="w1 up" W1_MIB=4 UP_MIB=4 H2GATE_BIN="$ROOT/build/h2gate" \
    H2GATE_WINDOWS_EXE="$ROOT/build-windows/h2gate.exe" H2GATE_WINE="$wine" \
    timed tests/bench/run.sh >"$out" 2>"$err" || rc=$?
  grep -F '(w)' "$out" || true
  if ((rc)); then
    tail -n 20 "$err"
    note windows "bench under wine: tests/bench/run.sh exited $rc (log: $err)"
    return 1
  fi
  empty=$(awk -F'|' '$2 ~ /\(w\)/ {v = $3; gsub(/^ +| +$/, "", v); if (v == "-" || v == "" || v ~ /nan/) print}' "$out")
  if (($(grep -c '^W1 \(down\|up\) *| (w)' "$out") < 16)) || [[ -n $empty ]]; then
    note windows "bench under wine: (w) rows missing or without a figure (log: $out)"
    return 1
  fi
  note windows "bench under wine (QUICK, 4 MiB): $(grep -F 'CPU s/GB, wine / Linux' "$out" |
    awk -F'|' '{gsub(/ /, "", $3); printf "%s%s CPU x%s", sep, $1, $3; sep = ", "}' | sed 's/  */ /g')"
}

# The Windows libraries (built on a new machine, else found in the cache) and
# the cross build, without running anything (tests/windows/run.sh
# H2GATE_WINDOWS_BUILD_ONLY=1).
build_windows() {
  mkdir -p build-windows
  H2GATE_WINDOWS_BUILD_ONLY=1 timed tests/windows/run.sh build-windows
}

stage_windows() {
  wait_prepared windows
  mkdir -p build-windows
  local log=build-windows/run.log rc=0
  timed tests/windows/run.sh build-windows 2>&1 | tee "$log" || rc=$?
  case $rc in
    0)
      note windows "$(grep -Eo '[0-9]+% tests passed.*' "$log" | tail -n1)"
      note windows "dependencies ready in $(grep -Eo 'dependencies: .* \([0-9]+ s\)$' "$log" | grep -Eo '[0-9]+ s\)$' | tr -d ')')"
      bench_wine || return 1
      ;;
    2)
      note windows "build failed"
      return 2
      ;;
    3)
      note windows "cannot build here: $(grep -Eo 'build-deps: error: .*|missing:.*' "$log" | tail -n1 | cut -c1-300)"
      return 1
      ;;
    *)
      note windows "tests failed under wine: $(grep -Eo '[A-Za-z_]+ \.+\*\*\*[A-Za-z]+( +[0-9.]+ sec)?|test cases:.*|assertions:.*|FAILED: h2gate.exe.*' "$log" | sed -E 's/ \.{2,}/ /' | tr '\n' ';')"
      return 1
      ;;
  esac
}

# Builds and runs the container image (tests/deploy/check_container.sh image).
# Exit 77 from the script (no podman/runc/mmdebstrap, not root, or podman cannot
# run a container here) is a skip: the stage passes with the reason as its note.
# note_check STAGE CHECK LOG RC OK_TEXT [LABEL]: notes how tests/deploy/CHECK.sh
# ended (exit status RC, output in LOG): OK_TEXT when it passed, its SKIP or FAIL
# line otherwise, each after LABEL when given. Returns 0, 77 (skipped) or 1.
note_check() {
  local stage=$1 check=$2 log=$3 rc=$4 ok=$5 label=${6:-}
  case $rc in
    0) note "$stage" "${label:+$label: }$ok" ;;
    77)
      note "$stage" "${label:+$label }SKIPPED: $(sed -n "s/^$check: SKIP: //p" "$log" | tail -n1)"
      return 77
      ;;
    *)
      note "$stage" "${label:+$label: }$(sed -n "s/^$check: FAIL: //p" "$log" | tail -n1)"
      return 1
      ;;
  esac
}

stage_container() {
  mkdir -p build
  local log=build/container.log rc=0 failed=0
  wait_prepared container
  timed tests/deploy/check_container.sh image 2>&1 | tee "$log" || rc=$?
  note_check container check_container "$log" "$rc" \
    "$(grep -Eo 'ok: podman stop.*exit code 0 after [0-9.]+s' "$log" | tail -n1 | sed 's/^ok: //')" ||
    if (($? == 77)); then RESULT_OVERRIDE=SKIP; else failed=1; fi
  # The Debian package (from the release stage's build/) under systemd.
  log=build/package.log
  rc=0
  timed tests/deploy/check_package.sh install build 2>&1 | tee "$log" || rc=$?
  note_check container check_package "$log" "$rc" \
    "$(grep -Eo 'systemctl stop h2gate took.*' "$log" | tail -n1)" package ||
    if (($? != 77)); then failed=1; fi
  return "$failed"
}

# h2gate on Debian 13 (tests/deploy/check_debian.sh trixie); exit 77 is a skip, as
# for the container stage.
stage_trixie() {
  mkdir -p build
  local log=build/trixie.log rc=0
  wait_prepared trixie
  timed tests/deploy/check_debian.sh trixie 2>&1 | tee "$log" || rc=$?
  note_check trixie check_debian "$log" "$rc" \
    "$(sed -n 's/^check_debian: \(Debian trixie passed in [0-9]*s\).*/\1/p' "$log" | tail -n1)" ||
    if (($? == 77)); then RESULT_OVERRIDE=SKIP; else return 1; fi
}

# ------------------------------------------------------------------ main ----

# The trixie stage's root and downloads, from the start, niced in the background
# (tests/deploy/check_debian.sh --prepare): network and dpkg waits that overlap
# the stages before it instead of adding to the run. A container it left behind
# (a run stopped before the stage) is removed at exit.
# Likewise the container stage's image: its podman build (the compile of h2gate in
# the image's builder) runs niced from the start (check_container.sh build-image),
# so it takes the CPU the stages before leave idle (their tests mostly wait on
# their peers); the stage's own podman build then finds every layer cached.
# And the builds of the asan (which the fuzz stage shares) and windows stages
# (tests/run.sh --build-only STAGE, one after the other, logs build/ahead-STAGE.log): compiling is most of
# the CPU of a run, and the release stage's integration tests, the asan
# stage's and the Windows tests under wine mostly wait on their peers. Each
# stage waits for its build (reniced to 0: it is the run's critical path
# then), prints its log, and runs its own build command, which finds the tree
# up to date (or, after a failed build in the background, fails in the
# foreground with its errors).
declare -A PREPARE_PID=() PREPARE_LOG=()
# Only what this run prepared (PREPARE_LOG names it): another run of the
# command in the same tree (e.g. one stage alone while a whole run goes on)
# must not take the whole run's prepared container or image away.
stop_prepare() {
  local s
  for s in "${!PREPARE_PID[@]}"; do kill "${PREPARE_PID[$s]}" 2>/dev/null || true; done
  if [[ -n ${PREPARE_LOG[trixie]:-} && -f build/debian-trixie.prepared ]]; then
    podman rm -f -t 0 "$(cat build/debian-trixie.prepared)" >/dev/null 2>&1 || true
    rm -f build/debian-trixie.prepared
  fi
  if [[ -n ${PREPARE_LOG[container]:-} ]]; then
    podman rmi -f localhost/h2gate-check:prepared >/dev/null 2>&1 || true
  fi
}
# Stage $1's preparation (the command after it), niced, in the background;
# its exit status goes to PREPARE_LOG[$1].rc. Not bash's `wait PID`: over a
# whole run the PIDs wrap around (pid_max 32768 here) and bash forgets a job
# whose PID a later process took (the stages then read "exit 127").
in_background() {
  local s=$1
  shift
  rm -f "${PREPARE_LOG[$s]}.rc"
  (
    trap 'kill "$child" 2>/dev/null' TERM
    nice -n 19 "$@" >"${PREPARE_LOG[$s]}" 2>&1 &
    child=$!
    prc=0
    wait "$child" || prc=$?
    echo "$prc" >"${PREPARE_LOG[$s]}.rc.tmp" && mv "${PREPARE_LOG[$s]}.rc.tmp" "${PREPARE_LOG[$s]}.rc"
  ) &
  PREPARE_PID[$s]=$!
}
start_prepare() {
  mkdir -p build
  trap stop_prepare EXIT
  # The builds of asan (shared by fuzz) and windows, one after the other (the
  # second waits for the first: two at once would only share the same idle CPU).
  local s after=""
  for s in asan windows; do
    if [[ $s == asan ]]; then
      [[ $SKIP != *",asan,"* || $SKIP != *",fuzz,"* ]] || continue
    else
      [[ $SKIP != *",$s,"* ]] || continue
    fi
    PREPARE_LOG[$s]=build/ahead-$s.log
    in_background "$s" tests/run.sh --build-only "$s" ${after:+--after "$after"}
    after=${PREPARE_PID[$s]}
  done
  if command -v podman >/dev/null 2>&1 && [[ $SKIP != *",trixie,"* ]]; then
    PREPARE_LOG[trixie]=build/debian-trixie.prepare.log
    in_background trixie tests/deploy/check_debian.sh trixie --prepare
  fi
  if command -v podman >/dev/null 2>&1 && [[ $SKIP != *",container,"* ]]; then
    PREPARE_LOG[container]=build/container-prepare.log
    in_background container tests/deploy/check_container.sh build-image
  fi
  for s in "${!PREPARE_PID[@]}"; do
    echo "stage $s: prepared in the background from now (PID ${PREPARE_PID[$s]}, log ${PREPARE_LOG[$s]})"
  done
}
# Process $1 and its descendants at nice 0: a stage that waits for its
# preparation makes it the run's critical path. Needs root (lowering a nice
# value); else it stays niced.
renice_tree() {
  local p
  renice -n 0 -p "$1" >/dev/null 2>&1 || return 0
  for p in $(pgrep -P "$1" 2>/dev/null); do renice_tree "$p"; done
}
# Waits for stage $1's background preparation; its failure is only a note (the
# stage does it all itself then).
wait_prepared() {
  [[ -n ${PREPARE_PID[$1]:-} ]] || return 0
  local t0=$SECONDS prc rc_file=${PREPARE_LOG[$1]}.rc
  [[ -f $rc_file ]] || renice_tree "${PREPARE_PID[$1]}"
  while [[ ! -f $rc_file ]] && kill -0 "${PREPARE_PID[$1]}" 2>/dev/null; do sleep 2; done
  prc=$(cat "$rc_file" 2>/dev/null || echo "unknown (it wrote no exit status)")
  unset "PREPARE_PID[$1]"
  echo "--- stage $1's background preparation: exit $prc; waited $((SECONDS - t0))s for it (log ${PREPARE_LOG[$1]})"
  # A build's whole output (its warnings and timings belong in the run's log),
  # else the end of it.
  if [[ ${PREPARE_LOG[$1]} == build/ahead-* ]]; then
    cat "${PREPARE_LOG[$1]}" 2>/dev/null || true
  else
    tail -n 3 "${PREPARE_LOG[$1]}" 2>/dev/null || true
  fi
  [[ $prc == 0 ]] || note "$1" "its background preparation exited $prc (log: ${PREPARE_LOG[$1]})"
}

# tests/run.sh --build-only STAGE [--after PID]: only STAGE's build (build_STAGE),
# once process PID (the build before it) has ended; start_prepare runs these.
if [[ ${1:-} == --build-only ]]; then
  if [[ ${3:-} == --after ]]; then
    while kill -0 "$4" 2>/dev/null; do sleep 1; done
  fi
  rc=0
  "build_$2" || rc=$?
  exit "$rc"
fi

if [[ ${H2GATE_NO_INSTALL:-} != 1 ]]; then
  banner "install-deps --test"
  if ! timed deploy/install-deps.sh --test; then
    echo "deploy/install-deps.sh --test failed: no stage can run"
    echo "0 passed, ${#STAGES[@]} failed"
    exit 1
  fi
fi

start_prepare

stop=""
for s in "${STAGES[@]}"; do
  if [[ $SKIP == *",$s,"* ]]; then
    RESULT[$s]=SKIP
    note "$s" "H2GATE_SKIP"
    continue
  fi
  if [[ -n $stop ]]; then
    RESULT[$s]="NOT RUN"
    note "$s" "$stop build failed"
    continue
  fi
  banner "stage $s"
  t0=$SECONDS
  rc=0
  RESULT_OVERRIDE=""
  "stage_$s" || rc=$?
  SECONDS_TAKEN[$s]=$((SECONDS - t0))
  case $rc in
    0) RESULT[$s]=${RESULT_OVERRIDE:-PASS} ;;
    2)
      RESULT[$s]=FAIL
      stop=$s
      ;;
    *) RESULT[$s]=FAIL ;;
  esac
  printf -- '--- stage %s: %s in %ds\n' "$s" "${RESULT[$s]}" "${SECONDS_TAKEN[$s]}"
done

passed=0
failed=0
banner "summary"
for s in "${STAGES[@]}"; do
  printf '%-9s %-8s %6s  %s\n' "$s" "${RESULT[$s]}" \
    "${SECONDS_TAKEN[$s]:+${SECONDS_TAKEN[$s]}s}" "${NOTE[$s]:-}"
  case ${RESULT[$s]} in
    PASS) passed=$((passed + 1)) ;;
    FAIL | "NOT RUN") failed=$((failed + 1)) ;;
  esac
done
wall=$(($(date +%s) - suite_start))
cpu=$(($(machine_cpu) - cpu_start))
echo "total ${wall}s; machine CPU ${cpu}s: $(awk -v c="$cpu" -v w="$wall" -v n="$(nproc)" \
  'BEGIN {printf "%.0f%% of %d cores", (w > 0 ? 100 * c / (w * n) : 0), n}')"
echo "$passed passed, $failed failed"
((failed == 0))
