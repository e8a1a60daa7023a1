#!/usr/bin/env bash
# The Windows installer in one command: h2gate-<version>-windows-x86_64.msi,
# built with wixl from h2gate.wxs (this folder). It installs h2gate.exe, the
# default configuration (h2gate.yaml) and README-windows.txt to
# C:\Program Files\h2gate and registers and starts the service "h2gate"
# (deploy/windows/README.md, "MSI"); with MODE=user, for the current user
# into %LOCALAPPDATA%\Programs\h2gate with a start at the user's logon instead.
#
#   deploy/windows/msi.sh [BUILD_DIR] [OUT_DIR]
#     BUILD_DIR: the cross build (default build-windows/, built by
#                tests/windows/run.sh or `cmake --toolchain cmake/mingw-w64.cmake`)
#     OUT_DIR:   where the MSI goes (default BUILD_DIR)
# Prints the MSI's path. Needs wixl and msitools (Debian: wixl, msitools).
# H2GATE_MSI_VERSION=X.Y.Z builds the package under another version than
# the project's (the upgrade test builds a "next" version with it).
set -euo pipefail
TOOL=msi BUILD_DIR=${1:-} OUT_DIR=${2:-}
# shellcheck source=deploy/windows/release_files.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/release_files.sh"
for tool in wixl:wixl msibuild:msitools msiinfo:msitools; do
  command -v "${tool%%:*}" >/dev/null || {
    echo "msi: ${tool%%:*} not found (Debian: ${tool#*:})" >&2
    exit 3
  }
