# The fake VmHost lives here, in tests, never in the product.
add_library(warren_test_fakes STATIC fakes/fake_vm_host.cc)
target_link_libraries(warren_test_fakes PUBLIC warren_vmhost)

add_executable(vmhost_test unit/vm_host_contract_test.cc)
target_link_libraries(vmhost_test PRIVATE warren_test_fakes GTest::gtest_main)
gtest_discover_tests(vmhost_test DISCOVERY_MODE PRE_TEST)
