#!/usr/bin/env bash
# Builds the unit tests under sanitizers and runs them (tests/sanitizers/README.md).
#   asan  AddressSanitizer + LeakSanitizer + UBSan, no recovery (any finding fails): every
#         unit binary of tests/unit but those that boot guests, built in build-fuzz/, whose
#         libraries the fuzz targets already need instrumented the same way (compiled once).
#   tsan  ThreadSanitizer: the threaded units, in build-tsan/ (clang, -fsanitize=thread),
#         with tests/sanitizers/tsan.supp (uninstrumented libraries' internals only).
# Each binary runs once, all its tests in one process, --jobs at a time. Prints per binary
# its tests, seconds, sanitizer findings and verdict, then the build and run seconds. Exits 1
# on any finding or failed test, 77 (CTest: skipped) without clang or the sanitizer's
# runtime, which under CI fails instead.
#
#   tests/sanitizers/run.sh [--jobs J] [--build-dir DIR] [--no-build] asan|tsan [BINARY...]
#
# Compiles take the shared build lock ($WARREN_BUILD_LOCK, default /tmp/warren-build.lock)
# and run at nice 19 (under `ctest -j4` they use what the guest tests beside them leave idle).
# Logs: DIR/sanitize-results/BINARY.log.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
here=$repo/tests/sanitizers

jobs=1
build_dir=
build=1
kind=
only=()
while (($#)); do
  case $1 in
    --jobs) jobs=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    asan | tsan) kind=$1; shift ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) only+=("$1"); shift ;;
  esac
done
[[ -n $kind ]] || { echo "run.sh: say asan or tsan" >&2; exit 2; }

# ---- What runs. Every add_executable of tests/unit/*.cmake is either run under ASan+UBSan
# or listed in `not_asan` with its reason, or this script fails: a new unit binary is
# sanitized the day it is added.
asan_units=(base_test ssh_server_test keys_test vmhost_xml_test save_image_test egress_firewall_test vmhost_test
  bridge_test mcp_test oauth_test cmd_oauth_test ssh_unit_test
  relay_test integrations_test web_test guest_protocol_test guest_runner_test guest_local_test
  guest_identity_test guest_identity_runner_test guest_seed_runner_test guest_endpoint_local_test
  guest_endpoint_setup_test reconnector_test serve_config_test host_load_test host_flags_test
  warm_memory_test)
declare -A not_asan=(
  [libvirt_remote_host_test]="boots tiny guests on a second libvirtd over qemu+ssh/tls (CTest vm_remote_libvirt_host, label vm)"
  [libvirt_channel_test]="boots a tiny guest on the local libvirtd (CTest libvirt_channel, label qemu); test_second_host runs it against the second host"
  [guest_vm_test]="boots a tiny guest under QEMU (CTest guest_vm, label qemu)"
  [guest_identity_vm_test]="boots a tiny guest under QEMU (CTest guest_identity_vm, label qemu)"
  [guest_endpoint_vm_test]="boots debian and tiny guests under QEMU (label qemu)"
  [guest_exec_bench]="a benchmark that boots its own guest, not a test"
  [commands_test]="CI's budget: the interpreter it drives runs under ASan+UBSan in the fuzz target command_line"
  [scope_matrix_test]="CI's budget: 4095 cells over the interpreter, which the fuzz target command_line sanitizes"
)
# The threaded units: the SSH server's listener, connection threads and workers
# (ssh_server_test), the lobby's channel hand-off (ssh_unit_test), SshGuestControl's owner
# thread against a local sshd (guest_local_test) and its remote forwards into the
# integrations proxy (guest_endpoint_local_test), the HTTP server's I/O and handler threads
# over the real interpreter and LMDB store (bridge_test), the event waker. Left out for the CI
# budget: vmhost_test (the state delivery thread; would compile libvirt's library under TSan
# too), keys_test (ten more sources; bridge_test already has the store used from many
# threads), web_test and integrations_test (the web and integrations proxies' libraries and
# warren_relay under TSan: ~150 s more to build; both ran clean under TSan on 2026-12-03).
tsan_units=(ssh_server_test ssh_unit_test guest_local_test guest_endpoint_local_test bridge_test
  base_test)
