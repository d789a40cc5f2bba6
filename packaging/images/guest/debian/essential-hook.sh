#!/bin/sh
# mmdebstrap --essential-hook for the debian image: runs after the essential packages and
# before the rest (the kernel among them) are installed, so the kernel's own initrd build
# already uses this configuration. $1 is the image's root directory.
set -eu
root=$1
mkdir -p "$root/etc/initramfs-tools/conf.d" "$root/usr/share/initramfs-tools/modules.d"
# Only the listed modules (and their dependencies): a small initrd that unpacks fast under
# TCG. The root disk is virtio-blk on virtio-pci; ext4 is built into the cloud kernel.
cat >"$root/etc/initramfs-tools/conf.d/warren" <<'CONF'
MODULES=list
COMPRESS=zstd
CONF
printf '%s\n' virtio_pci virtio_blk virtio_console virtio_net >"$root/usr/share/initramfs-tools/modules.d/warren"
