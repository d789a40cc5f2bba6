#!/usr/bin/env bash
# build-tiny.sh OUT_DIR [VERSION]: builds the "tiny" guest image into OUT_DIR/tiny@VERSION/
# (vmlinuz, initrd.img, rootfs.qcow2, image.json) for fast tests: Debian's cloud kernel, a
# busybox initrd that loads the virtio modules, and a small ext4 root with busybox, OpenSSH
# (sshd, sftp-server, ssh-keygen), sudo, the control-port launcher and the guest runner
# (apply-seed). Everything else comes from Debian's packages (extracted, never installed);
# no loop mounts.
#
# Idempotent: an existing OUT_DIR/tiny@VERSION is left alone (VMs may be using it as their
# base) unless WARREN_IMAGE_FORCE=1. Downloaded .debs are kept in OUT_DIR/.cache/debs.
set -euo pipefail
# shellcheck source=packaging/images/lib.sh
source "$(dirname "$0")/lib.sh"

CMDLINE="console=ttyS0 root=/dev/vda rw quiet"
# Loaded by the initrd, in dependency order. ext4 is built into the cloud kernel.
MODULES=(virtio_pci virtio_blk virtio_console virtio_net virtio_rng virtio_balloon button evdev)

image_build_begin tiny "$@"
DONOR=$WORK/donor
ROOT=$WORK/root
mkdir -p "$ROOT"

# 1. Every package the image takes files from, extracted (not installed) into a donor tree.
timed "download+extract debs" mmdebstrap_cached "$DEB_CACHE" "$DONOR" \
  --variant=extract \
  --include=busybox-static,openssh-server,openssh-sftp-server,openssh-client,sudo,libpam-modules,e2fsprogs,linux-image-cloud-amd64

