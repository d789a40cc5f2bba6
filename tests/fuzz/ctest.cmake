# The suite's bounded fuzz step (tests/fuzz/README.md has the budget): builds build-fuzz/ with
# clang if needed, replays every regression input, then fuzzes each target for 30 s, two at a
# time; fails on any crash, and on a missing clang or libFuzzer under CI. RUN_SERIAL: it has
# both cores to itself, so its figures mean something and no other test's timing suffers.
add_test(NAME fuzz_all
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/fuzz/run.sh --seconds 30 --jobs 2)
set_tests_properties(fuzz_all PROPERTIES LABELS fuzz RUN_SERIAL TRUE TIMEOUT 1800
                                         SKIP_RETURN_CODE 77)
