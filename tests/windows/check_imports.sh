#!/usr/bin/env bash
# h2gate.exe links statically: it imports only DLLs every Windows 10/11 has in
# System32 (x86_64-w64-mingw32-objdump -p), and it runs: `--version` under
# wine prints the version line.   ctest: windows_exe_imports (label windows)
#
#   tests/windows/check_imports.sh EXE
set -euo pipefail
EXE=$1
WINE=${H2GATE_WINE:-$(command -v wine64 || command -v wine || echo /usr/lib/wine/wine64)}
SYSTEM_DLLS=" advapi32.dll bcrypt.dll crypt32.dll gdi32.dll iphlpapi.dll kernel32.dll msvcrt.dll
  mswsock.dll normaliz.dll ntdll.dll ole32.dll psapi.dll secur32.dll shell32.dll user32.dll
  winhttp.dll ws2_32.dll "
mapfile -t dlls < <(x86_64-w64-mingw32-objdump -p "$EXE" | sed -n 's/^[[:space:]]*DLL Name: //p' |
  tr '[:upper:]' '[:lower:]' | sort -u)
((${#dlls[@]})) || { echo "FAIL: objdump -p $EXE lists no DLL"; exit 1; }
for d in "${dlls[@]}"; do
  grep -qwF -- "$d" <<<"$SYSTEM_DLLS" || { echo "FAIL: $EXE imports $d, not a Windows system DLL"; exit 1; }
done
echo "ok: $(basename "$EXE") imports only system DLLs: ${dlls[*]}"
out=$(WINEDEBUG=-all "$WINE" "$EXE" --version 2>&1 | tr -d '\r')
[[ $out == "h2gate "* ]] || { echo "FAIL: $EXE --version printed: $out"; exit 1; }
echo "ok: $out"
