#!/usr/bin/env bash
# The Windows installer (deploy/windows/msi.sh) under wine, in a fresh wine
# prefix of its own:
#  1. the service `h2gate.exe service install -c <Program Files config>`
#     registers, read from the registry (the reference the MSI must match);
#  1b. with another program on 127.0.0.1:3128 the service cannot start:
#     `msiexec /i ... /qn` fails and is rolled back, leaving no service
#     registered, no h2gate.exe, no installed product, and a log that
#     names the port;
#  2. `msiexec /i h2gate-VERSION-windows-x86_64.msi /qn` installs h2gate.exe,
#     h2gate.yaml and README-windows.txt to C:\Program Files\h2gate, the
#     installed h2gate.exe --version runs, and the service key has the same
#     name, display name, start type, account and command line as in 1;
#     `h2gate.exe service install` beside it is refused, naming msiexec /x;
#  3. the MSI started the service: RUNNING, /ready on the admin port, a
#     download through it (direct mode, the default configuration) equal to
#     the file served, its log in C:\ProgramData\h2gate\h2gate.log;
#  3b. another build of the same version (another ProductCode) installed
#     over it replaces it: one h2gate installed, the rebuild, running;
#  4. an MSI of the next version (H2GATE_MSI_VERSION) installed over it is
#     a major upgrade: one h2gate in the installed programs, the new
#     version's, the service running again, and the administrator's edit of
#     h2gate.yaml kept;
#  4b. the older MSI installed over it is refused (MajorUpgrade's
#     downgrade LaunchCondition): msiexec fails before changing anything,
#     the newer version stays the one installed, running and serving;
#  5. `msiexec /x ... /qn` stops it (the log's "stopped, exit code 0"),
#     removes the service and the program files; h2gate.yaml (Permanent:
#     an administrator's edits survive) and the log stay.
#  6. the per-user choice, `msiexec /i ... MODE=user /qn`: files in
#     %LOCALAPPDATA%\Programs\h2gate, no service, the Run value of HKCU the
#     same command line as `h2gate.exe autostart install -c <that
#     h2gate.yaml>` writes (read back with reg.exe); wine's logon (wineboot
#     runs the HKCU Run values, programs/wineboot/wineboot.c) starts it:
#     /ready 200, a download through it, its log in
#     %LOCALAPPDATA%\h2gate; `msiexec /x ... /qn` (no MODE) removes the
#     value and the program files.
#   ctest: windows_msi (label windows)
#
#   tests/windows/msi_test.sh BUILD_DIR
#
# The service listens on the default configuration's fixed ports
# (127.0.0.1:3128, admin 9901) as soon as the MSI starts it, so the test
# runs in a network namespace of its own (unshare -n, root), where no other
# program holds them.
set -euo pipefail
ROOT=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../..
BUILD=$(readlink -f "$1")
WINE=${H2GATE_WINE:-$(command -v wine64 || command -v wine || echo /usr/lib/wine/wine64)}
WINESERVER=$(dirname "$(readlink -f "$WINE")")/wineserver
[[ -x $WINESERVER ]] || WINESERVER=$(command -v wineserver || echo /usr/lib/wine/wineserver)
fail() {
  echo "FAIL: $*"
  exit 1
}
ok() { echo "ok: $*"; }

if [[ -z ${H2GATE_MSI_NETNS:-} ]]; then
  if unshare -n true 2>/dev/null; then
    exec env H2GATE_MSI_NETNS=1 unshare -n bash "$0" "$@"
  fi
  echo "msi_test: no network namespace (unshare -n needs root): running in the host's;" \
    "ports 3128 and 9901 must be free"
else
  ip link set lo up
