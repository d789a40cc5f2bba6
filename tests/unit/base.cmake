add_executable(base_test unit/status_test.cc unit/log_test.cc unit/hex_test.cc
  unit/env_name_test.cc unit/event_waker_test.cc unit/target_url_test.cc
  unit/duration_test.cc unit/unix_socket_test.cc)
target_link_libraries(base_test PRIVATE warren_base GTest::gtest_main)
gtest_discover_tests(base_test DISCOVERY_MODE PRE_TEST)