kvers=("$DONOR"/lib/modules/*)
((${#kvers[@]} == 1)) || die "expected one kernel in the donor, found ${#kvers[@]}"
KVER=$(basename "${kvers[0]}")
MODDIR=$DONOR/lib/modules/$KVER
log "kernel $KVER"

# 2. The root file system tree (merged /usr, like Debian 12).
make_root() {
  cd "$ROOT"
  mkdir -p usr/bin usr/sbin usr/lib usr/lib64 etc/warren etc/ssh etc/pam.d etc/acpi/PWRF \
    dev proc sys run tmp mnt root home/dev var/log var/lib/warren var/tmp usr/share/udhcpc \
    usr/lib/warren/tiny usr/local/bin
  ln -s usr/bin bin
  ln -s usr/sbin sbin
  ln -s usr/lib lib
  ln -s usr/lib64 lib64
  chmod 1777 tmp var/tmp
  chmod 0700 root

  # busybox and its applets (the applets never shadow a real program we copy in).
  cp "$DONOR/bin/busybox" usr/bin/busybox
  local a dst
  while read -r a; do
    dst=.$(usr_path "/$a")
    [[ -e $dst || -L $dst ]] || ln -s /usr/bin/busybox "$dst"
  done < <("$DONOR/bin/busybox" --list-full)

  # OpenSSH, sudo, resize2fs with their libraries; PAM modules for sudo's PAM calls.
  install_from_donor "$DONOR" "$ROOT" \
    /usr/sbin/sshd /usr/bin/ssh-keygen /usr/lib/openssh/sftp-server \
    /usr/bin/sudo /usr/libexec/sudo/sudoers.so /sbin/resize2fs \
    /lib/x86_64-linux-gnu/security/pam_permit.so /lib/x86_64-linux-gnu/security/pam_deny.so

  build_launcher usr/sbin/warren-launcher
  build_runner usr/lib/warren/warren-run
  ln -s warren-run usr/lib/warren/apply-seed
  cp "$GUEST_DIR"/common/{hostkeys,run-setup,setup-as-dev,control} usr/lib/warren/
  cp "$GUEST_DIR"/tiny/{rc.sysinit,rc.firstboot,rc.shutdown} usr/lib/warren/tiny/
  cp "$GUEST_DIR/tiny/inittab" etc/inittab
  cp "$GUEST_DIR/tiny/udhcpc.script" usr/share/udhcpc/default.script
  cp "$GUEST_DIR/common/sshd_config" etc/warren/sshd_config
  echo "# Generated at boot from /etc/warren/env by apply-seed." >etc/warren/sshd_env.conf

  cat >etc/passwd <<'EOF'
root:x:0:0:root:/root:/bin/sh
sshd:x:100:65534::/run/sshd:/usr/sbin/nologin
dev:x:1000:1000:dev:/home/dev:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
EOF
  # "*": no password, but not locked (sshd without PAM refuses locked accounts, even by key).
  cat >etc/shadow <<'EOF'
root:*:19700:0:99999:7:::
sshd:*:19700:0:99999:7:::
dev:*:19700:0:99999:7:::
nobody:*:19700:0:99999:7:::
EOF
  cat >etc/group <<'EOF'
root:x:0:
tty:x:5:
sudo:x:27:dev
shadow:x:42:
dev:x:1000:
nogroup:x:65534:
EOF
  chmod 0640 etc/shadow
  chgrp 42 etc/shadow
  printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n' >etc/nsswitch.conf
  printf '/bin/sh\n/bin/ash\n' >etc/shells
  echo warren >etc/hostname
  printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >etc/hosts
  cat >etc/profile <<'EOF'
export PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin
PS1='\u@\h:\w\$ '
EOF
  cat >etc/os-release <<EOF
PRETTY_NAME="warren tiny $VERSION (Debian $DEBIAN_SUITE packages)"
NAME="warren tiny"
ID=warren-tiny
ID_LIKE=debian
VERSION_ID="$VERSION"
EOF
  # sudo: dev may do anything without a password. PAM is only asked for its account and
  # session steps, which are switched off; the auth stack denies, so no other path exists.
  cat >etc/sudoers <<'EOF'
Defaults !pam_session, !pam_setcred, !pam_acct_mgmt, !lecture
Defaults secure_path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
root ALL=(ALL:ALL) ALL
dev ALL=(ALL:ALL) NOPASSWD: ALL
EOF
  chmod 0440 etc/sudoers
  printf 'auth required pam_deny.so\naccount required pam_permit.so\nsession required pam_permit.so\npassword required pam_deny.so\n' >etc/pam.d/sudo
  printf 'auth required pam_deny.so\naccount required pam_deny.so\nsession required pam_deny.so\npassword required pam_deny.so\n' >etc/pam.d/other
  # ACPI power button (virsh shutdown) -> clean poweroff, through busybox acpid.
  printf '#!/bin/sh\nexec /sbin/poweroff\n' >etc/acpi/PWRF/00000080
  chmod 0755 etc/acpi/PWRF/00000080
  echo "PWRF PWRF/00000080" >etc/acpid.conf

  chown -R 0:0 .
  chown 1000:1000 home/dev
  chmod 0755 home/dev
  chmod 4755 usr/bin/sudo # after the chown, which clears set-uid bits
  cd - >/dev/null
}
timed "root tree" make_root

# 3. The initrd: static busybox, the modules and /init.
timed "initrd" make_initrd "$MODDIR" "$DONOR/bin/busybox" "$IMG/initrd.img" "${MODULES[@]}"

# 4. ext4 from the tree (no mounts), then the read-only qcow2 base.
make_disk() {
  local used size
  used=$(du -sm "$ROOT" | cut -f1)
  size=$((used * 3 / 2 + 64))
  ((size >= 128)) || size=128
  make_rootfs_qcow2 "$ROOT" "$size"
}
timed "rootfs.qcow2" make_disk

cp "$DONOR/boot/vmlinuz-$KVER" "$IMG/vmlinuz"

# 5. image.json, then publish atomically.
image_build_finish "$CMDLINE" \
  "busybox, OpenSSH and sudo on Debian's cloud kernel, no systemd; boots in seconds, for tests"
