# The suite's sanitizer steps (tests/sanitizers/README.md has the budget): each builds its
# build dir with clang if needed and runs the unit binaries once, two at a time; any
# sanitizer finding or failed test fails it, and a missing clang or runtime fails under CI.
# sanitize_asan_ubsan builds in build-fuzz/, beside fuzz_all (the libraries are compiled
# once for both); sanitize_tsan in build-tsan/. RUN_SERIAL: both cores, and no timing test
# of the rest of the suite slowed by them. TIMEOUT covers an empty build dir.
add_test(NAME sanitize_asan_ubsan
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/sanitizers/run.sh --jobs 2 asan)
add_test(NAME sanitize_tsan COMMAND bash ${CMAKE_SOURCE_DIR}/tests/sanitizers/run.sh --jobs 2 tsan)
set_tests_properties(sanitize_asan_ubsan sanitize_tsan PROPERTIES
  LABELS sanitize RUN_SERIAL TRUE TIMEOUT 1500 SKIP_RETURN_CODE 77)
