#!/usr/bin/env bash
# boot_check.sh IMAGE_DIR: boots a built warren guest image under plain QEMU (TCG, no
# network) the way warren will: a qcow2 overlay on the read-only base, the per-VM seed disk,
# the control port as a virtio-serial port on a unix socket. Then, from the host, over that
# port only (ssh through `socat - UNIX-CONNECT:SOCK`, the host key pinned):
#   - `id; sudo -n true && echo sudo-ok; hostname` as dev, checked;
#   - the seed's env reaches sessions and its setup-script ran once as dev;
#   - sftp works;
#   - N back-to-back connections (default 20, BOOT_CHECK_CONNECTIONS) all succeed;
#   - `sudo poweroff` ends the VM cleanly.
# Prints boot-to-ssh time and the reconnect results. Everything it starts is killed at exit.
#
# Env: BOOT_CHECK_CONNECTIONS=N, BOOT_CHECK_TIMEOUT=seconds to wait for the first ssh
# (default 300), BOOT_CHECK_SEED_HOSTKEY=1 to hand the guest its host key in the seed
# instead of pinning the one it generates and announces on the console, BOOT_CHECK_KEEP=1
# to keep the work directory, BOOT_CHECK_MEMORY (MiB, default 1024).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=packaging/images/lib.sh
source "$REPO/packaging/images/lib.sh"

