# The command interpreter: tokenizer, dispatch and the built-in commands, against a real
# LmdbStore in a temp dir.
add_executable(commands_test unit/tokenizer_test.cc unit/interpreter_test.cc)
target_link_libraries(commands_test PRIVATE warren_commands warren_keys GTest::gtest_main)
gtest_discover_tests(commands_test DISCOVERY_MODE PRE_TEST)
