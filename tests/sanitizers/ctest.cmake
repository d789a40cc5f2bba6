# The suite's sanitizer steps (tests/sanitizers/README.md has the budget): each builds its
# build dir with clang if needed (niced; -O0, for CI's compile time) and runs the unit
# binaries once, one at a time; any sanitizer finding or failed test fails it, and a missing
# clang or runtime fails under CI. sanitize_asan_ubsan builds in build-fuzz/, beside fuzz_all
# (the libraries are compiled once for both: they share the resource lock `clang_fuzz`);
# sanitize_tsan in build-tsan/ (lock `clang_tsan`), at the same time as those two, each
# with a build lock of its own (tests/CMakeLists.txt, "Scheduling"). TIMEOUT covers an
# empty build dir compiled beside guest tests.
add_test(NAME sanitize_asan_ubsan
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/sanitizers/run.sh --jobs 1 asan)
set_tests_properties(sanitize_asan_ubsan PROPERTIES
  LABELS sanitize RESOURCE_LOCK clang_fuzz TIMEOUT 3000 SKIP_RETURN_CODE 77
  ENVIRONMENT "WARREN_CLANG_OPT=-O0;WARREN_BUILD_LOCK=/tmp/warren-build-fuzz.lock")
add_test(NAME sanitize_tsan COMMAND bash ${CMAKE_SOURCE_DIR}/tests/sanitizers/run.sh --jobs 1 tsan)
set_tests_properties(sanitize_tsan PROPERTIES
  LABELS sanitize RESOURCE_LOCK clang_tsan TIMEOUT 3000 SKIP_RETURN_CODE 77
  ENVIRONMENT "WARREN_CLANG_OPT=-O0;WARREN_BUILD_LOCK=/tmp/warren-build-tsan.lock")
