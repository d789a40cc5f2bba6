#!/usr/bin/env bash
# CTest systemd_unit_verify: `systemd-analyze verify` on packaging/debian/warren.service, with
# its ExecStart pointed at the warren just built (the unit names /usr/bin/warren, which only
# the package installs; verify checks that it is executable). Fails on any message verify
# prints, not only on its exit status: it reports unknown settings as warnings.
# usage: verify_unit.sh UNIT WARREN_BINARY
set -euo pipefail
unit=$1 warren=$2
if ! command -v systemd-analyze >/dev/null; then
  [[ -n ${CI:-} ]] && { echo "CI is set, so systemd-analyze (package systemd) must be here" >&2; exit 1; }
  echo "skipped: no systemd-analyze"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed "s|/usr/bin/warren|$warren|g" "$unit" >"$dir/warren.service"
grep -q "^ExecStart=$warren serve" "$dir/warren.service" || { echo "no ExecStart of warren serve" >&2; exit 1; }
out=$(systemd-analyze verify "$dir/warren.service" 2>&1) || { echo "$out" >&2; exit 1; }
# Messages about other units (ordering targets absent on a build machine) are not ours.
ours=$(grep "warren.service" <<<"$out" || true)
[[ -z $ours ]] || { echo "$ours" >&2; exit 1; }
echo "systemd-analyze verify warren.service: clean"
