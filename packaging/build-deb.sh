#!/usr/bin/env bash
# Builds the Debian package warren_VERSION_amd64.deb with the Debian tools: copies this
# checkout's source (tracked files and untracked ones git does not ignore; no build dirs) to
# a scratch tree with packaging/debian as debian/, and runs `dpkg-buildpackage -us -uc -b`
# there. The package's build configures with the tests off (packaging/debian/rules).
#
#   packaging/build-deb.sh [OUT_DIR]      the .deb (and its -dbgsym, .buildinfo, .changes)
#                                         land in OUT_DIR (default build-deb/)
# WARREN_DEB_VERSION=V builds version V instead of debian/changelog's (a changelog entry is
# added in the scratch tree, as dch would); the upgrade test builds an older one so.
# Needs debhelper and the build dependencies (packaging/install-deps.sh installs them).
# Prints the path of the .deb last.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$repo/build-deb}
mkdir -p "$out"
out=$(cd "$out" && pwd)

scratch=$(mktemp -d "${TMPDIR:-/tmp}/warren-deb.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
src=$scratch/warren
mkdir -p "$src"
if git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
  # Files deleted in the work tree but still in the index are skipped.
  (cd "$repo" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [[ -e $f || -L $f ]] && printf '%s\0' "$f"; done |
    tar --null -T - -cf -) | tar -xf - -C "$src"
else
  tar -C "$repo" --exclude='./build*' --exclude=./.peers --exclude=./.git -cf - . | tar -xf - -C "$src"
fi
rm -rf "$src/debian"
cp -a "$src/packaging/debian" "$src/debian"

if [[ -n ${WARREN_DEB_VERSION:-} ]]; then
  [[ $WARREN_DEB_VERSION =~ ^[0-9][A-Za-z0-9.+~-]*$ ]] || {
    echo "build-deb: WARREN_DEB_VERSION '$WARREN_DEB_VERSION' is not a Debian version" >&2
    exit 2
  }
  maint=$(sed -n 's/^ -- \(.*>\)  .*/\1/p' "$src/debian/changelog" | head -1)
  {
    printf 'warren (%s) bookworm; urgency=medium\n\n' "$WARREN_DEB_VERSION"
    printf '  * Built with WARREN_DEB_VERSION=%s (packaging/build-deb.sh).\n\n' "$WARREN_DEB_VERSION"
    printf ' -- %s  %s\n\n' "$maint" "$(date -R)"
    cat "$src/debian/changelog"
  } >"$src/debian/changelog.new"
  mv "$src/debian/changelog.new" "$src/debian/changelog"
fi

start=$EPOCHREALTIME
(cd "$src" && DEB_BUILD_OPTIONS="parallel=$(nproc) ${DEB_BUILD_OPTIONS:-}" \
  dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1 || {
  tail -n 40 "$out/build.log" >&2
  echo "build-deb: dpkg-buildpackage failed (whole log: $out/build.log)" >&2
  exit 1
}
version=$(cd "$src" && dpkg-parsechangelog -S Version)
for f in "$scratch"/warren*_"$version"_*; do mv -f "$f" "$out/"; done
awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN {printf "build-deb: built in %.0f s\n", b - a}' >&2
echo "$out/warren_${version}_amd64.deb"
