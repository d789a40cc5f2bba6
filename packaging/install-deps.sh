#!/usr/bin/env bash
# Installs every Debian package warren's build, tests and benchmarks need, on Debian 12.
# Idempotent. Services in the packages (sshd, ...) are NOT started: warren's tests run
# their own copies on loopback.
set -euo pipefail

if [[ $EUID -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "$0: run this as root" >&2; exit 1; }
  exec sudo -E bash "$0" "$@"
fi

BUILD_PKGS=(
  build-essential cmake ninja-build pkg-config clang-format
  libssh-dev liblmdb-dev libssl-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libboost1.81-dev libvirt-dev libxml2-dev
)
# What runs VMs: libvirt's daemons (warren starts them itself) and QEMU; nftables for the
# rules that keep guests off the host (vmhost/egress_firewall.h: serve refuses VMs without).
RUN_PKGS=(
  libvirt-daemon-system qemu-system-x86 qemu-utils e2fsprogs nftables
)
# What builds the guest images (packaging/images/deps.txt, one package a line).
mapfile -t IMAGE_PKGS < <(grep -v '^\s*\(#\|$\)' "$(dirname "$0")/images/deps.txt")
# Every peer and tool a test drives: under CI a test whose peer is missing fails, it does not
# skip (tests/unit/skip_or_fail.h, tests/integration/warren_harness.py).
TEST_PKGS=(
  openssh-client openssh-server python3 python3-paramiko expect curl
  socat        # the local sshd target of the GuestControl tests (tests/unit/guest_test_targets.cc)
  python3-libvirt  # virDomainOpenChannel in tests/bench/remote_channel.py (issue 18)
  openssl      # a self-signed certificate for HTTPS (tests/integration/test_http_exec.py)
  dropbear-bin # dbclient, an independent SSH client (test_ssh_lobby.py); starts no server
  putty-tools  # plink and puttygen, another one (test_ssh_lobby.py)
  chromium     # the OAuth sign-in page rendered headless (tests/integration/test_oauth_page.py)
  ca-certificates  # npm fetches the MCP peers over HTTPS (packaging/install-peers.sh)
  iptables     # the guest endpoint's iptables redirect, run in a namespace (EndpointRedirectTest)
  iproute2     # ip netns: the namespaces of the isolation and guest-endpoint tests (outside_net.py)
  clang libclang-rt-14-dev  # the libFuzzer targets with ASan and UBSan (tests/fuzz/run.sh)
  debhelper lintian  # the Debian package's build and check (tests/packaging/deb_test.sh)
  systemd      # systemd-analyze verify on warren.service (tests/packaging); not started
)
# npm installs the MCP peers (packaging/install-peers.sh). A machine whose Node.js comes
# from elsewhere (NodeSource's nodejs bundles npm) cannot take Debian's npm, which needs
# Debian's nodejs: ask for the package only when there is no npm at all.
if ! command -v npm >/dev/null 2>&1; then TEST_PKGS+=(npm); fi

missing=()
for p in "${BUILD_PKGS[@]}" "${RUN_PKGS[@]}" "${IMAGE_PKGS[@]}" "${TEST_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
# Keep package scripts from starting daemons (openssh-server would listen on every
# interface): policy-rc.d exiting 101 forbids it. Restore whatever was there before.
policy=/usr/sbin/policy-rc.d
saved=""
if [[ -e $policy ]]; then saved=$(mktemp) && cp -p "$policy" "$saved"; fi
trap 'if [[ -n $saved ]]; then mv "$saved" "$policy"; else rm -f "$policy"; fi' EXIT
printf '#!/bin/sh\nexit 101\n' >"$policy"
chmod +x "$policy"

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
