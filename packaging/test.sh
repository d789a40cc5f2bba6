#!/usr/bin/env bash
# README's second command (and CI's): installs what is needed, builds, and runs every
# test — unit, loopback integration and the formatting check — through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash packaging/install-deps.sh
bash packaging/build.sh
# Integration tests start their own servers on port 0; 2 parallel jobs fit a 2-core box.
ctest --test-dir build --output-on-failure -j2 --timeout 600
