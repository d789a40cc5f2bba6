# OAuth sign-in: pure rules, page rendering, token audience, and the store's state machine
# (real LMDB in temp directories).
add_executable(oauth_test ${CMAKE_CURRENT_LIST_DIR}/oauth_test.cc)
# LMDB directly too: the upgrade test rewinds a store to schema version 3.
target_link_libraries(oauth_test PRIVATE warren_oauth warren_keys PkgConfig::LMDB GTest::gtest_main)
gtest_discover_tests(oauth_test DISCOVERY_MODE PRE_TEST)
# oauth clients list|remove through the interpreter (real LMDB in a temp dir).
add_executable(cmd_oauth_test ${CMAKE_CURRENT_LIST_DIR}/cmd_oauth_test.cc)
target_link_libraries(cmd_oauth_test PRIVATE warren_commands warren_keys GTest::gtest_main)
gtest_discover_tests(cmd_oauth_test DISCOVERY_MODE PRE_TEST)
