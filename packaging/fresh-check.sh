#!/usr/bin/env bash
# Proves that README's two commands are all a fresh Debian 12 machine needs: builds a minimal
# Debian 12 tree (mmdebstrap --variant=apt: essential packages and apt, nothing else), puts a
# clean clone of this repository's HEAD in it, and runs, as root without sudo, README's first
# command (packaging/quickstart.sh), a first lobby command against the warren it started,
# then CI's entry point (.ci/run, with CI=true) — inside mount and PID namespaces whose root
# is the tree (pivot_root), with a fresh /run and /proc, the host's /dev and /sys, and the
# host's network (the registries).
# Nothing of the host leaks in: the tree's own libvirtd is the one used (the host's sockets
# live in the host's /run), and everything the tree started dies with its PID namespace.
#
#   packaging/fresh-check.sh [TREE]           the whole check (default TREE /var/tmp/warren-fresh)
#   packaging/fresh-check.sh --enter TREE CMD run CMD (bash -c) in the tree, in /root/warren,
#                                             e.g. to rerun failing tests after a full run
#
# The tree is kept between runs, with what the README commands installed in it; only a new
# tree (the first run, or WARREN_FRESH_REBUILD=1) proves a fresh machine. Each run clones
# HEAD anew. WARREN_FRESH_TREE_ONLY=1 only makes the tree. Needs root and about 15 GB.
# Output goes to stdout; the closing lines are ctest's summary.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

log() { printf '[fresh-check %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() {
  log "error: $*" >&2
  exit 1
}
[[ $EUID -eq 0 ]] || die "run as root (mmdebstrap, chroot and namespaces need it)"

# enter TREE SCRIPT: runs SCRIPT with bash in the tree, as a login shell of root would have it.
enter() {
  local tree=$1 script=$2
  # Inside new mount and PID namespaces (mounts private: nothing leaks to the host; the
  # tree's daemons die with its PID 1). /run is a fresh tmpfs, as after a boot.
  unshare --mount --pid --fork --propagation private -- bash -euo pipefail -c '
    tree=$1 script=$2
    shift 2
    trust_env=("$@")
    # The tree becomes the root of this mount namespace (pivot_root, as a container runtime
    # does; a chroot would leave / no mount point and the host'"'"'s mounts in mountinfo, which
    # libvirt'"'"'s per-VM /dev namespaces trip over).
    mount --bind "$tree" "$tree"
    mount -t proc proc "$tree/proc"
    mount --rbind /sys "$tree/sys"
    mount --rbind /dev "$tree/dev"
    mount -t tmpfs -o mode=0755 tmpfs "$tree/run"
    mkdir -p "$tree/run/lock" "$tree/mnt/.host"
    cd "$tree"
    pivot_root . mnt/.host
    # The tree may have no umount yet (util-linux'"'"'s mount package is not essential): run
    # the host'"'"'s, with the host'"'"'s loader and libraries, to detach the old root.
    h=/mnt/.host
    "$h/lib64/ld-linux-x86-64.so.2" --library-path "$h/lib/x86_64-linux-gnu:$h/usr/lib/x86_64-linux-gnu" \
      "$h/usr/bin/umount" -l "$h"
    cd /
    exec /usr/bin/env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash \
      TERM=dumb PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      CI=true ${WARREN_SSH_LISTEN:+WARREN_SSH_LISTEN=$WARREN_SSH_LISTEN} \
      ${WARREN_HTTP_LISTEN:+WARREN_HTTP_LISTEN=$WARREN_HTTP_LISTEN} "${trust_env[@]}" \
      bash -euo pipefail -c "cd /root/warren && $script"
  ' enter "$tree" "$script" "${trust_env[@]}"
}

# What every machine of this workplace comes with, so a new one has it too: the certificate
# authorities it trusts (a TLS-inspecting egress: npm fails without them), npm's global
# config naming the bundle, and the variables that point tools at it. No credentials: a
# user's ~/.npmrc is not copied.
trust_env=()
for v in NODE_EXTRA_CA_CERTS SSL_CERT_FILE SSL_CERT_DIR CURL_CA_BUNDLE REQUESTS_CA_BUNDLE; do
  [[ -n ${!v:-} ]] && trust_env+=("$v=${!v}")
done
machine_trust() {
  local tree=$1
  mkdir -p "$tree/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$tree/usr/local/share/ca-certificates/" 2>/dev/null || true
  if [[ -f /etc/npmrc ]]; then cp /etc/npmrc "$tree/etc/npmrc"; fi
  # Already installed (a reused tree): refresh its bundle; else ca-certificates' own
  # install does it.
  if [[ -x $tree/usr/sbin/update-ca-certificates ]]; then
    chroot "$tree" update-ca-certificates >/dev/null
  fi
}

if [[ ${1:-} == --enter ]]; then
  [[ $# -ge 3 ]] || die "usage: $0 --enter TREE CMD"
  enter "$2" "$3"
  exit
fi

tree=${1:-/var/tmp/warren-fresh}

if [[ ${WARREN_FRESH_REBUILD:-0} == 1 || ! -f $tree/etc/debian_version ]]; then
  command -v mmdebstrap >/dev/null || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap
  }
  rm -rf "$tree"
  log "building a Debian 12 tree in $tree (mmdebstrap --variant=apt)"
  # The archive the guest images use (packaging/images/lib.sh), overridable the same way.
  # shellcheck source=packaging/images/lib.sh
  source "$repo/packaging/images/lib.sh"
  mapfile -t sources < <(debian_sources)
  mmdebstrap --mode=root --quiet --variant=apt bookworm "$tree" "${sources[@]}"
  # What a machine's installer leaves: a name resolver and a host name.
  cp /etc/resolv.conf "$tree/etc/resolv.conf"
  echo warren-fresh >"$tree/etc/hostname"
  machine_trust "$tree"
else
  log "reusing the tree in $tree, with whatever earlier runs installed in it" \
    "(WARREN_FRESH_REBUILD=1 makes a new one)"
fi
machine_trust "$tree"
[[ ${WARREN_FRESH_TREE_ONLY:-0} == 1 ]] && exit 0

# A clean clone of HEAD (what is committed; nothing of this checkout's build or .peers).
log "cloning $(git -C "$repo" rev-parse --short HEAD) into $tree/root/warren"
rm -rf "$tree/root/warren"
git clone --quiet --no-hardlinks "$repo" "$tree/root/warren"
git -C "$tree/root/warren" checkout --quiet --detach "$(git -C "$repo" rev-parse HEAD)"

# quickstart's warren listens on 2222 and 8080 on the host's network: take others when
# something on the host already has those.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ssh_port=2222
http_port=8080
if ! port_free 2222; then ssh_port=$(free_port) && export WARREN_SSH_LISTEN=127.0.0.1:$ssh_port; fi
if ! port_free 8080; then http_port=$(free_port) && export WARREN_HTTP_LISTEN=127.0.0.1:$http_port; fi
log "quickstart's warren will listen on 127.0.0.1:$ssh_port (SSH) and :$http_port (HTTP)"

log "README's first command, then a lobby command, then .ci/run (CI=true)"
enter "$tree" "
  echo '== packaging/quickstart.sh'
  packaging/quickstart.sh
  echo '== ssh -p $ssh_port localhost whoami'
  ssh -o StrictHostKeyChecking=accept-new -o BatchMode=yes -p $ssh_port localhost whoami
  echo '== .ci/run'
  status=0
  bash .ci/run || status=\$?
  packaging/quickstart.sh stop
  exit \$status
"