# Tests left out of a binary that runs: they need the real libvirtd and a guest image.
declare -A filter=(
  [vmhost_test]="-RealHostTest.*:All/VmHostContractTest.*/Libvirt:LibvirtHostLimitsTest.*"
)
# Seconds one binary may run before it counts as hung.
per_binary_timeout=${WARREN_SANITIZE_BINARY_TIMEOUT:-420}

missing() {
  echo "run.sh: $1 (packaging/install-deps.sh installs it)" >&2
  if [[ -n ${CI:-} ]]; then exit 1; fi
  echo "run.sh: skipped" >&2
  exit 77
}

if [[ $kind == asan ]]; then
  listed=$(sed -n 's/^add_executable(\([A-Za-z0-9_]*\).*/\1/p' "$repo"/tests/unit/*.cmake | sort -u)
  # A set, not `printf ... | grep -q`: grep -q exits at its first match, and under pipefail
  # the printf still writing into the closed pipe failed the whole check now and then.
  declare -A in_asan=()
  for b in "${asan_units[@]}"; do in_asan[$b]=1; done
  for b in $listed; do
    if [[ -z ${not_asan[$b]+x} && -z ${in_asan[$b]+x} ]]; then
      echo "run.sh: unit binary $b is neither in asan_units nor in not_asan (with a reason)" >&2
      exit 1
    fi
  done
  units=("${asan_units[@]}")
  flags=-fsanitize=address,undefined
  build_dir=${build_dir:-$repo/build-fuzz}
else
  units=("${tsan_units[@]}")
  flags=-fsanitize=thread
  build_dir=${build_dir:-$repo/build-tsan}
fi
if ((${#only[@]})); then units=("${only[@]}"); fi

# The toolchain: Debian's clang and the sanitizer's runtime (libclang-rt-14-dev), which must
# also run here (TSan refuses some address-space layouts).
command -v clang++ >/dev/null || missing "no clang++"
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <thread>\nint main() { std::thread([] {}).join(); return 0; }\n' >"$probe/p.cc"
clang++ $flags "$probe/p.cc" -o "$probe/p" 2>/dev/null || missing "clang++ cannot link $flags"
"$probe/p" >/dev/null 2>&1 || missing "a program built with $flags does not run here"

build_seconds=0
if ((build)); then
  started=$SECONDS
  if [[ $kind == tsan ]]; then
    # TSan's missing pthread_mutex_clocklock (std::timed_mutex), supplied: see the file. It
    # goes into every executable, CMake's own compiler probe included, so it exists before
    # the configure step.
    mkdir -p "$build_dir"
    clang++ -O1 -c "$here/tsan_clocklock.cc" -o "$build_dir/tsan_clocklock.o"
  fi
  # build.ninja is what cmake writes last: a configure cut short (a killed run) leaves a
  # CMakeCache.txt without it, and is configured again.
  if [[ ! -f $build_dir/build.ninja ]]; then
    if [[ $kind == asan ]]; then
      # Exactly tests/fuzz/run.sh's configuration (keep the two alike): one build dir serves
      # both. -O1 (WARREN_CLANG_OPT) and line tables; assertions on; ASan+UBSan (and fuzzer
      # coverage, which the units do not use) on every library, -fno-sanitize-recover=all.
      cmake -S "$repo" -B "$build_dir" -G Ninja -DWARREN_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=${WARREN_CLANG_OPT:--O1} -gline-tables-only" \
        >/dev/null
    else
      cmake -S "$repo" -B "$build_dir" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=${WARREN_CLANG_OPT:--O1} -gline-tables-only" \
        "-DCMAKE_CXX_FLAGS=-fsanitize=thread -fno-omit-frame-pointer" \
        "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread $build_dir/tsan_clocklock.o" >/dev/null
    fi
  fi
  flock "${WARREN_BUILD_LOCK:-/tmp/warren-build.lock}" \
    nice -n 19 cmake --build "$build_dir" -j"$(nproc)" --target "${units[@]}" \
    >"$build_dir/sanitize-$kind-build.log" 2>&1 ||
    { tail -40 "$build_dir/sanitize-$kind-build.log" >&2; echo "run.sh: build failed" >&2; exit 1; }
  build_seconds=$((SECONDS - started))
  echo "run.sh: $kind: built ${#units[@]} unit binaries in $build_seconds s"
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-suppressions=$here/tsan.supp:second_deadlock_stack=1:history_size=4}
results=$build_dir/sanitize-results
mkdir -p "$results"

# run_unit NAME: runs one binary; writes "NAME tests seconds findings verdict" to $results/NAME.
run_unit() {
  local name=$1 bin=$build_dir/tests/$1 log=$results/$1.log
  local args=() status=0 began=$SECONDS
  [[ -n ${filter[$name]:-} ]] && args=(--gtest_filter="${filter[$name]}")
  # From the binary's own directory, as CTest runs it.
  (cd "$build_dir/tests" && timeout --kill-after=10 "$per_binary_timeout" "$bin" "${args[@]}") \
    >"$log" 2>&1 || status=$?
  local seconds=$((SECONDS - began))
  local tests findings verdict=ok
  tests=$(sed -n 's/^\[==========\] \([0-9]*\) tests\{0,1\} from .* ran\..*/\1/p' "$log" | tail -1)
  findings=$(grep -cE '^SUMMARY: (Address|Leak|UndefinedBehavior|Thread)Sanitizer' "$log" || true)
  if ((findings > 0)); then
    verdict=finding
  elif ((status == 124 || status == 137)); then
    verdict=timeout
  elif ((status != 0)); then
    verdict=failed
  elif grep -q '^\[  SKIPPED \] [0-9]' "$log" && [[ -n ${CI:-} ]]; then
    verdict=skipped  # under CI a skip is a test that did not run
  fi
  echo "$name ${tests:-?} $seconds $findings $verdict" >"$results/$name"
}