done
# The CMake project version (MAJOR.MINOR.PATCH), as package.sh takes it; an
# MSI's ProductVersion is at most 255.255.65535 and a newer one replaces an
# older one (MajorUpgrade in h2gate.wxs).
VERSION=${H2GATE_MSI_VERSION:-$VERSION}
[[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || {
  echo "msi: the version must be MAJOR.MINOR.PATCH (CMakeLists.txt's project version; got '$VERSION')" >&2
  exit 2
}
NAME=h2gate-$VERSION-windows-x86_64
STAGE=$(mktemp -d "${TMPDIR:-/tmp}/h2gate-msi.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
stage_release_files "$STAGE"
MSI=$STAGE/$NAME.msi
(cd "$STAGE" && wixl -a x64 -D Version="$VERSION" -D ExeSource=h2gate.exe \
  -D ConfigSource=h2gate.yaml -D ReadmeSource=README-windows.txt \
  -o "$MSI" "$ROOT/deploy/windows/h2gate.wxs")
# wixl 0.101 has no Component/@Permanent or @NeverOverwrite (it warns "no
# property named 'Permanent'" and drops them), so the Component table's
# Attributes of the configuration are set here, with msitools' SQL:
# 256 msidbComponentAttributes64bit + 16 Permanent (uninstall leaves an
# edited h2gate.yaml in place) + 128 NeverOverwrite (an install or upgrade
# finding h2gate.yaml keeps it). Without this a major upgrade, which removes
# the old version first, would replace the administrator's configuration
# with the default one.
msibuild "$MSI" -q "UPDATE \`Component\` SET \`Attributes\` = 400 WHERE \`Component\` = 'Config'"
# Nor ServiceInstall/@Vital: its msidbServiceInstallErrorControlVital
# (0x8000) is added to ErrorControl (1, normal) here, so a service that
# cannot be registered fails the installation (rolled back) instead of
# leaving h2gate.exe installed without its service.
msibuild "$MSI" -q "UPDATE \`ServiceInstall\` SET \`ErrorControl\` = 32769 WHERE \`ServiceInstall\` = 'Service'"
# Nor MajorUpgrade/@AllowSameVersionUpgrades: the Upgrade row that finds
# the versions to remove (WIX_UPGRADE_DETECTED) gets 0x200
# msidbUpgradeAttributesVersionMaxInclusive beside its 1 (MigrateFeatures)
# here, so another build of the same version replaces the installed one:
# every build has a new ProductCode (Product/@Id "*"), and without this a
# rebuild of the same version installs beside the first (two "h2gate" in
# Apps & features sharing one service; a later upgrade removed only one of
# them under wine). Attributes is part of the table's key, hence DELETE
# and INSERT.
# (msiinfo export ends its lines with CR LF.)
upgrade_code=$(msiinfo export "$MSI" Property | tr -d '\r' | sed -n 's/^UpgradeCode\t//p')
[[ $upgrade_code =~ ^\{[0-9A-F-]{36}\}$ ]] || {
  echo "msi: no UpgradeCode in the Property table (got '$upgrade_code')" >&2
  exit 2
}
msibuild "$MSI" -q "DELETE FROM \`Upgrade\` WHERE \`ActionProperty\` = 'WIX_UPGRADE_DETECTED'" \
  -q "INSERT INTO \`Upgrade\` (\`UpgradeCode\`, \`VersionMax\`, \`Attributes\`, \`ActionProperty\`) VALUES ('$upgrade_code', '$VERSION', 513, 'WIX_UPGRADE_DETECTED')"
# The per-user choice, MODE=user (h2gate.wxs says what it installs). wixl
# writes neither component conditions nor custom actions that set a
# directory, so they are added here: the service's component (Exe) and the
# log folder in ProgramData only when MODE is not "user"; the component
# with the Run value (ExeUser) and the log folder in LocalAppData only when
# it is. Then two property-setting custom actions (type 51) when MODE is
# "user": ALLUSERS emptied (a per-user installation, before
# FindRelatedProducts looks for an installed one to upgrade in that
# context) and INSTALLDIR moved to %LOCALAPPDATA%\Programs\h2gate\ (before
# CostFinalize resolves the folders). AppSearch, which reads the mode an
# installed per-user h2gate left in HKCU\Software\h2gate, runs first, so an
# uninstall or upgrade (msiexec /x, no MODE given) finds the per-user
# product and its folder. MODE is a secure public property (passed to the
# installation's server side).
msibuild "$MSI" \
  -q "UPDATE \`Component\` SET \`Condition\` = 'MODE <> \"user\"' WHERE \`Component\` = 'Exe' OR \`Component\` = 'LogDir'" \
  -q "UPDATE \`Component\` SET \`Condition\` = 'MODE = \"user\"' WHERE \`Component\` = 'ExeUser' OR \`Component\` = 'LogDirUser'" \
  -q "INSERT INTO \`CustomAction\` (\`Action\`, \`Type\`, \`Source\`, \`Target\`) VALUES ('PerUserScope', 51, 'ALLUSERS', '')" \
  -q "INSERT INTO \`CustomAction\` (\`Action\`, \`Type\`, \`Source\`, \`Target\`) VALUES ('PerUserDir', 51, 'INSTALLDIR', '[LocalAppDataFolder]Programs\\h2gate\\')"
for table in InstallExecuteSequence InstallUISequence; do
  msibuild "$MSI" \
    -q "UPDATE \`$table\` SET \`Sequence\` = 5 WHERE \`Action\` = 'AppSearch'" \
    -q "INSERT INTO \`$table\` (\`Action\`, \`Condition\`, \`Sequence\`) VALUES ('PerUserScope', 'MODE = \"user\"', 10)" \
    -q "INSERT INTO \`$table\` (\`Action\`, \`Condition\`, \`Sequence\`) VALUES ('PerUserDir', 'MODE = \"user\"', 990)"
done
secure=$(msiinfo export "$MSI" Property | tr -d '\r' | sed -n 's/^SecureCustomProperties\t//p')
msibuild "$MSI" -q "UPDATE \`Property\` SET \`Value\` = 'MODE;$secure' WHERE \`Property\` = 'SecureCustomProperties'"
# (The table is read once: `msiinfo | grep -q` under pipefail fails when
# grep stops early and msiinfo gets SIGPIPE.)
components=$(msiinfo export "$MSI" Component)
grep -q $'^Config\t[^\t]*\tINSTALLDIR\t400\t' <<<"$components" || {
  echo "msi: setting the configuration's component attributes failed" >&2
  exit 2
}
services=$(msiinfo export "$MSI" ServiceInstall)
grep -q $'^Service\th2gate\th2gate\t16\t2\t32769\t' <<<"$services" || {
  echo "msi: setting the service's ErrorControl failed" >&2
  exit 2
}
grep -q $'^ExeUser\t[^\t]*\tINSTALLDIR\t256\tMODE = "user"\t' <<<"$components" &&
  grep -q $'^Exe\t[^\t]*\tINSTALLDIR\t256\tMODE <> "user"\t' <<<"$components" || {
  echo "msi: setting the components' MODE conditions failed" >&2
  exit 2
}
for table in InstallExecuteSequence InstallUISequence; do
  sequence=$(msiinfo export "$MSI" "$table" | tr -d '\r')
  for row in $'AppSearch\t\t5' $'PerUserScope\tMODE = "user"\t10' $'PerUserDir\tMODE = "user"\t990'; do
    grep -qxF "$row" <<<"$sequence" || {
      echo "msi: $table lacks the row '${row//$'\t'/ | }'" >&2
      exit 2
    }
  done
done
upgrades=$(msiinfo export "$MSI" Upgrade | tr -d '\r')
grep -qxF "$upgrade_code"$'\t\t'"$VERSION"$'\t\t513\t\tWIX_UPGRADE_DETECTED' <<<"$upgrades" || {
  echo "msi: setting the Upgrade row's same-version attribute failed" >&2
  exit 2
}
mkdir -p "$OUT"
mv -f "$MSI" "$OUT/$NAME.msi"
echo "$OUT/$NAME.msi"
