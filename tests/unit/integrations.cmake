# The integrations proxy (lobby/integrations): HTTP heads (pure) and the proxy over
# socketpairs against a loopback upstream of the test's own (plain and TLS, curl included).
add_executable(integrations_test unit/integration_http_head_test.cc unit/integration_proxy_test.cc
  unit/integration_test_peers.cc)
target_link_libraries(integrations_test PRIVATE warren_integrations GTest::gtest_main)
gtest_discover_tests(integrations_test DISCOVERY_MODE PRE_TEST PROPERTIES LABELS integrations)
