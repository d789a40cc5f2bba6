#!/usr/bin/env bash
# The Debian package, end to end (CTest deb_package; packaging/debian/README.Debian):
#   1. builds it with packaging/build-deb.sh (dpkg-buildpackage, tests off) and lintian
#      finds no error in it;
#   2. makes an older build of it (the same files as version VERSION~old1, repacked with
#      dpkg-deb: what matters to an upgrade is the version and the maintainer scripts);
#   3. in a mount namespace whose /usr, /etc and /var are copy-on-write overlays of this
#      machine's (the writes land in a tmpfs that goes with the namespace: the machine's own
#      /var/lib/warren, /etc/warren and dpkg database are never touched, even if this test
#      is killed), with a fresh /run: `apt-get install ./older.deb` (its dependencies are
#      this machine's), checks the files, `warren version` from /usr/bin, the shipped config
#      read by `warren serve --print-config`, that serve tells $NOTIFY_SOCKET READY=1 and
#      STOPPING=1 (notify_check.py), `systemd-analyze verify` on the installed unit,
#      then writes data and edits the conffile; upgrades with `apt-get install ./new.deb`
#      (data and the edit kept); `apt-get remove` (programs and unit gone, data and conffile
#      kept); `apt-get purge` (nothing of warren left anywhere in the overlays' writes: no
#      file, unit state or user). Purges at the end even when a step fails.
# WARREN_DEB=PATH tests a package built already instead of building one.
# WARREN_DEB_PREBUILT=DIR (as CTest runs it: the suite's own build/) has dpkg-buildpackage
# package that build tree instead of compiling warren a third time (packaging/debian/rules);
# every other step of the package build runs. Without it the package compiles from source,
# -O0 without debug info unless WARREN_DEB_TEST_RELEASE=1.
# Needs root, dpkg-dev, debhelper, lintian, systemd (systemd-analyze) and overlayfs. Outside
# CI a missing tool skips (exit 77); with CI set it fails. Prints each step's seconds.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)

