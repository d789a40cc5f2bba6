#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/README.md) in their own clang build dir and runs
# each for a bounded time or number of executions: first its regression inputs
# (tests/fuzz/regressions/NAME/, each must pass), then fuzzing from its seed corpus
# (tests/fuzz/corpus/NAME/, read-only) and a work corpus kept in the build dir between runs.
# Prints per target: executions, exec/s, crashes, corpus size and any crash file; a crash is
# minimized into tests/fuzz/regressions/NAME/ (to commit with its fix). Exits 1 on any crash,
# 77 (CTest: skipped) when clang or libFuzzer is missing, unless CI is set: then that fails.
#
#   tests/fuzz/run.sh [--seconds S | --execs N] [--jobs J] [--build-dir DIR] [--no-build] [NAME...]
#
# Defaults: 30 seconds per target, one target at a time, build-fuzz/ beside build/. Compiles
# take the shared build lock ($WARREN_BUILD_LOCK, default /tmp/warren-build.lock) and run at
# nice 19: under `ctest -j4` they use what the guest tests beside them leave idle.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
here=$repo/tests/fuzz

limit=(-max_total_time=30)
jobs=1
build_dir=$repo/build-fuzz
build=1
targets=()
while (($#)); do
  case $1 in
    --seconds) limit=(-max_total_time="$2"); shift 2 ;;
    --execs) limit=(-runs="$2"); shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <(cd "$here" && ls fuzz_*.cc | sed 's/^fuzz_//; s/\.cc$//')
fi

missing() {
  echo "run.sh: $1 (packaging/install-deps.sh installs it)" >&2
  if [[ -n ${CI:-} ]]; then exit 1; fi
  echo "run.sh: skipped" >&2
  exit 77
}

# The toolchain: Debian's clang and its libFuzzer runtime (libclang-rt-14-dev).
command -v clang++ >/dev/null || missing "no clang++"
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }\n' \
  >"$probe/p.cc"
clang++ -fsanitize=fuzzer,address,undefined "$probe/p.cc" -o "$probe/p" 2>/dev/null ||
  missing "clang++ cannot link -fsanitize=fuzzer (libFuzzer missing)"

if ((build)); then
  started=$SECONDS
  # build.ninja is what cmake writes last: a configure cut short (a killed run) leaves a
  # CMakeCache.txt without it, and is configured again.
  if [[ ! -f $build_dir/build.ninja ]]; then
    # -O1 and line tables: fast enough to fuzz, quick to build, readable stack traces.
    # Without NDEBUG, so assertions hold while fuzzing. WARREN_CLANG_OPT=-O0 (as CTest runs
    # it: a third less compile time, fewer executions a second) replaces -O1 at the first
    # configure of the build dir.
    cmake -S "$repo" -B "$build_dir" -G Ninja -DWARREN_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=${WARREN_CLANG_OPT:--O1} -gline-tables-only" \
      >/dev/null
  fi
  flock "${WARREN_BUILD_LOCK:-/tmp/warren-build.lock}" \
    nice -n 19 cmake --build "$build_dir" -j"$(nproc)" --target "${targets[@]/#/fuzz_}" >"$build_dir/fuzz-build.log" 2>&1 ||
    { tail -40 "$build_dir/fuzz-build.log" >&2; echo "run.sh: build failed" >&2; exit 1; }
  echo "run.sh: built ${#targets[@]} targets in $((SECONDS - started)) s"
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
results=$build_dir/fuzz-results
mkdir -p "$results"

# run_target NAME: replays, fuzzes, minimizes; writes one result line to $results/NAME.
run_target() {
  local name=$1 bin=$build_dir/tests/fuzz/fuzz_$1
  local work=$build_dir/corpus/$name artifacts=$build_dir/artifacts/$name
  local log=$results/$name.log regressions=$here/regressions/$name
  mkdir -p "$work" "$artifacts"
  rm -f "$artifacts"/*
  local dict=()
  [[ -f $here/dict/$name.dict ]] && dict=(-dict="$here/dict/$name.dict")
  local crashes=0 files=() execs=0 rate=0 status=ok
  if [[ -d $regressions ]] && compgen -G "$regressions/*" >/dev/null; then
    if ! "$bin" "$regressions"/* >"$results/$name.replay.log" 2>&1; then
      echo "$name - - regression - $results/$name.replay.log" >"$results/$name"
      return
    fi
  fi
  "$bin" "${limit[@]}" -print_final_stats=1 -timeout=25 -rss_limit_mb=2048 "${dict[@]}" \
    -artifact_prefix="$artifacts/" "$work" "$here/corpus/$name" >"$log" 2>&1 || status=crash
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  for f in "$artifacts"/*; do
    [[ -e $f ]] || continue
    crashes=$((crashes + 1))
    mkdir -p "$regressions"
    local kept=$regressions/$(basename "$f")
    # The smallest input that still crashes, kept as a regression test.
    "$bin" -minimize_crash=1 -max_total_time=60 -exact_artifact_path="$kept" "$f" \
      >"$log.minimize" 2>&1 || true
    [[ -f $kept ]] || cp "$f" "$kept"
    files+=("$kept")
  done
  if [[ $status == crash && $crashes == 0 ]]; then crashes=1 files=("$log"); fi
  local corpus
  corpus=$(find "$work" -type f | wc -l)
  echo "$name ${execs:-0} ${rate:-0} $crashes $corpus ${files[*]:-}" >"$results/$name"
}

running=0
for t in "${targets[@]}"; do
  [[ -x $build_dir/tests/fuzz/fuzz_$t ]] || { echo "run.sh: no target $t" >&2; exit 2; }
  rm -f "$results/$t"
  run_target "$t" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n
    running=$((running - 1))
  fi
done
wait

failed=0
printf '%-16s %12s %8s %8s %8s  %s\n' target executions exec/s crashes corpus "crash files"
for t in "${targets[@]}"; do
  read -r name execs rate crashes corpus files <"$results/$t"
  printf '%-16s %12s %8s %8s %8s  %s\n' "$name" "$execs" "$rate" "$crashes" "$corpus" "$files"
  [[ $crashes == 0 ]] || failed=1
done
if ((failed)); then
  echo "run.sh: crashes found; each minimized input is in tests/fuzz/regressions/NAME/" >&2
  exit 1
fi
