add_executable(bridge_test unit/http_server_test.cc)
target_link_libraries(bridge_test PRIVATE warren_bridge GTest::gtest_main)
gtest_discover_tests(bridge_test DISCOVERY_MODE PRE_TEST)