say() { printf '[deb_test %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
fail() {
  say "FAIL: $*" >&2
  exit 1
}
missing() {
  if [[ -n ${CI:-} ]]; then fail "CI is set, so what this test needs must be here: $*"; fi
  say "skipped: $*"
  exit 77
}
[[ $EUID -eq 0 ]] || missing "root (apt-get install in a mount namespace)"
for tool in dpkg-buildpackage dh lintian systemd-analyze unshare apt-get dpkg-deb; do
  command -v "$tool" >/dev/null || missing "$tool (packaging/install-deps.sh installs it)"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/warren-deb-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
t0=$EPOCHREALTIME
lap() { awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.0f s", b - a}'; }

# --- 1. build and lintian -----------------------------------------------------------------
if [[ -n ${WARREN_DEB:-} ]]; then
  # A package built already (packaging/build-deb.sh): the rest of the test on it.
  new_deb=$(realpath "$WARREN_DEB")
  say "testing $new_deb (WARREN_DEB; not built here)"
else
  # Compiled here, the package is -O0 without debug info (DEB_BUILD_OPTIONS=noopt), about
  # half the compiler time of the release flags, which WARREN_DEB_TEST_RELEASE=1 uses. The
  # packaging (rules, files, scripts, unit) is the same every way.
  if [[ -n ${WARREN_DEB_PREBUILT:-} ]]; then
    export WARREN_DEB_PREBUILT
    WARREN_DEB_PREBUILT=$(realpath "$WARREN_DEB_PREBUILT")
    say "packaging the build tree $WARREN_DEB_PREBUILT (WARREN_DEB_PREBUILT)"
  elif [[ ${WARREN_DEB_TEST_RELEASE:-0} != 1 ]]; then
    export DEB_BUILD_OPTIONS="noopt ${DEB_BUILD_OPTIONS:-}" DEB_CXXFLAGS_APPEND="-g0 ${DEB_CXXFLAGS_APPEND:-}"
  fi
  say "building the package (packaging/build-deb.sh; DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS:-})"
  new_deb=$(bash "$repo/packaging/build-deb.sh" "$work/out" | tail -1)
  [[ -f $new_deb ]] || fail "build-deb.sh made no $new_deb"
  say "built $(basename "$new_deb") in $(lap)"
fi
version=$(dpkg-deb -f "$new_deb" Version)

t0=$EPOCHREALTIME
# Errors fail the test; warnings are printed for the reader.
if ! lintian --fail-on error "$new_deb" >"$work/lintian.txt" 2>&1; then
  cat "$work/lintian.txt" >&2
  fail "lintian reports errors"
fi
sed 's/^/  lintian: /' "$work/lintian.txt"
say "lintian: no errors ($(grep -c '^W:' "$work/lintian.txt" || true) warnings) in $(lap)"

# --- 2. an older build --------------------------------------------------------------------
old_version="$version~old1"
dpkg-deb -R "$new_deb" "$work/old-tree"
sed -i "s/^Version: .*/Version: $old_version/" "$work/old-tree/DEBIAN/control"
old_deb=$work/warren_${old_version}_amd64.deb
dpkg-deb --root-owner-group -b "$work/old-tree" "$old_deb" >/dev/null
rm -rf "$work/old-tree"

# --- 3. install, upgrade, remove, purge in a mount namespace ------------------------------
t0=$EPOCHREALTIME
# The admin key the config check uses.
ssh-keygen -q -t ed25519 -N '' -C deb-test -f "$work/admin" >/dev/null
export REPO=$repo NEW_DEB=$new_deb OLD_DEB=$old_deb VERSION=$version OLD_VERSION=$old_version WORK=$work
unshare --mount --propagation private -- bash -euo pipefail -c '
say() { printf "[deb_test %s] %s\n" "$(date +%H:%M:%S)" "$*"; }
fail() { say "FAIL: $*" >&2; exit 1; }
ov=$WORK/overlay
mkdir -p "$ov"
mount -t tmpfs -o mode=0755 tmpfs "$ov"
for d in usr etc var; do
  mkdir -p "$ov/$d.up" "$ov/$d.work"
  mount -t overlay overlay -o "lowerdir=/$d,upperdir=$ov/$d.up,workdir=$ov/$d.work" "/$d"
done
# A fresh /run: no systemd here to talk to (deb-systemd-invoke then does nothing), and the
# unit'"'"'s RuntimeDirectory stays ours.
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /run/lock
# An empty /var/lib/warren some other test left on this machine (the second-host fixture bind
# mounts over one) is not the package'"'"'s: out of this namespace'"'"'s view, and out of the
# comparison below.
if [[ -d /var/lib/warren && -z $(ls -A /var/lib/warren) ]]; then rmdir /var/lib/warren; fi
ours_before=$(cd "$ov" && find usr.up etc.up var.up -path "*warren*" | sort)
export DEBIAN_FRONTEND=noninteractive
apt_get() { apt-get -y -q -o Dpkg::Use-Pty=0 --no-install-recommends "$@" >>"$WORK/apt.log" 2>&1 ||
  { tail -n 30 "$WORK/apt.log" >&2; fail "apt-get $*"; }; }
purge() { dpkg --purge warren >>"$WORK/apt.log" 2>&1 || true; }
trap purge EXIT
passwd_before=$(sha256sum /etc/passwd /etc/group)

dpkg-query -W -f="\${Status}" warren 2>/dev/null | grep -q "install ok installed" &&
  fail "warren is installed on this machine already; the test needs it absent"
# --- install the older build
apt_get install "$OLD_DEB"
[[ $(dpkg-query -W -f="\${Version}" warren) == "$OLD_VERSION" ]] || fail "older build not installed"
for f in /usr/bin/warren /usr/lib/warren/warren-run /usr/lib/warren/guest/warren-run \
  /usr/lib/warren/guest/warren-launcher /usr/share/warren/images/build-tiny.sh \
  /usr/share/warren/images/build-debian.sh /usr/share/warren/images/lib.sh \
  /usr/share/warren/images/guest/common/control /lib/systemd/system/warren.service \
  /etc/warren/warren.conf /usr/share/doc/warren/README.Debian.gz; do
  [[ -e $f ]] || fail "the package did not install $f"
done
[[ -d /var/lib/warren ]] || fail "no /var/lib/warren"
[[ -x /usr/bin/warren && -x /usr/lib/warren/warren-run ]] || fail "programs not executable"
out=$(/usr/bin/warren version) || fail "/usr/bin/warren version failed"
[[ $out == *"$(echo "$VERSION" | sed "s/-[^-]*$//")"* ]] || fail "warren version says \"$out\""
say "installed $OLD_VERSION; /usr/bin/warren version: $out"
# The runner warren uploads is the one it was built with, found in /usr/lib/warren.
/usr/lib/warren/warren-run --version | grep -q "^warren-run 1-" || fail "warren-run --version"
/usr/lib/warren/guest/warren-run --version | grep -q "^warren-run image-" ||
  fail "the image runner does not say image-HASH"
for f in /usr/lib/warren/warren-run /usr/lib/warren/guest/warren-run /usr/lib/warren/guest/warren-launcher; do
  # Held whole, not piped into `grep -q`: its early exit could fail readelf with SIGPIPE, and
  # under pipefail a dynamic binary would pass.
  headers=$(readelf -l "$f")
  [[ $headers == *"program interpreter"* ]] && fail "$f is not static (it runs in guests)"
done
# The shipped config is one warren reads (every key a serve flag).
/usr/bin/warren serve --config /etc/warren/warren.conf --print-config >"$WORK/config.txt" 2>&1 ||
  { cat "$WORK/config.txt" >&2; fail "warren serve --print-config on the shipped config"; }
grep -q "data-dir" "$WORK/config.txt" || fail "--print-config shows no data-dir"
# What Type=notify relies on: READY=1 with the listeners up, STOPPING=1 on SIGTERM.
/usr/bin/python3 "$REPO/tests/packaging/notify_check.py" /etc/warren/warren.conf \
  "$WORK/admin.pub" "$WORK" || fail "warren serve as the unit runs it"
systemd-analyze verify /lib/systemd/system/warren.service >"$WORK/verify.txt" 2>&1 ||
  { cat "$WORK/verify.txt" >&2; fail "systemd-analyze verify warren.service"; }
say "systemd-analyze verify: clean"

# --- data and an admin'"'"'s edit, then the upgrade
echo "precious" >/var/lib/warren/deb-test-data
echo "# an admin edit (deb_test)" >>/etc/warren/warren.conf
apt_get install "$NEW_DEB"
[[ $(dpkg-query -W -f="\${Version}" warren) == "$VERSION" ]] || fail "upgrade did not install $VERSION"
[[ $(cat /var/lib/warren/deb-test-data) == precious ]] || fail "the upgrade lost /var/lib/warren data"
grep -q "an admin edit (deb_test)" /etc/warren/warren.conf || fail "the upgrade lost the conffile edit"
[[ ! -e /etc/warren/warren.conf.dpkg-new && ! -e /etc/warren/warren.conf.dpkg-old ]] ||
  fail "the upgrade left a .dpkg-new/.dpkg-old conffile"
say "upgraded $OLD_VERSION -> $VERSION: data and conffile edit kept"

# --- remove: programs and unit go, data and conffile stay
apt_get remove warren
[[ ! -e /usr/bin/warren && ! -e /usr/lib/warren && ! -e /usr/share/warren ]] || fail "remove left programs"
[[ ! -e /lib/systemd/system/warren.service ]] || fail "remove left the unit"
[[ $(cat /var/lib/warren/deb-test-data) == precious ]] || fail "remove deleted /var/lib/warren data"
grep -q "an admin edit (deb_test)" /etc/warren/warren.conf || fail "remove deleted the conffile"
say "removed: data and conffile kept"

# --- purge: nothing of warren anywhere
apt_get purge warren
dpkg-query -W -f="\${Status}" warren 2>/dev/null | grep -q "config-files\|ok installed" &&
  fail "dpkg still has warren after purge"
[[ ! -e /var/lib/warren && ! -e /etc/warren ]] || fail "purge left /var/lib/warren or /etc/warren"
[[ $(sha256sum /etc/passwd /etc/group) == "$passwd_before" ]] || fail "users or groups changed"
# Every write went to the overlays'"'"' upper layers: none may still name warren (dpkg and
# apt logs aside).
left=$(cd "$ov" && find usr.up etc.up var.up -path "*warren*" \
  ! -path "var.up/log/*" ! -path "var.up/cache/apt/*" | sort |
  comm -23 - <(printf "%s\n" "$ours_before") | head -20)
[[ -z $left ]] || fail "purge left: $left"
in_run=$(find /run -path "*warren*")
[[ -n $in_run ]] && fail "purge left in /run: $in_run"
say "purged: no file, unit state, user or data left"
'
say "install, upgrade, remove and purge in $(lap)"
say "PASS"
