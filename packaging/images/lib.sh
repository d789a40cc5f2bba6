# shellcheck shell=bash
# Shared helpers for warren's guest image builds (sourced by build-*.sh, make-seed.sh and
# tests/images/*). Everything here works without loop mounts: file systems are made with
# `mke2fs -d` from a directory tree.

IMAGES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The repository the images are built from (build_runner compiles its guest runner).
WARREN_REPO_DIR=$(cd "$IMAGES_DIR/../.." && pwd)
# Installed from the Debian package (/usr/share/warren/images) there are no sources: the
# package's prebuilt static runner and launcher are copied instead of compiled
# (packaging/install.cmake). WARREN_GUEST_BIN_DIR names such a directory explicitly.
if [[ -z ${WARREN_GUEST_BIN_DIR:-} && ! -d $WARREN_REPO_DIR/vmhost/guest/runner ]]; then
  WARREN_GUEST_BIN_DIR=$(cd "$IMAGES_DIR/../../../lib/warren/guest" 2>/dev/null && pwd || true)
fi
# shellcheck disable=SC2034 # used by the scripts that source this file
GUEST_DIR=$IMAGES_DIR/guest

# Debian archive the guests are built from. Overridable for a local mirror or proxy.
DEBIAN_SUITE=${WARREN_DEBIAN_SUITE:-bookworm}
DEBIAN_MIRROR=${WARREN_DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBIAN_SECURITY_MIRROR=${WARREN_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# timed LABEL CMD...: runs CMD and logs how long it took (the build scripts print timings).
# Not `"$@" || ...`: that would switch off set -e inside the timed function.
timed() {
  local label=$1 start=$EPOCHREALTIME
  shift
  "$@"
  log "$(awk -v l="$label" -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN {printf "time %-26s %6.1fs", l, b - a}')"
}

require_root() {
  # mmdebstrap --mode=root, chown'd trees for mke2fs -d and apt-get all need root.
  [[ $EUID -eq 0 ]] || die "run as root (the image builds need root for apt-get and file ownership)"
}

# Installs the packages in deps.txt that are missing (a fresh machine has none of them).
ensure_deps() {
  local missing=() p
  while read -r p; do
    [[ -z $p || $p == \#* ]] && continue
    # Prebuilt guest binaries need no compiler.
    [[ -n ${WARREN_GUEST_BIN_DIR:-} && ($p == gcc || $p == libc6-dev) ]] && continue
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done <"$IMAGES_DIR/deps.txt"
  ((${#missing[@]} == 0)) && return 0
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
}

debian_sources() {
  printf '%s\n' \
    "deb $DEBIAN_MIRROR $DEBIAN_SUITE main" \
    "deb $DEBIAN_MIRROR $DEBIAN_SUITE-updates main" \
    "deb $DEBIAN_SECURITY_MIRROR $DEBIAN_SUITE-security main"
}

# mmdebstrap_cached CACHE_DIR TARGET MMDEBSTRAP_ARGS...
# Runs mmdebstrap in root mode against Debian's archive, keeping every downloaded .deb in
# CACHE_DIR so a rebuild downloads only what changed (apt still fetches fresh package lists).
# The extract variant runs no customize hooks, hence the sync-out in both places.
mmdebstrap_cached() {
  local cache=$1 target=$2
  shift 2
  mkdir -p "$cache"
  local sources=()
  mapfile -t sources < <(debian_sources)
  # shellcheck disable=SC2016 # "$1" is for mmdebstrap's hook shell, not ours
  mmdebstrap --mode=root --quiet \
    --skip=download/empty --skip=essential/unlink \
    --aptopt='Acquire::Retries "3"' \
    --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
    --setup-hook="sync-in $cache /var/cache/apt/archives/" \
    --extract-hook="sync-out /var/cache/apt/archives $cache" \
    --customize-hook="sync-out /var/cache/apt/archives $cache" \
    --customize-hook='rm -f "$1"/var/cache/apt/archives/*.deb' \
    "$@" "$DEBIAN_SUITE" "$target" "${sources[@]}"
}

# donor_libs DONOR FILE...: prints the donor-tree paths of the shared libraries FILE needs,
# resolved by the donor's own dynamic loader (so the host's libraries never leak in).
donor_libs() {
  local donor=$1
  shift
  local libpath=$donor/lib/x86_64-linux-gnu:$donor/usr/lib/x86_64-linux-gnu:$donor/usr/libexec/sudo
  local f
  for f in "$@"; do
    "$donor/lib64/ld-linux-x86-64.so.2" --library-path "$libpath" --list "$f" |
      awk '/=>/ && $3 ~ /^\// {print $3} !/=>/ && $1 ~ /^\// {print $1}'
  done | sort -u
}

# usr_path PATH: maps a path of an unmerged donor tree to its merged-/usr location.
usr_path() {
  case $1 in
    /bin/* | /sbin/* | /lib/* | /lib64/*) printf '/usr%s\n' "$1" ;;
    *) printf '%s\n' "$1" ;;
  esac
}

# install_from_donor DONOR ROOT PATH...: copies donor files (absolute paths inside the
# donor) into ROOT at their merged-/usr location, with the libraries they load. Symlinks
# are resolved, so a library's soname link becomes a plain file.
install_from_donor() {
  local donor=$1 root=$2
  shift 2
  local p src dst
  local files=()
  for p in "$@"; do files+=("$donor$p"); done
  {
    printf '%s\n' "${files[@]}"
    donor_libs "$donor" "${files[@]}"
  } | sort -u | while read -r src; do
    p=${src#"$donor"}
    dst=$root$(usr_path "$p")
    mkdir -p "$(dirname "$dst")"
    rm -f "$dst" # never write through a busybox applet link
    cp -L --preserve=mode "$src" "$dst"
  done
}

# module_load_order MODDIR NAME...: prints the .ko files (relative to MODDIR) that loading
# NAME... needs, dependencies first. Reads each module's `depends=` from its .modinfo
# section, so no depmod or kmod is needed on the host. Built-in modules are skipped.
module_load_order() {
  local moddir=$1
  shift
  declare -A path_of=() done_=()
  local f n
  while read -r f; do
    n=$(basename "$f" .ko)
    path_of[${n//-/_}]=${f#"$moddir"/}
  done < <(find "$moddir/kernel" -name '*.ko')
  local -a order=()
  visit() {
    local m=${1//-/_} d deps
    [[ -n ${done_[$m]:-} ]] && return 0
    done_[$m]=1
    if [[ -z ${path_of[$m]:-} ]]; then
      grep -q "/$m.ko\$\|/${m//_/-}.ko\$" "$moddir/modules.builtin" 2>/dev/null && return 0
      die "kernel module $m not found"
    fi
    deps=$(tr '\0' '\n' <"$moddir/${path_of[$m]}" | sed -n 's/^depends=//p' | head -1)
    for d in ${deps//,/ }; do visit "$d"; done
    order+=("${path_of[$m]}")
  }
  for n in "$@"; do visit "$n"; done
  printf '%s\n' "${order[@]}"
}

# make_initrd MODDIR BUSYBOX OUT MODULE...: warren's small initrd: a static busybox,
# MODULE... and their dependencies from MODDIR (a kernel's /lib/modules/VERSION) and
# guest/common/initrd-init as /init, which loads them in order and mounts root=. An
# uncompressed cpio: nothing to unpack but the archive itself.
make_initrd() {
  local moddir=$1 busybox=$2 out=$3
  shift 3
  local dir a m
  dir=$(mktemp -d)
  mkdir -p "$dir"/{bin,dev,proc,sys,newroot,lib/modules}
  cp "$busybox" "$dir/bin/busybox"
  for a in sh mount umount insmod mkdir sleep cat echo switch_root; do ln -s busybox "$dir/bin/$a"; done
  module_load_order "$moddir" "$@" >"$dir/order"
  : >"$dir/lib/modules/load-order"
  while read -r m; do
    cp "$moddir/$m" "$dir/lib/modules/"
    basename "$m" >>"$dir/lib/modules/load-order"
  done <"$dir/order"
  rm "$dir/order"
  install -m 0755 "$GUEST_DIR/common/initrd-init" "$dir/init"
  (cd "$dir" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc -R 0:0 --quiet) >"$out"
  log "initrd modules: $(tr '\n' ' ' <"$dir/lib/modules/load-order")"
  rm -rf "$dir"
}

# build_launcher OUT: the control-port launcher, static so one binary serves every image.
build_launcher() {
  if [[ -n ${WARREN_GUEST_BIN_DIR:-} ]]; then
    install -m 0755 "$WARREN_GUEST_BIN_DIR/warren-launcher" "$1"
    return
  fi
  gcc -static -O2 -Wall -Wextra -Werror -o "$1" "$IMAGES_DIR/launcher/warren-launcher.c"
  strip "$1"
}

# build_runner OUT: the guest runner warren-run (vmhost/guest/runner), static like the launcher
# and built with the flags CMake gives it. In an image it is /usr/lib/warren/warren-run, and
# /usr/lib/warren/apply-seed links to it (apply-seed at boot, in one process: no program is
# started). The host still uploads its own build to ~/.warren/bin for jobs and identity; the
# image's says `image-HASH` (its sources' hash) to --version, so it is never taken for that.
build_runner() {
  local src=$WARREN_REPO_DIR/vmhost/guest/runner hash
  if [[ -n ${WARREN_GUEST_BIN_DIR:-} ]]; then
    install -m 0755 "$WARREN_GUEST_BIN_DIR/warren-run" "$1"
    return
  fi
  hash=$(cat "$src"/*.c "$src"/*.h | sha256sum | cut -c1-12)
  gcc -static -O2 -s -Wall -Wextra -Werror -std=gnu11 "-DWARREN_RUN_VERSION=\"image-$hash\"" \
    -o "$1" "$src"/*.c
  chmod 0755 "$1"
}

# make_ext4 SRC_DIR IMAGE SIZE LABEL: an ext4 file system holding SRC_DIR, without mounting.
make_ext4() {
  local src=$1 img=$2 size=$3 label=$4
  rm -f "$img"
  # -E root_owner: the root directory comes from SRC_DIR's owner (root), not the caller.
  mke2fs -q -F -t ext4 -L "$label" -d "$src" -E root_owner=0:0 "$img" "$size" >/dev/null
}

# write_image_json DIR NAME VERSION CMDLINE DESCRIPTION (one line, no quotes or backslashes:
# `images` and `help new` show it)
write_image_json() {
  local dir=$1 name=$2 version=$3 cmdline=$4 description=$5 size
  size=$(du -sb --apparent-size "$dir"/vmlinuz "$dir"/initrd.img "$dir"/rootfs.qcow2 | awk '{s+=$1} END {print s}')
  local vsize
  vsize=$(qemu-img info --output=json "$dir/rootfs.qcow2" | sed -n 's/.*"virtual-size": *\([0-9]*\).*/\1/p' | head -1)
  cat >"$dir/image.json" <<EOF
{
  "name": "$name",
  "version": "$version",
  "description": "$description",
  "kernel_cmdline": "$cmdline",
  "default_user": "dev",
  "built_at": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "size": $size,
  "disk_virtual_size": $vsize,
  "control_port": "warren.control",
  "seed_label": "warren-seed"
}
EOF
}

# image_dir_ready DIR: a finished image (image.json is written last).
image_dir_ready() { [[ -f $1/image.json && -f $1/rootfs.qcow2 && -f $1/vmlinuz && -f $1/initrd.img ]]; }

# image_build_begin NAME OUT_DIR [VERSION]: the start every build-NAME.sh shares (its own
# arguments after NAME). Sets OUT, VERSION (default: today, UTC), NAME, DEST
# (OUT/NAME@VERSION), DEB_CACHE (OUT/.cache/debs, for mmdebstrap_cached), WORK (a scratch
# directory in OUT, removed at exit), IMG (WORK/image, the image being built) and T0. Exits
# at once, successfully, when DEST is built already: VMs may use it as their base, so it is
# left alone unless WARREN_IMAGE_FORCE=1. Needs root; installs what deps.txt lists.
image_build_begin() {
  NAME=$1
  shift
  [[ $# -ge 1 && $# -le 2 ]] || die "usage: $0 OUT_DIR [VERSION]"
  OUT=$(mkdir -p "$1" && cd "$1" && pwd)
  VERSION=${2:-$(date -u +%Y%m%d)}
  DEST=$OUT/$NAME@$VERSION
  # shellcheck disable=SC2034 # used by the scripts that call this
  DEB_CACHE=$OUT/.cache/debs
  require_root
  if image_dir_ready "$DEST" && [[ ${WARREN_IMAGE_FORCE:-0} != 1 ]]; then
    log "$DEST exists; leaving it alone (WARREN_IMAGE_FORCE=1 rebuilds)"
    exit 0
  fi
  timed "deps" ensure_deps
  T0=$EPOCHREALTIME
  WORK=$(mktemp -d "$OUT/.work-$NAME.XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
  IMG=$WORK/image
  mkdir -p "$IMG"
}

# make_rootfs_qcow2 ROOT SIZE_MIB: ROOT as an ext4 file system labelled warren-root of
# SIZE_MIB (made without mounts), converted to the image's read-only base IMG/rootfs.qcow2.
make_rootfs_qcow2() {
  local root=$1 size=$2
  make_ext4 "$root" "$WORK/rootfs.raw" "${size}M" warren-root
  qemu-img convert -q -O qcow2 "$WORK/rootfs.raw" "$IMG/rootfs.qcow2"
  rm -f "$WORK/rootfs.raw"
}

# image_build_finish CMDLINE DESCRIPTION: writes image.json (last, so a directory with it is complete)
# and publishes IMG as DEST atomically: a half-built directory never carries the final name.
image_build_finish() {
  local cmdline=$1 description=$2
  chmod 0644 "$IMG"/*
  write_image_json "$IMG" "$NAME" "$VERSION" "$cmdline" "$description"
  if [[ -e $DEST ]]; then rm -rf "$DEST.old" && mv "$DEST" "$DEST.old"; fi
  mv "$IMG" "$DEST"
  rm -rf "$DEST.old"
  log "built $DEST ($(du -sh "$DEST" | cut -f1)) in $(awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}')s"
}