started=$SECONDS
running=0
for u in "${units[@]}"; do
  [[ -x $build_dir/tests/$u ]] || { echo "run.sh: no binary $build_dir/tests/$u" >&2; exit 2; }
  rm -f "$results/$u"
  run_unit "$u" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n
    running=$((running - 1))
  fi
done
wait
run_seconds=$((SECONDS - started))

failed=0
printf '%-28s %6s %8s %9s  %s\n' binary tests seconds findings verdict
for u in "${units[@]}"; do
  read -r name tests seconds findings verdict <"$results/$u"
  printf '%-28s %6s %8s %9s  %s\n' "$name" "$tests" "$seconds" "$findings" "$verdict"
  if [[ $verdict != ok ]]; then
    failed=1
    echo "    log: $results/$u.log"
  fi
done
echo "run.sh: $kind: build $build_seconds s, run $run_seconds s (${#units[@]} binaries, $jobs at a time)"
if ((failed)); then
  # The first report of each failing binary, so CTest's output shows what was found.
  for u in "${units[@]}"; do
    read -r name tests seconds findings verdict <"$results/$u"
    [[ $verdict == ok ]] && continue
    echo "---- $name ($verdict): $results/$u.log" >&2
    grep -m1 -A40 -E '^(==[0-9]+==ERROR|WARNING: ThreadSanitizer|.*runtime error:)' "$results/$u.log" >&2 ||
      grep -E '^\[  FAILED  \]|Failure$' "$results/$u.log" | head -20 >&2 || true
  done
  exit 1
fi
