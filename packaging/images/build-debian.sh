#!/usr/bin/env bash
# build-debian.sh OUT_DIR [VERSION]: builds the default "debian" guest image into
# OUT_DIR/debian@VERSION/ (vmlinuz, initrd.img, rootfs.qcow2, image.json): Debian bookworm
# from mmdebstrap (minbase + systemd, OpenSSH, sudo, python3, curl, git, docker.io and the
# cloud kernel), user dev with passwordless sudo, the control-port launcher as a systemd
# unit, the guest runner for apply-seed, no background network jobs. Tree -> ext4 (mke2fs -d,
# no mounts) -> qcow2.
#
# Idempotent: an existing OUT_DIR/debian@VERSION is left alone (VMs may be using it as their
# base) unless WARREN_IMAGE_FORCE=1. Downloaded .debs are kept in OUT_DIR/.cache/debs.
set -euo pipefail
# shellcheck source=packaging/images/lib.sh
source "$(dirname "$0")/lib.sh"

# rw: the initramfs mounts the root read-write; no fsck at boot (see customize-hook.sh).
CMDLINE="console=ttyS0 root=/dev/vda rw quiet"
# The initrd warren boots with: "warren" (default; guest/common/initrd-init with busybox,
# about 2-3 s faster to systemd under TCG) or "initramfs-tools" (the one Debian built in the
# tree, which is kept there either way, configured by guest/debian/essential-hook.sh).
INITRD_KIND=${WARREN_DEBIAN_INITRD:-warren}
# Loaded by warren's initrd: what the root disk and the control port need, and the NIC's
# driver (a VM with egress "all" is ready once DHCP is done: loaded by udev from the real
# root, eth0 appeared ~5 s later under TCG, and `new` took ~2 s longer); udev loads the rest
# (virtio_rng, ...) from the real root.
INITRD_MODULES=(virtio_pci virtio_blk virtio_console virtio_net)
PACKAGES=(
  systemd systemd-sysv systemd-resolved udev kmod dbus libpam-systemd
  linux-image-cloud-amd64 initramfs-tools zstd e2fsprogs busybox-static
  openssh-server sudo python3 curl git ca-certificates iproute2 procps less netbase
  docker.io
)

image_build_begin debian "$@"
ROOT=$WORK/root

timed "launcher" build_launcher "$WORK/warren-launcher"
timed "runner" build_runner "$WORK/warren-run"

# 1. The tree. The hooks are ours: guest/debian/{essential,customize}-hook.sh.
pkgs=$(
  IFS=,
  echo "${PACKAGES[*]}"
)
timed "mmdebstrap" mmdebstrap_cached "$DEB_CACHE" "$ROOT" \
  --variant=minbase --include="$pkgs" \
  --essential-hook="$GUEST_DIR/debian/essential-hook.sh \"\$1\"" \
  --customize-hook="$GUEST_DIR/debian/customize-hook.sh \"\$1\" $GUEST_DIR $WORK/warren-launcher $WORK/warren-run"

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
  make_rootfs_qcow2 "$ROOT" "$size"
  log "root file system ${size} MiB, ${used} MiB used"
}
timed "rootfs.qcow2" make_disk

# 4. image.json, then publish atomically.
image_build_finish "$CMDLINE" \
  "Debian 12 (bookworm) with systemd, sudo, python3, curl, git and docker; the default"
