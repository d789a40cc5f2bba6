#!/usr/bin/env bash
# README's second command (and CI's): installs what is needed, builds, and runs every
# test — unit, loopback integration, the formatting and layering checks — through CTest.
# Run it as root or with sudo (the image builds and the VM tests need root). With CI set, a
# test whose peer, tool or image is missing fails instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $EUID -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "$0: run this as root" >&2; exit 1; }
  exec sudo -E bash "$0" "$@"
fi

# Each step's seconds, for CI's budget (90 minutes on 2 cores).
began=$SECONDS
step() {
  echo "[test.sh $(date +%H:%M:%S)] $1 took $((SECONDS - began)) s" >&2
  began=$SECONDS
}
bash packaging/install-deps.sh
step install-deps
# The MCP peers the tests drive (official SDK client, Inspector, conformance suite), pinned.
bash packaging/install-peers.sh
step install-peers
bash packaging/build.sh
step build

# Guest images for the real-QEMU tests. Idempotent: an image of today's version is kept, and
# downloaded packages are cached, so reruns on the same machine are quick.
export WARREN_TEST_IMAGES=${WARREN_TEST_IMAGES:-/var/lib/warren-test/images}
bash packaging/images/build-tiny.sh "$WARREN_TEST_IMAGES"
bash packaging/images/build-debian.sh "$WARREN_TEST_IMAGES"
step images
# Integration tests start their own servers on port 0. Four slots on a 2-core box: two guest
# lanes and two niced clang builds (tests/CMakeLists.txt, "Scheduling").
status=0
ctest --test-dir build --output-on-failure -j4 --timeout 600 || status=$?
step ctest
exit $status