fi
for port in 3128 9901; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    fail "127.0.0.1:$port is in use: the installed service could not listen there"
  fi
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/h2gate-msi-test.XXXXXX")
export WINEPREFIX=$TMP/prefix WINEDEBUG=-all
HTTP_PID='' BLOCKER_PID=''
cleanup() {
  [[ -z $HTTP_PID ]] || kill "$HTTP_PID" 2>/dev/null || true
  [[ -z $BLOCKER_PID ]] || kill "$BLOCKER_PID" 2>/dev/null || true
  "$WINESERVER" -k >/dev/null 2>&1 || true
  "$WINESERVER" -w >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT
t0=$SECONDS

msi=$("$ROOT/deploy/windows/msi.sh" "$BUILD" "$TMP") || fail "msi.sh failed"
ok "built $(basename "$msi") ($(stat -c %s "$msi") bytes)"
winmsi="Z:${msi//\//\\}"

# wine's output through a file, not a pipe: a process of wine's session
# that a command starts (services.exe, a service) would inherit the pipe and
# hold it open.
w() {
  local rc=0
  "$WINE" "$@" >"$TMP/wine.out" 2>&1 </dev/null || rc=$?
  tr -d '\r' <"$TMP/wine.out"
  return $rc
}
# The service's registry key, one "Name Type Value" line per value.
service_key() { w reg query 'HKLM\System\CurrentControlSet\Services\h2gate' || true; }
value() { sed -n "s/^ *$1 *REG_[A-Z_]* *//p" <<<"$2"; }
state() { w sc query h2gate | sed -n 's/^ *STATE *: *[0-9]* *\([A-Z_]*\).*/\1/p'; }

# wineboot's exit status is not 0 now and then under load (seen once with a
# complete prefix); the prefix is what counts.
"$WINE" wineboot -i >"$TMP/wineboot.log" 2>&1 </dev/null ||
  echo "msi_test: wineboot -i exited $?: $(tail -n 3 "$TMP/wineboot.log" | tr -d '\r')"
[[ -f $WINEPREFIX/drive_c/windows/system32/kernel32.dll ]] ||
  fail "wineboot did not create the prefix: $(tail -n 5 "$TMP/wineboot.log" | tr -d '\r')"
# One wine session for the whole test: wine ends its session (services
# included) a few seconds after its last ordinary process, and the next
# command would boot it again, starting auto-start services. (-p starts a
# server only where none runs: wineboot's is ended first.)
"$WINESERVER" -k >/dev/null 2>&1 || true
"$WINESERVER" -w
"$WINESERVER" -p
"$WINE" wineboot >/dev/null 2>&1 </dev/null || fail "wineboot (the session's start) failed"
ok "fresh wine prefix booted ($((SECONDS - t0)) s)"

PF="$WINEPREFIX/drive_c/Program Files/h2gate"
PD="$WINEPREFIX/drive_c/ProgramData/h2gate"
CONFIG='C:\Program Files\h2gate\h2gate.yaml'

# 1. What `h2gate.exe service install` registers for that configuration.
mkdir -p "$PF"
cp "$BUILD/h2gate.exe" "$PF/h2gate.exe"
cp "$ROOT/config/examples/default.yaml" "$PF/h2gate.yaml"
out=$(w 'C:\Program Files\h2gate\h2gate.exe' service install -c "$CONFIG") ||
  fail "h2gate.exe service install: $out"
ref=$(service_key)
[[ $ref == *ImagePath* ]] || fail "service install registered no ImagePath: $ref"
out=$(w 'C:\Program Files\h2gate\h2gate.exe' service uninstall) ||
  fail "h2gate.exe service uninstall: $out"
rm -rf "$PF" "$PD"
[[ -z $(state) ]] || fail "the service install registered is still there"
ok "service install registers: $(value ImagePath "$ref")"

# Whether an h2gate is registered as an installed program (the uninstall
# entries), one "DisplayVersion REG_SZ X.Y.Z" line per h2gate.
installed_versions() {
  w reg query 'HKLM\Software\Microsoft\Windows\CurrentVersion\Uninstall' /s |
    grep -A30 -E 'DisplayName +REG_SZ +h2gate$' | grep -E 'DisplayVersion' || true
}

# 1b. A service that cannot start fails the install, rolled back: no
# service left registered (a dead entry pointing at a removed h2gate.exe),
# no program files, no installed product; the log says why. Another
# program holds 127.0.0.1:3128, the default configuration's listener.
# (wine's msi rolls back by running the removal of what was installed, so
# the service goes by ServiceControl's delete at uninstall, Remove=
# "uninstall" in h2gate.wxs; without it the service stays, seen by hand.)
# Step 2 then installs over what the rollback left, as a user would once
# the port is free.
t1=$SECONDS
python3 -u -c 'import socket, time
s = socket.socket()
s.bind(("127.0.0.1", 3128))
s.listen()
print("listening", flush=True)
time.sleep(300)' >"$TMP/blocker.log" 2>&1 &
BLOCKER_PID=$!
for _ in $(seq 1 50); do
  grep -q listening "$TMP/blocker.log" && break
  sleep 0.1
done
(exec 3<>/dev/tcp/127.0.0.1/3128) 2>/dev/null ||
  fail "the program meant to hold 127.0.0.1:3128 does not: $(cat "$TMP/blocker.log")"
rc=0
out=$(w msiexec /i "$winmsi" /qn /l\*v 'Z:'"${TMP//\//\\}"'\failed.log') || rc=$?
kill "$BLOCKER_PID"
wait "$BLOCKER_PID" 2>/dev/null || true
BLOCKER_PID=
((rc != 0)) || fail "msiexec /i succeeded although the service could not start: $out"
[[ -z $(state) ]] || fail "the failed install left the service registered: $(w sc query h2gate)"
key=$(service_key)
[[ $key != *ImagePath* ]] || fail "the failed install left the service's registry key: $key"
for f in h2gate.exe README-windows.txt; do
  [[ ! -e $PF/$f ]] || fail "the failed install left C:\\Program Files\\h2gate\\$f"
done
[[ -z $(installed_versions) ]] || fail "the failed install registered h2gate: $(installed_versions)"
log=$(tr -d '\r' <"$PD/h2gate.log" 2>/dev/null) || fail "the failed start left no log in C:\\ProgramData\\h2gate"
[[ $log == *"cannot listen on 127.0.0.1:3128"* && $log == *"service h2gate: stopped, exit code 1"* ]] ||
  fail "the log of the failed start does not say that 127.0.0.1:3128 was taken: $log"
# Under wine the configuration stays (the rollback removes what an
# uninstall removes, and h2gate.yaml is Permanent): not asserted, as
# Windows Installer's rollback of a new install may remove it.
kept=none
[[ -f $PF/h2gate.yaml ]] && kept=h2gate.yaml
ok "with 127.0.0.1:3128 taken, msiexec /i exited $rc (Windows code mod 256), rolled back:" \
  "no service, no h2gate.exe, no product; the log says why; left in Program Files: $kept" \
  "(this step: $((SECONDS - t1)) s)"

# 2. The MSI installs.
out=$(w msiexec /i "$winmsi" /qn /l\*v 'Z:'"${TMP//\//\\}"'\install.log') || {
  tr -d '\r' <"$TMP/install.log" | grep -iE 'error|fail|return value 3' | head -n 20 || true
  fail "msiexec /i $(basename "$msi") /qn: $out"
}
ok "msiexec /i /qn installed ($((SECONDS - t0)) s)"
for f in h2gate.exe h2gate.yaml README-windows.txt; do
  [[ -f $PF/$f ]] || fail "C:\\Program Files\\h2gate\\$f is not installed"
done
cmp -s "$BUILD/h2gate.exe" "$PF/h2gate.exe" || fail "the installed h2gate.exe is not the build's"
out=$(w 'C:\Program Files\h2gate\h2gate.exe' --version)
[[ $out == "h2gate "* ]] || fail "the installed h2gate.exe --version printed: $out"
ok "C:\\Program Files\\h2gate: h2gate.exe (--version: $out), h2gate.yaml, README-windows.txt"

key=$(service_key)
[[ $key == *ImagePath* ]] || fail "the MSI registered no service h2gate: $key"
# The same service as `service install` registers. Quotes aside: both
# quote the paths with spaces, Windows Installer also the executable's
# (wine 8's msi does not: below).
for v in DisplayName Description Start Type ErrorControl ObjectName; do
  [[ $(value "$v" "$key") == "$(value "$v" "$ref")" ]] ||
    fail "the MSI's service $v '$(value "$v" "$key")' differs from service install's '$(value "$v" "$ref")'"
done
image=$(value ImagePath "$key")
[[ ${image//\"/} == "$(value ImagePath "$ref" | tr -d '"')" ]] ||
  fail "the MSI's ImagePath '$image' differs from service install's '$(value ImagePath "$ref")'"
ok "the MSI registered the same service: ImagePath $image," \
  "Start $(value Start "$key") (auto), $(value ObjectName "$key")"

# 3. Started by the install; serves.
for _ in $(seq 1 100); do
  [[ $(state) == RUNNING ]] && curl -fsS -o /dev/null http://127.0.0.1:9901/ready 2>/dev/null && break
  sleep 0.3
done
[[ $(state) == RUNNING ]] || fail "the service is not running after the install: $(w sc query h2gate)"
code=$(curl -sS -o /dev/null -w '%{http_code}' http://127.0.0.1:9901/ready) || true
[[ $code == 200 ]] || fail "/ready on the admin port gave $code"
ok "the install started the service: RUNNING, /ready 200"
# `service install` beside the MSI's service is refused, naming the way out.
if out=$(w 'C:\Program Files\h2gate\h2gate.exe' service install -c "$CONFIG"); then
  fail "h2gate.exe service install succeeded beside the MSI's service: $out"
fi
[[ $out == *"msiexec /x"* ]] || fail "service install beside the MSI's service said: $out"
[[ $(state) == RUNNING ]] || fail "a refused service install changed the service: $(w sc query h2gate)"
ok "service install beside the MSI's service is refused: ${out//$'\n'/ }"

mkdir "$TMP/www"
head -c 1048576 /dev/urandom >"$TMP/www/1m"
want=$(sha256sum <"$TMP/www/1m")
# The origin on an ephemeral port (it prints the one it got).
python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$TMP/www" >"$TMP/http.log" 2>&1 &
HTTP_PID=$!
origin=
for _ in $(seq 1 50); do
  origin=$(sed -n 's/.* port \([0-9]*\) .*/\1/p' "$TMP/http.log")
  [[ -n $origin ]] && break
  sleep 0.2
done
[[ -n $origin ]] || fail "the test origin (python3 -m http.server) did not start: $(cat "$TMP/http.log")"
url=http://127.0.0.1:$origin/1m
# The origin first without the proxy, then through it.
[[ $(curl -fsS "$url" | sha256sum) == "$want" ]] ||
  fail "the test origin (python3 http.server) does not serve the file"
got=$(curl -fsS -x http://127.0.0.1:3128 "$url" | sha256sum) ||
  fail "a download through the installed service failed"
[[ $got == "$want" ]] || fail "the download through the service differs from the file"
ok "1 MiB through the service (direct mode) equals the file served"

log=$(tr -d '\r' <"$PD/h2gate.log" 2>/dev/null) || fail "no log at C:\\ProgramData\\h2gate\\h2gate.log"
[[ $log == *"service h2gate: running"* ]] || fail "the log lacks 'service h2gate: running': $log"
ok "the service logs to C:\\ProgramData\\h2gate\\h2gate.log"

# 3b. Another build of the same version (a new ProductCode, as every build
# has) replaces the installed one instead of installing beside it (msi.sh
# makes the Upgrade row's VersionMax inclusive): one h2gate installed, the
# new build's, its service running again.
t1=$SECONDS
mkdir "$TMP/rebuild"
msi_re=$("$ROOT/deploy/windows/msi.sh" "$BUILD" "$TMP/rebuild") || fail "msi.sh (rebuild) failed"
product_code() { msiinfo export "$1" Property | tr -d '\r' | sed -n 's/^ProductCode\t//p'; }
code_re=$(product_code "$msi_re")
[[ $code_re != "$(product_code "$msi")" ]] ||
  fail "two builds of the MSI have the same ProductCode $code_re"
out=$(w msiexec /i "Z:${msi_re//\//\\}" /qn) || fail "msiexec /i (a rebuild of the same version) /qn: $out"
products=$(installed_versions)
[[ $(grep -c . <<<"$products") == 1 ]] ||
  fail "after installing a rebuild of the same version the installed h2gate are: ${products:-none} (want one)"
w reg query "HKLM\\Software\\Microsoft\\Windows\\CurrentVersion\\Uninstall\\$code_re" >/dev/null ||
  fail "the installed h2gate is not the rebuild ($code_re)"
for _ in $(seq 1 100); do
  [[ $(state) == RUNNING ]] && curl -fsS -o /dev/null http://127.0.0.1:9901/ready 2>/dev/null && break
  sleep 0.3
done
[[ $(state) == RUNNING ]] || fail "the service is not running after the rebuild's install: $(w sc query h2gate)"
ok "a rebuild of the same version replaces the installed one: one h2gate, $code_re, service RUNNING" \
  "(this step: $((SECONDS - t1)) s)"

# 4. A major upgrade keeps the administrator's configuration.
printf '# edited by msi_test.sh\r\n' >>"$PF/h2gate.yaml"
IFS=. read -r major minor patch <<<"$(sed -n 's/^h2gate-\([0-9.]*\)-windows.*/\1/p' <<<"$(basename "$msi")")"
next=$major.$minor.$((patch + 1))
mkdir "$TMP/next"
msi2=$(H2GATE_MSI_VERSION=$next "$ROOT/deploy/windows/msi.sh" "$BUILD" "$TMP/next") ||
  fail "msi.sh (version $next) failed"
winmsi2="Z:${msi2//\//\\}"
out=$(w msiexec /i "$winmsi2" /qn) || fail "msiexec /i $(basename "$msi2") /qn (upgrade): $out"
products=$(installed_versions)
[[ $(grep -c . <<<"$products") == 1 && $products == *" $next" ]] ||
  fail "after the upgrade the installed h2gate versions are: ${products:-none} (want only $next)"
grep -q 'edited by msi_test.sh' "$PF/h2gate.yaml" || fail "the upgrade replaced the edited h2gate.yaml"
for _ in $(seq 1 100); do
  [[ $(state) == RUNNING ]] && curl -fsS -o /dev/null http://127.0.0.1:9901/ready 2>/dev/null && break
  sleep 0.3
done
[[ $(state) == RUNNING ]] || fail "the service is not running after the upgrade: $(w sc query h2gate)"
ok "upgrade to $next ($((SECONDS - t0)) s): installed h2gate: $(xargs <<<"$products"), service RUNNING, edited h2gate.yaml kept"

# 4b. The older MSI over the newer version is refused (MajorUpgrade's
# downgrade detection: FindRelatedProducts sets WIX_DOWNGRADE_DETECTED, the
# LaunchCondition fails the install before anything is changed), and the
# newer version goes on serving.
t1=$SECONDS
before=$(tr -d '\r' <"$PD/h2gate.log" | wc -l)
rc=0
out=$(w msiexec /i "$winmsi" /qn /l\*v 'Z:'"${TMP//\//\\}"'\downgrade.log') || rc=$?
((rc != 0)) || fail "msiexec /i $(basename "$msi") over $next succeeded (a downgrade): $out"
downgrade_log=$(tr -d '\r' <"$TMP/downgrade.log")
grep -q '^Property(S): WIX_DOWNGRADE_DETECTED = {' <<<"$downgrade_log" ||
  fail "msiexec /i $(basename "$msi") failed ($rc), but not by detecting the newer version: $(tail -n 20 <<<"$downgrade_log")"
if grep -qE '^Action start .*: (InstallInitialize|RemoveExistingProducts|StopServices)\.' <<<"$downgrade_log"; then
  fail "the refused downgrade went on past its launch conditions: $(grep '^Action start' <<<"$downgrade_log" | tail -n 5)"
fi
products=$(installed_versions)
[[ $(grep -c . <<<"$products") == 1 && $products == *" $next" ]] ||
  fail "after the refused downgrade the installed h2gate versions are: ${products:-none} (want only $next)"
[[ $(state) == RUNNING ]] || fail "the service is not running after the refused downgrade: $(w sc query h2gate)"
log=$(tr -d '\r' <"$PD/h2gate.log" | tail -n +$((before + 1)))
[[ $log != *"service h2gate: "* ]] || fail "the refused downgrade stopped or started the service: $log"
got=$(curl -fsS -x http://127.0.0.1:3128 "$url" | sha256sum) ||
  fail "a download through the service failed after the refused downgrade"
[[ $got == "$want" ]] || fail "the download after the refused downgrade differs from the file"
ok "msiexec /i $(basename "$msi") over $next is refused (exit $rc, Windows code mod 256;" \
  "WIX_DOWNGRADE_DETECTED): $next stays installed, its service untouched and serving (this step: $((SECONDS - t1)) s)"

# 5. Uninstall: stopped (drained), removed, files gone.
before=$(tr -d '\r' <"$PD/h2gate.log" | wc -l)
out=$(w msiexec /x "$winmsi2" /qn /l\*v 'Z:'"${TMP//\//\\}"'\uninstall.log') || fail "msiexec /x /qn: $out"
ok "msiexec /x /qn uninstalled ($((SECONDS - t0)) s)"
[[ -z $(state) ]] || fail "the service is still registered: $(w sc query h2gate)"
key=$(service_key)
[[ $key != *ImagePath* ]] || fail "the service's registry key is still there: $key"
log=$(tr -d '\r' <"$PD/h2gate.log" | tail -n +$((before + 1)))
[[ $log == *"service h2gate: service stop requested"* && $log == *"service h2gate: stopped, exit code 0"* ]] ||
  fail "the log does not show a stop request and exit code 0: $log"
if curl -fsS -o /dev/null --max-time 2 http://127.0.0.1:9901/ready 2>/dev/null; then
  fail "something still answers on the admin port"
fi
for f in h2gate.exe README-windows.txt; do
  if [[ -e $PF/$f ]]; then
    # What msiexec said of the file, and whether a process still had it.
    tr -d '\r' <"$TMP/uninstall.log" | grep -iE "$f|in use|reboot|return value 3" | head -n 20 || true
    pgrep -af 'h2gate\.exe' || echo "(no h2gate.exe process left)"
    fail "C:\\Program Files\\h2gate\\$f is left after uninstall"
  fi
done
[[ -f $PF/h2gate.yaml ]] || fail "the configuration was removed (it is Permanent)"
ok "uninstall stopped the service (exit code 0), removed it, h2gate.exe and README-windows.txt;" \
  "h2gate.yaml and the log stay"
# 6. The per-user choice: MODE=user installs for the current user, with a
# start at the user's logon (the HKCU Run value) instead of the service.
t1=$SECONDS
run_key='HKCU\Software\Microsoft\Windows\CurrentVersion\Run'
run_value() { w reg query "$run_key" /v h2gate 2>/dev/null | sed -n 's/^ *h2gate *REG_SZ *//p' || true; }
[[ -z $(run_value) ]] || fail "an h2gate Run value exists before the per-user install: $(run_value)"
out=$(w msiexec /i "$winmsi" MODE=user /qn /l\*v 'Z:'"${TMP//\//\\}"'\user.log') || {
  tr -d '\r' <"$TMP/user.log" | grep -iE 'error|fail|return value 3' | head -n 20 || true
  fail "msiexec /i $(basename "$msi") MODE=user /qn: $out"
}
UPF=$(find "$WINEPREFIX/drive_c/users" -maxdepth 5 -type d -path '*/AppData/Local/Programs/h2gate' | head -n 1)
for f in h2gate.exe h2gate.yaml README-windows.txt; do
  [[ -f $UPF/$f ]] || fail "the per-user install has no %LOCALAPPDATA%\\Programs\\h2gate\\$f"
done
[[ ! -e $PF/h2gate.exe ]] || fail "the per-user install put h2gate.exe into C:\\Program Files"
[[ -z $(state) ]] || fail "the per-user install registered a service: $(w sc query h2gate)"
key=$(service_key)
[[ $key != *ImagePath* ]] || fail "the per-user install wrote a service key: $key"
msi_run=$(run_value)
[[ -n $msi_run ]] || fail "the per-user install wrote no Run value: $(w reg query "$run_key")"
# What `h2gate.exe autostart install` writes for the same configuration
# (into HKCU too: saved, compared, removed again).
uexe=$(sed -n 's/^"\([^"]*h2gate\.exe\)".*/\1/p' <<<"$msi_run")
[[ -n $uexe ]] || fail "the Run value does not start with the quoted h2gate.exe: $msi_run"
ucfg=${uexe%h2gate.exe}h2gate.yaml
out=$(w "$uexe" autostart install -c "$ucfg") || fail "$uexe autostart install: $out"
ref_run=$(run_value)
out=$(w "$uexe" autostart uninstall) || fail "$uexe autostart uninstall: $out"
[[ ${msi_run//\"/} == "${ref_run//\"/}" ]] ||
  fail "the MSI's Run value '$msi_run' differs from autostart install's '$ref_run'"
w reg add "$run_key" /v h2gate /t REG_SZ /d "$msi_run" /f >/dev/null ||
  fail "cannot put the MSI's Run value back"
ok "MODE=user: files in $(basename "$(dirname "$(dirname "$UPF")")")\\Programs\\h2gate, no service," \
  "Run value = autostart install's: $msi_run"

# wine's logon: wineboot (without -i) runs the HKCU Run values.
"$WINE" wineboot >/dev/null 2>&1 </dev/null || fail "wineboot (the logon) failed"
for _ in $(seq 1 100); do
  curl -fsS -o /dev/null http://127.0.0.1:9901/ready 2>/dev/null && break
  sleep 0.3
done
code=$(curl -sS -o /dev/null -w '%{http_code}' http://127.0.0.1:9901/ready) || true
[[ $code == 200 ]] || fail "after the logon, /ready of the per-user h2gate gave $code"
got=$(curl -fsS -x http://127.0.0.1:3128 "$url" | sha256sum) ||
  fail "a download through the per-user h2gate failed"
[[ $got == "$want" ]] || fail "the download through the per-user h2gate differs from the file"
ULOG=$(dirname "$(dirname "$UPF")")/h2gate/h2gate.log
log=$(tr -d '\r' <"$ULOG" 2>/dev/null) || fail "no log at %LOCALAPPDATA%\\h2gate\\h2gate.log ($ULOG)"
[[ $log == *"listening on 127.0.0.1:3128"* ]] ||
  fail "the per-user log does not show the listener: $log"
[[ $log != *"as LocalSystem"* ]] || fail "the per-user h2gate warns of LocalSystem: $log"
curl -fsS -o /dev/null -X POST -H "X-H2gate-Admin: 1" http://127.0.0.1:9901/quitquitquit || fail "POST /quitquitquit failed"
for _ in $(seq 1 50); do
  curl -fsS -o /dev/null --max-time 1 http://127.0.0.1:9901/ready 2>/dev/null || break
  sleep 0.3
done
ok "the logon started it (wineboot ran the Run value): /ready 200, 1 MiB through it, its log in" \
  "%LOCALAPPDATA%\\h2gate; stopped by /quitquitquit"

out=$(w msiexec /x "$winmsi" /qn) || fail "msiexec /x /qn (per-user): $out"
[[ -z $(run_value) ]] || fail "the per-user uninstall left the Run value: $(run_value)"
[[ ! -e $UPF/h2gate.exe ]] || fail "the per-user uninstall left h2gate.exe"
[[ -z $(state) ]] || fail "a service appeared: $(w sc query h2gate)"
ok "msiexec /x (no MODE given) removed the per-user install: no Run value, no h2gate.exe" \
  "(this step: $((SECONDS - t1)) s)"
echo "msi_test: passed in $((SECONDS - t0)) s"
