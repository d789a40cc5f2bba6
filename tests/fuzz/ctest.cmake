# The suite's bounded fuzz step (tests/fuzz/README.md has the budget): builds build-fuzz/ with
# clang if needed (niced), replays every regression input, then fuzzes each target for 30 s,
# one at a time; fails on any crash, and on a missing clang or libFuzzer under CI. It holds
# `clang_builds` (tests/CMakeLists.txt): the sanitizer steps share build-fuzz/ with it, and
# one slot of `ctest -j2` is left to the rest of the suite.
add_test(NAME fuzz_all
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/fuzz/run.sh --seconds 30 --jobs 1)
set_tests_properties(fuzz_all PROPERTIES LABELS fuzz RESOURCE_LOCK clang_builds TIMEOUT 3000
                                         SKIP_RETURN_CODE 77)
