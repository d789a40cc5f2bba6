# The suite's bounded fuzz step (tests/fuzz/README.md has the budget): builds build-fuzz/ with
# clang if needed (niced; -O0, for CI's compile time), replays every regression input, then
# fuzzes each target for 30 s, one at a time; fails on any crash, and on a missing clang or
# libFuzzer under CI. It holds `clang_fuzz` (tests/CMakeLists.txt) with sanitize_asan_ubsan,
# which shares build-fuzz/ with it: one slot of `ctest -j4`.
add_test(NAME fuzz_all
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/fuzz/run.sh --seconds 30 --jobs 1)
set_tests_properties(fuzz_all PROPERTIES
  LABELS fuzz RESOURCE_LOCK clang_fuzz TIMEOUT 3000 SKIP_RETURN_CODE 77
  ENVIRONMENT "WARREN_CLANG_OPT=-O0;WARREN_BUILD_LOCK=/tmp/warren-build-fuzz.lock")