[[ $# -eq 1 ]] || die "usage: $0 IMAGE_DIR"
IMAGE=$(cd "$1" && pwd)
image_dir_ready "$IMAGE" || die "$IMAGE is not a finished image directory"
CONNECTIONS=${BOOT_CHECK_CONNECTIONS:-20}
FIRST_TIMEOUT=${BOOT_CHECK_TIMEOUT:-300}
MEMORY=${BOOT_CHECK_MEMORY:-1024}

if [[ $EUID -eq 0 ]]; then ensure_deps; fi
for t in qemu-system-x86_64 qemu-img socat ssh ssh-keygen sftp mke2fs; do
  command -v "$t" >/dev/null || die "$t is missing (packaging/images/deps.txt lists the packages)"
done

WORK=$(mktemp -d /tmp/warren-boot-check.XXXXXX)
chmod 0755 "$WORK"
QEMU_PID=""
cleanup() {
  local rc=$?
  if [[ -n $QEMU_PID ]] && kill -0 "$QEMU_PID" 2>/dev/null; then
    kill "$QEMU_PID" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$QEMU_PID" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$QEMU_PID" 2>/dev/null || true
  fi
  if ((rc != 0)) && [[ -f $WORK/console.log ]]; then
    echo "---- last console lines ----" >&2
    tail -n 30 "$WORK/console.log" | tr -d '\r' >&2 || true
  fi
  if [[ ${BOOT_CHECK_KEEP:-0} == 1 ]]; then
    echo "kept $WORK" >&2
  else
    rm -rf "$WORK"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

NAME=check-$(printf '%04x%04x' $RANDOM $RANDOM)
SOCK=$WORK/control.sock

# The host's control key and the seed pinning it.
ssh-keygen -q -t ed25519 -N '' -C warren-boot-check -f "$WORK/key"
mkdir "$WORK/seed"
cp "$WORK/key.pub" "$WORK/seed/authorized_keys"
# shellcheck disable=SC2016 # $HOME must reach the guest unexpanded
printf 'WARREN_CHECK=hello world\nWARREN_QUOTE=a"b\\c $HOME\n' >"$WORK/seed/env"
cat >"$WORK/seed/setup-script" <<'EOF'
#!/bin/sh
echo "setup ran as $(id -un) in $PWD with WARREN_CHECK=$WARREN_CHECK" >>"$HOME/setup-ran"
EOF
if [[ ${BOOT_CHECK_SEED_HOSTKEY:-0} == 1 ]]; then
  ssh-keygen -q -t ed25519 -N '' -C "root@$NAME" -f "$WORK/seed/ssh_host_ed25519_key"
  echo "$NAME $(cut -d ' ' -f 1,2 "$WORK/seed/ssh_host_ed25519_key.pub")" >"$WORK/known_hosts"
fi
"$REPO/packaging/images/make-seed.sh" "$WORK/seed" "$WORK/seed.img"

BASE_SIZE=$(qemu-img info --output=json "$IMAGE/rootfs.qcow2" | sed -n 's/.*"virtual-size": *\([0-9]*\).*/\1/p' | head -1)
OVERLAY_SIZE=$((BASE_SIZE > 4294967296 ? BASE_SIZE : 4294967296))
qemu-img create -q -f qcow2 -F qcow2 -b "$IMAGE/rootfs.qcow2" "$WORK/disk.qcow2" "$OVERLAY_SIZE"
CMDLINE=$(sed -n 's/^ *"kernel_cmdline": *"\(.*\)",\{0,1\}$/\1/p' "$IMAGE/image.json")
[[ -n $CMDLINE ]] || die "no kernel_cmdline in $IMAGE/image.json"
CMDLINE="$CMDLINE warren.hostname=$NAME"

log "booting $(basename "$IMAGE") as $NAME: $CMDLINE"
: >"$WORK/console.log"
T0=$EPOCHREALTIME
qemu-system-x86_64 -accel tcg -m "$MEMORY" -nographic -no-reboot \
  -kernel "$IMAGE/vmlinuz" -initrd "$IMAGE/initrd.img" -append "$CMDLINE" \
  -drive "file=$WORK/disk.qcow2,if=virtio,format=qcow2" \
  -drive "file=$WORK/seed.img,if=virtio,format=raw,readonly=on" \
  -device virtio-serial \
  -chardev "socket,id=c0,path=$SOCK,server=on,wait=off" \
  -device virtserialport,chardev=c0,name=warren.control \
  -device virtio-rng-pci \
  -nic none \
  </dev/null >>"$WORK/console.log" 2>&1 &
QEMU_PID=$!

elapsed() { awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}'; }
SSH=(ssh -F none -o BatchMode=yes -o IdentitiesOnly=yes -i "$WORK/key"
  -o UserKnownHostsFile="$WORK/known_hosts" -o StrictHostKeyChecking=yes -o HostKeyAlias="$NAME"
  -o LogLevel=ERROR -o ConnectTimeout=60 -o "ProxyCommand=socat - UNIX-CONNECT:$SOCK" "dev@$NAME")

# Pin the host key the guest announces on its console (unless the seed supplied one).
deadline=$((SECONDS + FIRST_TIMEOUT))
announced=""
while [[ -z $announced ]]; do
  kill -0 "$QEMU_PID" 2>/dev/null || die "QEMU exited during boot"
  ((SECONDS < deadline)) || die "no host key announced on the console in ${FIRST_TIMEOUT}s"
  announced=$(tr -d '\r' <"$WORK/console.log" | sed -n 's/^.*warren-hostkey: \(ssh-ed25519 [A-Za-z0-9+\/=]*\).*$/\1/p' | head -1)
  [[ -n $announced ]] || sleep 0.1
done
T_KEY=$(elapsed)
if [[ ${BOOT_CHECK_SEED_HOSTKEY:-0} == 1 ]]; then
  [[ "$NAME $announced" == "$(cat "$WORK/known_hosts")" ]] || die "guest announced $announced, not the seed's key"
else
  echo "$NAME $announced" >"$WORK/known_hosts"
fi

# First command: retried until the control sshd answers.
out=""
until out=$(timeout 90 "${SSH[@]}" 'id; sudo -n true && echo sudo-ok; hostname' 2>"$WORK/ssh.err"); do
  kill -0 "$QEMU_PID" 2>/dev/null || die "QEMU exited during boot"
  ((SECONDS < deadline)) || die "no ssh over the control port in ${FIRST_TIMEOUT}s: $(tail -n 3 "$WORK/ssh.err")"
  sleep 0.2
done
T_SSH=$(elapsed)
while IFS= read -r line; do echo "  guest: $line"; done <<<"$out"
grep -q '^uid=1000(dev) gid=1000(dev)' <<<"$out" || die "not running as dev (uid 1000)"
grep -qx 'sudo-ok' <<<"$out" || die "dev cannot sudo without a password"
grep -qx "$NAME" <<<"$out" || die "hostname is not $NAME"

# The seed's env and setup-script.
# shellcheck disable=SC2016 # expanded by the guest's shell
env_out=$(timeout 60 "${SSH[@]}" 'printf "%s|%s\n" "$WARREN_CHECK" "$WARREN_QUOTE"')
# shellcheck disable=SC2016 # the $HOME is literal in the seed's env file
[[ $env_out == 'hello world|a"b\c $HOME' ]] || die "env from the seed not applied: got [$env_out]"
setup_out=""
for _ in $(seq 1 120); do
  setup_out=$(timeout 60 "${SSH[@]}" 'cat /var/lib/warren/setup.status 2>/dev/null && cat ~/setup-ran' || true)
  [[ -n $setup_out ]] && break
  sleep 1
done
grep -qx '0' <<<"$setup_out" || die "setup-script did not finish with status 0: [$setup_out]"
grep -q '^setup ran as dev in /home/dev with WARREN_CHECK=hello world$' <<<"$setup_out" ||
  die "setup-script output unexpected: [$setup_out]"
[[ $(grep -c '^setup ran' <<<"$setup_out") -eq 1 ]] || die "setup-script ran more than once"

# sftp (the sftp-server subsystem).
echo "sftp payload" >"$WORK/up.txt"
timeout 60 sftp -q -b - -F none -o BatchMode=yes -o IdentitiesOnly=yes -i "$WORK/key" \
  -o UserKnownHostsFile="$WORK/known_hosts" -o StrictHostKeyChecking=yes -o HostKeyAlias="$NAME" \
  -o LogLevel=ERROR -o "ProxyCommand=socat - UNIX-CONNECT:$SOCK" "dev@$NAME" >/dev/null <<EOF
put $WORK/up.txt up.txt
get up.txt $WORK/down.txt
EOF
cmp -s "$WORK/up.txt" "$WORK/down.txt" || die "sftp round trip failed"

# Back-to-back connections: the launcher must serve every one (see warren-launcher.c).
ok=0
failed=0
TB=$EPOCHREALTIME
for _ in $(seq 1 "$CONNECTIONS"); do
  if timeout 60 "${SSH[@]}" true 2>>"$WORK/b2b.err"; then ok=$((ok + 1)); else failed=$((failed + 1)); fi
done
B2B=$(awk -v a="$TB" -v b="$EPOCHREALTIME" -v n="$CONNECTIONS" 'BEGIN {printf "%.1fs, %.2fs each", b - a, (b - a) / n}')

# Clean shutdown from inside.
timeout 60 "${SSH[@]}" 'sudo -n poweroff' >/dev/null 2>&1 || true
TP=$EPOCHREALTIME
for _ in $(seq 1 600); do kill -0 "$QEMU_PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$QEMU_PID" 2>/dev/null; then
  poweroff="did not power off within 60s"
else
  poweroff="powered off in $(awk -v a="$TP" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}')s"
  wait "$QEMU_PID" 2>/dev/null || true
  QEMU_PID=""
fi

echo "image:          $(basename "$IMAGE")"
echo "host key shown: ${T_KEY}s after QEMU start"
echo "boot-to-ssh:    ${T_SSH}s (first successful command over the control port)"
echo "back-to-back:   $ok/$CONNECTIONS ok ($B2B)"
echo "env, setup-script, sftp: ok"
echo "shutdown:       $poweroff"
((failed == 0)) || die "$failed of $CONNECTIONS back-to-back connections failed: $(sort "$WORK/b2b.err" | uniq -c | head -5)"
[[ -z $QEMU_PID ]] || die "the guest $poweroff"
echo "PASS"
