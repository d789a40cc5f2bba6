#!/usr/bin/env bash
# Configures and builds warren into build/ (build/warren). Usage: packaging/build.sh [cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."
# Optimized, with line tables (-g1: file:line in backtraces and gdb) rather than full debug
# info (-g), which doubles the compile time of the heavier sources and makes every binary
# 200 MB: on a 2-core CI machine that is about a third of the suite's build.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "$@" >/dev/null
cmake --build build -j"$(nproc)"
