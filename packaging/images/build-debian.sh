#!/usr/bin/env bash
# build-debian.sh OUT_DIR [VERSION]: builds the default "debian" guest image into
# OUT_DIR/debian@VERSION/ (vmlinuz, initrd.img, rootfs.qcow2, image.json): Debian bookworm
# from mmdebstrap (minbase + systemd, OpenSSH, sudo, python3, curl, git, docker.io and the
# cloud kernel), user dev with passwordless sudo, the control-port launcher as a systemd
# unit, no background network jobs. Tree -> ext4 (mke2fs -d, no mounts) -> qcow2.
#
# Idempotent: an existing OUT_DIR/debian@VERSION is left alone (VMs may be using it as their
# base) unless WARREN_IMAGE_FORCE=1. Downloaded .debs are kept in OUT_DIR/.cache/debs.
set -euo pipefail
# shellcheck source=packaging/images/lib.sh
source "$(dirname "$0")/lib.sh"

[[ $# -ge 1 && $# -le 2 ]] || die "usage: $0 OUT_DIR [VERSION]"
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
VERSION=${2:-$(date -u +%Y%m%d)}
NAME=debian
DEST=$OUT/$NAME@$VERSION
# rw: the initramfs mounts the root read-write; no fsck at boot (see customize-hook.sh).
CMDLINE="console=ttyS0 root=/dev/vda rw quiet"
# The initrd warren boots with: "warren" (default; guest/common/initrd-init with busybox,
# about 2-3 s faster to systemd under TCG) or "initramfs-tools" (the one Debian built in the
# tree, which is kept there either way, configured by guest/debian/essential-hook.sh).
INITRD_KIND=${WARREN_DEBIAN_INITRD:-warren}
# Loaded by warren's initrd: what the root disk and the control port need; udev loads the
# rest (virtio_net, virtio_rng, ...) from the real root.
INITRD_MODULES=(virtio_pci virtio_blk virtio_console)
PACKAGES=(
  systemd systemd-sysv systemd-resolved udev kmod dbus libpam-systemd
  linux-image-cloud-amd64 initramfs-tools zstd e2fsprogs busybox-static
  openssh-server sudo python3 curl git ca-certificates iproute2 procps less netbase
  docker.io
)

require_root
if image_dir_ready "$DEST" && [[ ${WARREN_IMAGE_FORCE:-0} != 1 ]]; then
  log "$DEST exists; leaving it alone (WARREN_IMAGE_FORCE=1 rebuilds)"
  exit 0
fi
timed "deps" ensure_deps

T0=$EPOCHREALTIME
WORK=$(mktemp -d "$OUT/.work-$NAME.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
ROOT=$WORK/root
IMG=$WORK/image
mkdir -p "$IMG"

timed "launcher" build_launcher "$WORK/warren-launcher"

# 1. The tree. The hooks are ours: guest/debian/{essential,customize}-hook.sh.
pkgs=$(
  IFS=,
  echo "${PACKAGES[*]}"
)
timed "mmdebstrap" mmdebstrap_cached "$OUT/.cache/debs" "$ROOT" \
  --variant=minbase --include="$pkgs" \
  --essential-hook="$GUEST_DIR/debian/essential-hook.sh \"\$1\"" \
  --customize-hook="$GUEST_DIR/debian/customize-hook.sh \"\$1\" $GUEST_DIR $WORK/warren-launcher"

# 2. Kernel and initrd from the tree.
kernels=("$ROOT"/boot/vmlinuz-*)
((${#kernels[@]} == 1)) || die "expected one kernel in the tree, found ${#kernels[@]}"
KVER=${kernels[0]##*/vmlinuz-}
cp "$ROOT/boot/vmlinuz-$KVER" "$IMG/vmlinuz"
case $INITRD_KIND in
  warren)
    timed "initrd" make_initrd "$ROOT/lib/modules/$KVER" "$ROOT/bin/busybox" "$IMG/initrd.img" \
      "${INITRD_MODULES[@]}"
    ;;
  initramfs-tools)
    [[ -f $ROOT/boot/initrd.img-$KVER ]] || die "no initrd for $KVER in the tree"
    cp "$ROOT/boot/initrd.img-$KVER" "$IMG/initrd.img"
    ;;
  *) die "WARREN_DEBIAN_INITRD must be warren or initramfs-tools, not $INITRD_KIND" ;;
esac
log "kernel $KVER, $INITRD_KIND initrd $(du -h "$IMG/initrd.img" | cut -f1)"

# 3. ext4 from the tree (no mounts), then the read-only qcow2 base. Some headroom only:
# each VM's overlay is larger and systemd-growfs grows the file system to fit at boot.
make_disk() {
  local used size
  used=$(du -sm "$ROOT" | cut -f1)
  size=$((used * 5 / 4 + 256))
  make_ext4 "$ROOT" "$WORK/rootfs.raw" "${size}M" warren-root
  qemu-img convert -q -O qcow2 "$WORK/rootfs.raw" "$IMG/rootfs.qcow2"
  rm -f "$WORK/rootfs.raw"
  log "root file system ${size} MiB, ${used} MiB used"
}
timed "rootfs.qcow2" make_disk

chmod 0644 "$IMG"/*
write_image_json "$IMG" "$NAME" "$VERSION" "$CMDLINE" \
  "Debian 12 (bookworm) with systemd, sudo, python3, curl, git and docker; the default"

# 4. Publish atomically: a half-built directory never carries the final name.
if [[ -e $DEST ]]; then rm -rf "$DEST.old" && mv "$DEST" "$DEST.old"; fi
mv "$IMG" "$DEST"
rm -rf "$DEST.old"
log "built $DEST ($(du -sh "$DEST" | cut -f1)) in $(awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}')s"
