#!/usr/bin/env bash
# Fails when any C++ file in the tree is not clang-format clean (repo .clang-format).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(find lobby keys vmhost bridge tests -name '*.cc' -o -name '*.h' | sort)
clang-format --dry-run --Werror "${files[@]}"
echo "check-format: ${#files[@]} files clean"
