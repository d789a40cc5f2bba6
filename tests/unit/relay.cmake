# The relay (lobby/relay) every proxy of warren's shares: HTTP heads and framing (pure). Its
# streams and TLS are driven end to end by integrations_test and the web proxy's tests.
add_executable(relay_test unit/relay_http_head_test.cc)
target_link_libraries(relay_test PRIVATE warren_relay GTest::gtest_main)
gtest_discover_tests(relay_test DISCOVERY_MODE PRE_TEST PROPERTIES LABELS relay)
