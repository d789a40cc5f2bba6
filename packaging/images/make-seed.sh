#!/usr/bin/env bash
# make-seed.sh SEED_DIR OUT.img: packs a per-VM seed directory into the small ext4 image a
# warren guest reads at boot (attach it read-only as a second virtio disk). No root and no
# mounts needed: it is one mke2fs call, which warren itself can run the same way:
#
#   mke2fs -q -F -t ext4 -O ^has_journal -L warren-seed -d SEED_DIR -E root_owner=0:0 OUT.img 4M
#
# SEED_DIR holds (see README.md): authorized_keys (required), hostname, env, setup-script,
# ssh_host_ed25519_key + .pub. Files only, each well under 4 MiB in total.
set -euo pipefail

[[ $# -eq 2 ]] || {
  echo "usage: $0 SEED_DIR OUT.img" >&2
  exit 2
}
dir=$1
out=$2
[[ -f $dir/authorized_keys ]] || {
  echo "make-seed: $dir/authorized_keys is missing" >&2
  exit 1
}
# Size: 4 MiB holds the documented files with room to spare; larger seeds grow with them.
kib=$(du -sk "$dir" | cut -f1)
size=$((kib * 2 + 1024))
((size >= 4096)) || size=4096
rm -f "$out"
# No journal: the guest mounts it read-only (-o ro,noload) from a read-only disk.
mke2fs -q -F -t ext4 -O ^has_journal -L warren-seed -d "$dir" -E root_owner=0:0 "$out" "${size}K" >/dev/null
