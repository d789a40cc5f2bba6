#!/bin/sh
# mmdebstrap --customize-hook for the debian image: turns the installed tree into a warren
# guest. Runs on the build host as root; $1 is the image's root directory, $2 the directory
# of packaging/images/guest, $3 the static warren-launcher binary, $4 the static warren-run.
set -eu
root=$1
guest=$2
launcher=$3
runner=$4
in_root() { chroot "$root" "$@"; }

# The user: dev (uid 1000), passwordless sudo, docker without sudo. "*" = no password but
# not locked (sshd refuses locked accounts outright).
in_root useradd --create-home --uid 1000 --user-group --shell /bin/bash \
  --groups sudo,docker --comment dev dev
in_root usermod --password '*' dev
echo 'dev ALL=(ALL:ALL) NOPASSWD: ALL' >"$root/etc/sudoers.d/warren-dev"
chmod 0440 "$root/etc/sudoers.d/warren-dev"

# warren's pieces: launcher, runner (apply-seed is the runner by that name), boot scripts,
# control sshd config, units.
install -m 0755 "$launcher" "$root/usr/sbin/warren-launcher"
mkdir -p "$root/usr/lib/warren" "$root/etc/warren" "$root/var/lib/warren"
install -m 0755 "$runner" "$root/usr/lib/warren/warren-run"
ln -sf warren-run "$root/usr/lib/warren/apply-seed"
for f in hostkeys run-setup setup-as-dev control; do
  install -m 0755 "$guest/common/$f" "$root/usr/lib/warren/$f"
done
install -m 0644 "$guest/common/sshd_config" "$root/etc/warren/sshd_config"
echo "# Generated at boot from /etc/warren/env by apply-seed." >"$root/etc/warren/sshd_env.conf"
for u in warren-seed.service warren-control.service warren-setup.service; do
  install -m 0644 "$guest/debian/$u" "$root/etc/systemd/system/$u"
done
in_root systemctl -q enable warren-seed.service warren-control.service warren-setup.service

# Networking: systemd-networkd + resolved, DHCP on any NIC, quiet when idle.
install -m 0644 "$guest/debian/80-warren-dhcp.network" "$root/etc/systemd/network/80-warren-dhcp.network"
mkdir -p "$root/etc/systemd/resolved.conf.d" "$root/etc/systemd/journald.conf.d" \
  "$root/etc/systemd/system/systemd-networkd-wait-online.service.d"
install -m 0644 "$guest/debian/resolved-warren.conf" "$root/etc/systemd/resolved.conf.d/warren.conf"
install -m 0644 "$guest/debian/journald-warren.conf" "$root/etc/systemd/journald.conf.d/warren.conf"
install -m 0644 "$guest/debian/wait-online-warren.conf" \
  "$root/etc/systemd/system/systemd-networkd-wait-online.service.d/warren.conf"
in_root systemctl -q enable systemd-networkd.service systemd-resolved.service
ln -sf ../run/systemd/resolve/stub-resolv.conf "$root/etc/resolv.conf"

# No background jobs that touch the network or the disk on their own.
in_root systemctl -q mask apt-daily.timer apt-daily-upgrade.timer apt-daily.service \
  apt-daily-upgrade.service man-db.timer e2scrub_all.timer e2scrub_reap.service \
  fstrim.timer dpkg-db-backup.timer systemd-timesyncd.service
# Boot work a VM without graphics, EFI or device mapper does not need; each is seconds of
# CPU under TCG. The modules still load on demand (modprobe, udev, autoload on open).
in_root systemctl -q mask modprobe@drm.service modprobe@efi_pstore.service \
  modprobe@dm_mod.service modprobe@loop.service modprobe@fuse.service \
  modprobe@configfs.service sys-kernel-config.mount systemd-pstore.service \
  systemd-binfmt.service
# No VGA console: the serial console (console=ttyS0) gets its getty from the generator.
in_root systemctl -q disable getty@tty1.service
# Docker starts on first use (docker.socket), not at boot; containerd comes with it.
in_root systemctl -q disable docker.service containerd.service 2>/dev/null
in_root systemctl -q enable docker.socket
# The only way in is the control port; the stock sshd on port 22 stays off (enable it with
# `systemctl enable --now ssh` if wanted). Its host keys were made at package install time,
# i.e. shared by every VM: gone, each VM makes its own at first boot.
in_root systemctl -q disable ssh.service 2>/dev/null
rm -f "$root"/etc/ssh/ssh_host_*

# Root on the first virtio disk, mounted read-write by the initramfs (rw on the kernel
# command line; no fsck pass at boot: the journal covers crashes and a check costs seconds
# under TCG), grown at boot to whatever size the VM's disk has.
cat >"$root/etc/fstab" <<'FSTAB'
# <file system> <mount point> <type> <options> <dump> <pass>
/dev/vda / ext4 defaults,x-systemd.growfs 0 0
FSTAB

# Per-VM identity is made at first boot: machine-id (systemd), hostname (apply-seed).
echo uninitialized >"$root/etc/machine-id"
rm -f "$root/var/lib/dbus/machine-id"
echo warren >"$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"

# First boot would otherwise rebuild the hwdb and the linker cache (ConditionNeedsUpdate),
# seconds under TCG: build them now and mark /etc and /var up to date with /usr.
# Whole seconds on both sides: mke2fs -d and systemd's nanosecond rules then agree.
in_root systemd-hwdb update
in_root ldconfig
now=$(date +%s)
touch -d "@$now" "$root/usr" "$root/etc/.updated" "$root/var/.updated"

# Leave no build leftovers.
rm -rf "$root"/var/log/*.log "$root"/var/log/apt/* "$root"/tmp/* "$root"/var/tmp/*
