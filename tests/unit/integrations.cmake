# The integrations proxy (lobby/integrations): its HTTP heads (pure) and the proxy over
# socketpairs against a loopback upstream of the test's own (plain and TLS, curl included).
add_executable(integrations_test unit/integration_http_head_test.cc unit/integration_proxy_test.cc
  unit/integration_test_peers.cc)
target_link_libraries(integrations_test PRIVATE warren_integrations GTest::gtest_main)
gtest_discover_tests(integrations_test DISCOVERY_MODE PRE_TEST PROPERTIES LABELS integrations)

# The endpoint end to end: SshGuestControl's remote forwards on a local sshd, the proxy,
# a loopback upstream (milliseconds; the guest setup is covered by guest_endpoint_vm).
add_executable(guest_endpoint_local_test unit/guest_endpoint_local_test.cc
  unit/integration_test_peers.cc)
target_link_libraries(guest_endpoint_local_test
  PRIVATE warren_guest_test_targets warren_integrations GTest::gtest_main)
gtest_discover_tests(guest_endpoint_local_test DISCOVERY_MODE PRE_TEST
  PROPERTIES LABELS "guest;integrations")

# The endpoint in a real Debian guest (booted once, TCG): the guest setup, curl inside the
# guest over http and https, the secret absent from the guest, a detach rewriting /etc/hosts.
add_executable(guest_endpoint_vm_test unit/guest_endpoint_vm_test.cc unit/integration_test_peers.cc)
target_link_libraries(guest_endpoint_vm_test
  PRIVATE warren_guest_test_targets warren_integrations GTest::gtest_main)
add_test(NAME guest_endpoint_vm COMMAND guest_endpoint_vm_test --gtest_filter=-*Tiny*)
# The same setup in the tiny image (busybox; http only, as tiny has no CA store or curl).
add_test(NAME guest_endpoint_vm_tiny COMMAND guest_endpoint_vm_test --gtest_filter=*Tiny*)
set_tests_properties(guest_endpoint_vm_tiny PROPERTIES ENVIRONMENT WARREN_GUEST_TEST_IMAGE=tiny)
set_tests_properties(guest_endpoint_vm guest_endpoint_vm_tiny PROPERTIES
  RESOURCE_LOCK guests_b TIMEOUT 1200 LABELS "guest;qemu;vm;integrations"
  SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\] [0-9]+ test")

add_executable(guest_endpoint_setup_test unit/guest_endpoint_setup_test.cc
  unit/integration_test_peers.cc)
target_link_libraries(guest_endpoint_setup_test PRIVATE warren_guest warren_integrations GTest::gtest_main)
gtest_discover_tests(guest_endpoint_setup_test DISCOVERY_MODE PRE_TEST PROPERTIES LABELS guest)
