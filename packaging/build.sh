#!/usr/bin/env bash
# Configures and builds warren into build/ (build/warren). Usage: packaging/build.sh [cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build build -j"$(nproc)"
